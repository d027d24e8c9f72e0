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
		if tc, err := st.TypeSetRateLimit(ctx, typ, jobq.RateLimit{Starts: 5, Period: time.Hour}); err != nil || tc.RateStarts != 5 || tc.RatePeriod != time.Hour {
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
	if tc, err := st.TypeSetRateLimit(ctx, "rl", jobq.RateLimit{}); err != nil || tc.RateStarts != 0 {
		t.Fatalf("clear: %+v, %v", tc, err)
	}
	if cs, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "r", Limit: 50, Lease: time.Minute}); err != nil || len(cs) != 7 {
		t.Fatalf("ordinary claim after the clear took %d jobs (err %v), want the 7 left", len(cs), err)
	}
}

// A per-key limit of 3 per hour on a type whose jobs carry two rate keys
// (a backlog of 10 on key a, ahead in priority, 4 on key b) and 2 carry
// none (the key ”): one claim takes 3 of a, 3 of b and both unkeyed jobs
// — a's backlog does not hold b up — and holds the other 8 (HELD, each key
// with a rate_hold row opening an hour after its oldest start). Nothing
// more is taken in the window; the probe reports the type held. Once the
// windows have passed (the starts aged by two hours), the next claim
// releases and takes 3 of a's held jobs and b's last one, keeps a's other 3
// held and drops b's rate_hold row. Made per type, the type's HELD jobs
// are WAITING again.
func TestRateLimitPerKeyClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	submitKeyed := func(key, rateKey string, priority int) uint64 {
		t.Helper()
		j, created, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: key, JobType: "acct", Params: "{}", RequestHash: key,
			Priority: priority, RateKey: rateKey})
		if err != nil || !created || j.RateKey != rateKey {
			t.Fatalf("submit %s: %+v created=%v err=%v", key, j, created, err)
		}
		return j.ID
	}
	var aIDs []uint64
	for i := range 10 {
		aIDs = append(aIDs, submitKeyed(fmt.Sprintf("a-%d", i), "a", 100))
	}
	for i := range 4 {
		submitKeyed(fmt.Sprintf("b-%d", i), "b", 0)
	}
	submitKeyed("none-0", "", 0)
	submitKeyed("none-1", "", 0)
	tc, err := st.TypeSetRateLimit(ctx, "acct", jobq.RateLimit{Starts: 3, Period: time.Hour, PerKey: true})
	if err != nil || !tc.RatePerKey || tc.RateStarts != 3 {
		t.Fatalf("set per-key rate limit: %+v, %v", tc, err)
	}
	if cs, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "r", Limit: 50, Lease: time.Minute}); err != nil || len(cs) != 0 {
		t.Fatalf("ordinary claim took %d jobs of a per-key rate-limited type (err %v), want 0", len(cs), err)
	}
	claim := func() map[string]int {
		t.Helper()
		cs, err := st.JobClaimLimited(ctx, "acct", jobq.ClaimParams{Owner: "r", Limit: 50, Lease: time.Minute})
		if err != nil {
			t.Fatalf("limited claim: %v", err)
		}
		byKey := map[string]int{}
		for _, c := range cs {
			byKey[c.JobKey[:1]]++
		}
		return byKey
	}
	count := func(q string, args ...any) int64 {
		t.Helper()
		var n int64
		if err := st.DB().QueryRow(q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := claim(); got["a"] != 3 || got["b"] != 3 || got["n"] != 2 {
		t.Fatalf("first claim took %v by key, want a:3 b:3 none:2", got)
	}
	if held := count(`SELECT COUNT(*) FROM job_queue WHERE job_type = 'acct' AND status = 'HELD'`); held != 8 {
		t.Fatalf("%d HELD after the first claim, want 8 (7 of a, 1 of b)", held)
	}
	if n := count(`SELECT COUNT(*) FROM rate_hold WHERE job_type = 'acct' AND rate_key IN ('a', 'b')
		AND opens_at > NOW(6) + INTERVAL 59 MINUTE AND opens_at <= NOW(6) + INTERVAL 1 HOUR`); n != 2 {
		t.Fatalf("%d rate_hold rows for a and b opening in about an hour, want 2", n)
	}
	if n := count(`SELECT COUNT(*) FROM rate_start WHERE job_type = 'acct' AND rate_key = 'a'`); n != 3 {
		t.Fatalf("rate_start holds %d starts of key a, want 3", n)
	}
	if got := claim(); len(got) != 0 {
		t.Fatalf("second claim in the same windows took %v, want nothing", got)
	}
	pr, err := st.TypeProbe(ctx, "acct")
	if err != nil || pr.Claimable || !pr.RateHeld || pr.OpensIn < 59*time.Minute || pr.OpensIn > time.Hour {
		t.Fatalf("probe with every key full: %+v, %v; want held, opening in just under 1h", pr, err)
	}
	// A HELD job cancels like a waiting one.
	if _, err := st.JobCancel(ctx, aIDs[9]); err != nil {
		t.Fatalf("cancel a HELD job: %v", err)
	}
	if j, err := st.JobGet(ctx, aIDs[9]); err != nil || j.Status != jobq.StateCanceled {
		t.Fatalf("canceled HELD job: %+v, %v", j.Status, err)
	}

	if _, err := st.DB().Exec(`UPDATE rate_start SET started_at = started_at - INTERVAL 2 HOUR WHERE job_type = 'acct'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec(`UPDATE rate_hold SET opens_at = opens_at - INTERVAL 2 HOUR WHERE job_type = 'acct'`); err != nil {
		t.Fatal(err)
	}
	if pr, err := st.TypeProbe(ctx, "acct"); err != nil || !pr.Claimable {
		t.Fatalf("probe once the windows opened: %+v, %v; want claimable", pr, err)
	}
	if got := claim(); got["a"] != 3 || got["b"] != 1 || len(got) != 2 {
		t.Fatalf("claim after the windows opened took %v by key, want a:3 b:1", got)
	}
	if held := count(`SELECT COUNT(*) FROM job_queue WHERE job_type = 'acct' AND status = 'HELD' AND rate_key = 'a'`); held != 3 {
		t.Fatalf("%d of a's jobs HELD, want 3", held)
	}
	if n := count(`SELECT COUNT(*) FROM rate_hold WHERE job_type = 'acct' AND rate_key = 'b'`); n != 0 {
		t.Fatalf("b has no held job left but %d rate_hold rows", n)
	}

	if _, err := st.TypeSetRateLimit(ctx, "acct", jobq.RateLimit{Starts: 3, Period: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if held, holds := count(`SELECT COUNT(*) FROM job_queue WHERE status = 'HELD'`), count(`SELECT COUNT(*) FROM rate_hold`); held != 0 || holds != 0 {
		t.Fatalf("made per type: %d HELD jobs, %d rate_hold rows; want 0 and 0", held, holds)
	}
	if n := count(`SELECT COUNT(*) FROM job_queue WHERE job_type = 'acct' AND status = 'WAITING'`); n != 3 {
		t.Fatalf("%d of acct WAITING after the limit was made per type, want 3", n)
	}
}
