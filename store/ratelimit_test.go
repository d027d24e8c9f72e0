package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
)

// A rate limit of 5 per hour: the limited claim takes 5 of 12 due jobs and
// then nothing, records each start with the started_at the claim stamped,
// and the probe reports the type held by its window, which opens one hour
// after the oldest start. A worker's fetch of a rate-limited remote type
// draws on a window of its own type the same way, and the ordinary claims
// never take a rate-limited type.
func TestRateLimitedClaimTakesWhatTheWindowAllows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	st.SetRemoteTypes([]string{"resize"})
	for i := range 12 {
		submitJob(t, st, fmt.Sprintf("rl-%d", i), "rl", 0)
		submitJob(t, st, fmt.Sprintf("rz-%d", i), "resize", 0)
	}
	for _, typ := range []string{"rl", "resize"} {
		if tc, err := st.TypeSetRateLimit(ctx, typ, 5, time.Hour); err != nil || tc.RateStarts != 5 || tc.RatePeriod != time.Hour {
			t.Fatalf("set rate limit of %s: %+v, %v", typ, tc, err)
		}
	}
	if cs, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "r", Limit: 50, Lease: time.Minute}); err != nil || len(cs) != 0 {
		t.Fatalf("ordinary claim took %d jobs of a rate-limited type (err %v), want 0", len(cs), err)
	}
	if pr, err := st.TypeProbe(ctx, "rl"); err != nil || !pr.Claimable {
		t.Fatalf("probe before any start: %+v, %v; want claimable", pr, err)
	}
	claim := func() []jobq.ClaimedJob {
		t.Helper()
		cs, err := st.JobClaimLimited(ctx, "rl", jobq.ClaimParams{Owner: "r", Limit: 50, Lease: time.Minute})
		if err != nil {
			t.Fatalf("limited claim: %v", err)
		}
		return cs
	}
	first := claim()
	if len(first) != 5 {
		t.Fatalf("first claim took %d jobs, want 5", len(first))
	}
	if again := claim(); len(again) != 0 {
		t.Fatalf("second claim in the same window took %d jobs, want 0", len(again))
	}
	var recorded, matching int64
	if err := st.DB().QueryRow(`SELECT COUNT(*), COALESCE(SUM(s.started_at = q.started_at), 0) FROM rate_start s
		JOIN job_queue q ON q.id = s.job_id WHERE s.job_type = 'rl'`).Scan(&recorded, &matching); err != nil {
		t.Fatal(err)
	}
	if recorded != 5 || matching != 5 {
		t.Fatalf("rate_start holds %d starts of rl, %d with the job's started_at; want 5 and 5", recorded, matching)
	}
	pr, err := st.TypeProbe(ctx, "rl")
	if err != nil || pr.Claimable || !pr.RateHeld || pr.OpensIn < 59*time.Minute || pr.OpensIn > time.Hour {
		t.Fatalf("probe of a full window: %+v, %v; want held, opening in just under 1h", pr, err)
	}

	remote := func() []jobq.ClaimedJob {
		t.Helper()
		cs, err := st.JobClaimRemote(ctx, jobq.RemoteClaimParams{Owner: jobq.WorkerOwnerPrefix + "w", Types: []string{"resize"},
			Limit: 50, Lease: time.Minute, Nonce: []byte("0123456789abcdef")})
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		return cs
	}
	got := remote()
	if len(got) != 5 {
		t.Fatalf("fetch of a rate-limited remote type took %d jobs, want 5", len(got))
	}
	for _, c := range got {
		if c.JobType != "resize" || c.Attempt != 1 || c.StartedAt.IsZero() {
			t.Fatalf("fetched %+v", c)
		}
	}
	if again := remote(); len(again) != 0 {
		t.Fatalf("second fetch in the same window took %d jobs, want 0", len(again))
	}

	// Cleared, the type is the ordinary claim's again.
	if tc, err := st.TypeSetRateLimit(ctx, "rl", 0, 0); err != nil || tc.RateStarts != 0 {
		t.Fatalf("clear: %+v, %v", tc, err)
	}
	if cs, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "r", Limit: 50, Lease: time.Minute}); err != nil || len(cs) != 7 {
		t.Fatalf("ordinary claim after the clear took %d jobs (err %v), want the 7 left", len(cs), err)
	}
}
