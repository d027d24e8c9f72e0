package bench

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq/internal/testdb"
)

// The rate-limit bench, small: 3 replicas, 40 per 250 ms, 200 limited and
// 1,000 unlimited jobs. Every limited job starts, the fullest window holds
// at most the limit, and both drains report a rate. Speed is the bench's
// figure, not this test's.
func TestRateLimitBenchSmoke(t *testing.T) {
	res, err := RunRateLimit(context.Background(), RateLimitOptions{
		DSN: testdb.DSN(t), Out: t.TempDir(), RateStarts: 40, RatePeriod: 250 * time.Millisecond,
		LimitedJobs: 200, UnlimitedJobs: 1000, Rounds: 1, RateKeys: 3, HotJobs: 200, ColdJobs: 40,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Rounds[0]
	if r.LimitedStarts != 200 || r.MaxInWindow > 40 || r.MaxInWindow == 0 || r.AchievedRate <= 0 || r.AloneRate <= 0 || r.NextToRate <= 0 {
		t.Fatalf("round %+v: want 200 starts, at most 40 in a window, positive rates", r)
	}
	// Per key: every key's jobs start, at most 40 of one key in a window;
	// the cold keys (40 jobs each: one window) are done before the hot
	// key's 200 (five windows at least).
	hot := r.Keys[0]
	for _, k := range r.Keys {
		if want := map[bool]int{true: 200, false: 40}[k.Key == "hot"]; k.Starts != want || k.MaxInWindow > 40 || k.MaxInWindow == 0 {
			t.Fatalf("key %+v: want %d starts, at most 40 in a window", k, want)
		}
		if k.Key != "hot" && k.LastStart >= hot.LastStart {
			t.Fatalf("cold key %+v started its last job after the hot key's last (%+v)", k, hot)
		}
	}
}
