package loadtest

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
)

func testdbStore(t *testing.T) *store.Store { return testdb.Store(t) }

func TestSchedule(t *testing.T) {
	s := newSchedule([]Stage{{Rate: 10, Duration: time.Second}, {Rate: 100, Duration: 2 * time.Second}})
	if s.Total() != 210 || s.Duration() != 3*time.Second {
		t.Fatalf("total=%d duration=%s, want 210 and 3s", s.Total(), s.Duration())
	}
	for _, c := range []struct {
		n    uint64
		want time.Duration
	}{{0, 0}, {1, 100 * time.Millisecond}, {9, 900 * time.Millisecond}, {10, time.Second},
		{11, time.Second + 10*time.Millisecond}, {209, 2990 * time.Millisecond}} {
		if got := s.At(c.n); got != c.want {
			t.Errorf("At(%d) = %s, want %s", c.n, got, c.want)
		}
	}
	if w, stop := s.Pace(0, 1); w != 100*time.Millisecond || stop {
		t.Errorf("Pace(0, 1) = %s, %v; want 100ms, false", w, stop)
	}
	if w, stop := s.Pace(2*time.Second, 5); w != 0 || stop {
		t.Errorf("Pace late = %s, %v; want 0 (catch up), false", w, stop)
	}
	if _, stop := s.Pace(5*time.Second, 210); !stop {
		t.Error("Pace after the last submit must stop")
	}
	if r := s.Rate(1500 * time.Millisecond); r != 100 {
		t.Errorf("Rate(1.5s) = %v, want 100", r)
	}
	if _, err := ParseStages("50:10s, 100:5s"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "50", "0:1s", "50:x", "-1:1s"} {
		if _, err := ParseStages(bad); err == nil {
			t.Errorf("ParseStages(%q): want an error", bad)
		}
	}
}

func TestThresholds(t *testing.T) {
	r := &Result{hSubmit: newHist(), hRaw: newHist(), hPickup: newHist(), hFinish: newHist(), Requests: 1000, Errors: 2, ErrorRate: 0.002}
	for i := 1; i <= 100; i++ {
		record(r.hPickup, time.Duration(i)*time.Millisecond) // p99 = 99ms, max = 100ms
	}
	for _, c := range []struct {
		expr string
		pass bool
	}{
		{"pickup.p99<100ms", true}, {"pickup.p99<50ms", false}, {"pickup.max<=101ms", true}, // 3 significant digits
		{"pickup.p50>=50ms", true}, {"pickup.mean<40ms", false}, {"pickup.p99.9<1s", true},
		{"errors.rate<0.001", false}, {"errors.rate<0.01", true}, {"errors.count==2", true},
		{"submit.p99<1s", false}, // no data fails
	} {
		th, err := ParseThreshold(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if v := th.Eval(r); v.Pass != c.pass {
			t.Errorf("%s: pass=%v (actual %s), want %v", c.expr, v.Pass, v.Actual, c.pass)
		}
	}
	for _, bad := range []string{"pickup.p99", "pickup.p99<fast", "latency.p99<1s", "errors.p99<1", "pickup.rate<1", "pickup.p200<1s"} {
		if _, err := ParseThreshold(bad); err == nil {
			t.Errorf("ParseThreshold(%q): want an error", bad)
		}
	}
}

// TestSearchRates drives the search with a synthetic system whose
// thresholds hold up to 437 submits/s.
func TestSearchRates(t *testing.T) {
	const limit = 437.0
	var tried []float64
	trial := func(_ context.Context, rate float64) (Trial, error) {
		tried = append(tried, rate)
		return Trial{Rate: rate, Pass: rate <= limit}, nil
	}
	c, err := searchRates(context.Background(), CapacityConfig{}.WithDefaults(), trial)
	if err != nil {
		t.Fatal(err)
	}
	if c.Rate > limit || c.Rate < limit*0.9 || c.High <= limit || (c.High-c.Rate)/c.Rate > 0.1 {
		t.Fatalf("capacity = %v (fail at %v) after %v; want within 10%% below %v", c.Rate, c.High, tried, limit)
	}
	if fmt.Sprint(tried[:4]) != "[50 100 200 400]" {
		t.Errorf("tried %v, want doubling from 50 first", tried)
	}
	// Nothing passes: capacity 0; everything passes: capped at MaxRate.
	c, _ = searchRates(context.Background(), CapacityConfig{StartRate: 50, MaxRate: 400, MaxTrials: 10, Resolution: 0.1},
		func(_ context.Context, r float64) (Trial, error) { return Trial{Rate: r, Pass: false}, nil })
	if c.Rate != 0 || c.High == 0 {
		t.Errorf("all failing: capacity %v high %v, want 0 and > 0", c.Rate, c.High)
	}
	c, _ = searchRates(context.Background(), CapacityConfig{StartRate: 50, MaxRate: 400, MaxTrials: 10, Resolution: 0.1},
		func(_ context.Context, r float64) (Trial, error) { return Trial{Rate: r, Pass: true}, nil })
	if c.Rate != 400 || c.High != 0 || len(c.Trials) != 4 {
		t.Errorf("all passing: capacity %v high %v trials %d, want 400, 0, 4", c.Rate, c.High, len(c.Trials))
	}
}

// TestRunAgainstReplica runs 2 s of 40 submits/s against a real in-process
// replica on its own database and checks what is read back: every job
// picked up and finished, 0 < pickup ≤ finish, the clock offset 0 (same
// host, one CLOCK_REALTIME) within the probe's own uncertainty and
// consistent with every job's create_time, and the outputs. Latencies are
// logged, not asserted beyond a 2-minute hang bound: their size is the
// bench's business.
func TestRunAgainstReplica(t *testing.T) {
	dsn := testdb.DSN(t)
	ctx := context.Background()
	rep, err := app.Start(ctx, app.Config{DSN: dsn, Listen: "127.0.0.1:0",
		Scheduler: scheduler.Config{Workers: 8, PollInterval: 200 * time.Millisecond, PollJitter: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Stop(ctx)
	var progress []Progress
	cfg := Config{Targets: []string{"http://" + rep.Addr}, DSN: dsn, Stages: []Stage{{Rate: 40, Duration: 2 * time.Second}},
		Name: "test", ProgressFunc: func(p Progress) { progress = append(progress, p) }}
	th, _ := ParseThresholds([]string{"pickup.p99<2m", "unstarted.count==0", "errors.rate<0.001"})
	r, err := Run(ctx, cfg, th)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 80 || r.OK != 80 || r.Pickup.Count != 80 || r.Finish.Count != 80 || r.Unstarted != 0 || r.Unfinished != 0 {
		t.Fatalf("requests=%d ok=%d pickup=%d finish=%d unstarted=%d unfinished=%d; want 80 each and 0 left",
			r.Requests, r.OK, r.Pickup.Count, r.Finish.Count, r.Unstarted, r.Unfinished)
	}
	if !r.Pass {
		t.Errorf("thresholds failed: %+v", r.Thresholds)
	}
	t.Logf("pickup p50 %s p99 %s, finish p50 %s, clock %+v", r.Pickup.P["p50"], r.Pickup.P["p99"], r.Finish.P["p50"], r.Clock)
	if r.Pickup.Min <= 0 || r.Finish.P["p50"] < r.Pickup.P["p50"] {
		t.Errorf("pickup min %s p50 %s, finish p50 %s: want 0 < pickup ≤ finish", r.Pickup.Min, r.Pickup.P["p50"], r.Finish.P["p50"])
	}
	c := r.Clock
	// DB times are microseconds: 1µs of rounding on top of the probe's own uncertainty.
	if math.Abs(float64(c.Offset)) > float64(c.Uncertainty+time.Microsecond) || !c.OffsetInBounds || c.BoundsJobs != 80 || c.BoundsLow > c.BoundsHigh {
		t.Errorf("clock %+v: want offset 0 ± its uncertainty on one host, inside the create_time bounds of 80 jobs", c)
	}
	if r.Throughput <= 0 || len(r.Series) < 2 || r.Series[0].Sent == 0 {
		t.Errorf("throughput %v, series %+v", r.Throughput, r.Series)
	}
	if len(progress) == 0 || !strings.Contains(fmt.Sprint(progress[len(progress)-1].Phase), "drain") {
		t.Errorf("progress reports %d, want load reports then drain", len(progress))
	}
	dir := t.TempDir()
	var out strings.Builder
	PrintSpectrum(&out, r)
	if !strings.Contains(out.String(), "99.9") || !strings.Contains(out.String(), "pickup") {
		t.Errorf("spectrum:\n%s", out.String())
	}
	if err := WriteJSON(filepath.Join(dir, "loadtest.json"), &Report{Run: r}); err != nil {
		t.Fatal(err)
	}
	if err := WritePNG(filepath.Join(dir, "loadtest.png"), r); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "loadtest.png")); len(b) < 1000 || string(b[1:4]) != "PNG" {
		t.Errorf("loadtest.png: %d bytes, not a PNG", len(b))
	}
}
