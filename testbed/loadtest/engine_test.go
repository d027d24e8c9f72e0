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
// freezes once for 1 s. Its verdicts are invariants, true on any machine
// speed (a slower machine only adds latency); how much the uncorrected
// view hides is logged, and ratios are the bench's business:
//   - every submit is counted once, none fails;
//   - the corrected (intended-send) latency is never below vegeta's own,
//     percentile by percentile, and the percentiles are ordered;
//   - the stall is recorded: the request that hit it took ≥ 1 s in both
//     views, and the ~10 submits intended in the stall's first 100 ms
//     waited ≥ 900 ms from their intended send — 3 % of 300, so the
//     corrected p99 is ≥ 900 ms and a submit.p99<100ms threshold fails;
//   - with 2 workers both are held by the stall, so the next sends go out
//     ≥ 900 ms behind schedule (SendLagMax): the generator itself was
//     stalled, and only the corrected view charges that wait.
func TestCoordinatedOmission(t *testing.T) {
	const stall = time.Second
	for _, workers := range []uint64{2, 1000} {
		t.Run(fmt.Sprintf("max_workers_%d", workers), func(t *testing.T) {
			srv := stallServer(t, 100, stall)
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
			c, u := r.Submit, r.SubmitUncorrected
			t.Logf("corrected p50=%s p99=%s max=%s; uncorrected p50=%s p99=%s max=%s; send lag max %s", c.P["p50"], c.P["p99"], c.Max,
				u.P["p50"], u.P["p99"], u.Max, r.SendLagMax)
			if r.Requests != 300 || r.OK != 300 || r.Errors != 0 || c.Count != 300 || u.Count != 300 {
				t.Fatalf("requests=%d ok=%d errors=%d recorded %d/%d, want 300, 300, 0, 300/300", r.Requests, r.OK, r.Errors, c.Count, u.Count)
			}
			prev := time.Duration(0)
			for _, p := range Percentiles {
				name := pname(p)
				if c.P[name] < u.P[name] {
					t.Errorf("%s: corrected %s < uncorrected %s", name, c.P[name], u.P[name])
				}
				if c.P[name] < prev {
					t.Errorf("corrected %s = %s, below the previous percentile %s", name, c.P[name], prev)
				}
				prev = c.P[name]
			}
			if c.Max < u.Max || c.Max < prev {
				t.Errorf("corrected max %s below uncorrected max %s or p-max %s", c.Max, u.Max, prev)
			}
			if u.Max < stall {
				t.Errorf("uncorrected max = %s, want ≥ %s: the request that hit the stall waited it out", u.Max, stall)
			}
			if c.P["p99"] < 900*time.Millisecond {
				t.Errorf("corrected p99 = %s, want ≥ 900ms: the 1 s stall must show", c.P["p99"])
			}
			if workers == 2 && r.SendLagMax < 900*time.Millisecond {
				t.Errorf("send lag max = %s, want ≥ 900ms: both workers were held by the stall", r.SendLagMax)
			}
			if r.Pass || r.Thresholds[0].Pass || !r.Thresholds[1].Pass {
				t.Errorf("thresholds = %+v, want submit.p99 failed and errors.rate passed", r.Thresholds)
			}
		})
	}
}
