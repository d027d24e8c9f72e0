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
		LimitedJobs: 200, UnlimitedJobs: 1000, Rounds: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Rounds[0]
	if r.LimitedStarts != 200 || r.MaxInWindow > 40 || r.MaxInWindow == 0 || r.AchievedRate <= 0 || r.AloneRate <= 0 || r.NextToRate <= 0 {
		t.Fatalf("round %+v: want 200 starts, at most 40 in a window, positive rates", r)
	}
}
