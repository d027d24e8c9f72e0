package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// stallServer answers submits like jobq's API, but the stallAt-th request
// holds a lock every request needs for stall: the whole server freezes
// once, as during a GC pause or a database failover.
func stallServer(t *testing.T, stallAt int64, stall time.Duration) *httptest.Server {
	var n atomic.Int64
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		mu.Lock()
		if i == stallAt {
			time.Sleep(stall)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"job_key":"k-%d"}`, i, i)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCoordinatedOmission: 100 submits/s for 3 s against a server that
// freezes once for 1 s. About 100 intended sends fall into the freeze, so
// ~1/3 of all requests are late by up to 1 s and the p99 must be close to
// 1 s. With 2 workers, vegeta's own (actual-send) latency hides the stall:
// only the 2 requests in flight see it, under 1 % of 300.
func TestCoordinatedOmission(t *testing.T) {
	for _, workers := range []uint64{2, 1000} {
		t.Run(fmt.Sprintf("max_workers_%d", workers), func(t *testing.T) {
			srv := stallServer(t, 100, time.Second)
			cfg := Config{Targets: []string{srv.URL}, Stages: []Stage{{Rate: 100, Duration: 3 * time.Second}},
				Workers: min(workers, 10), MaxWorkers: workers, KeyPrefix: "co-"}
			th, err := ParseThresholds([]string{"submit.p99<100ms", "errors.rate<0.001"})
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(context.Background(), cfg, th)
			if err != nil {
				t.Fatal(err)
			}
			if r.Requests != 300 || r.Errors != 0 {
				t.Fatalf("requests=%d errors=%d, want 300 and 0", r.Requests, r.Errors)
			}
			p99, p50 := r.Submit.P["p99"], r.Submit.P["p50"]
			t.Logf("corrected p50=%s p99=%s max=%s; uncorrected p99=%s max=%s", p50, p99, r.Submit.Max,
				r.SubmitUncorrected.P["p99"], r.SubmitUncorrected.Max)
			if p99 < 900*time.Millisecond {
				t.Errorf("corrected p99 = %s, want ≥ 900ms: the 1 s stall must show", p99)
			}
			if p50 > 300*time.Millisecond {
				t.Errorf("corrected p50 = %s, want < 300ms: two thirds of the run was not stalled", p50)
			}
			if workers == 2 && r.SubmitUncorrected.P["p99"] > 500*time.Millisecond {
				t.Errorf("uncorrected p99 = %s, want < 500ms (coordinated omission expected with 2 workers)", r.SubmitUncorrected.P["p99"])
			}
			if r.Pass || r.Thresholds[0].Pass || !r.Thresholds[1].Pass {
				t.Errorf("thresholds = %+v, want submit.p99 failed and errors.rate passed", r.Thresholds)
			}
		})
	}
}
