package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/chaos/checker"
)

// Two replicas race one type limited to 20 starts per 500 ms, with 100 jobs
// due: job_execution never shows more than 20 starts in any 500 ms window.
// The replicas' poll interval is an hour, so no scan but the first (woken
// by the test) comes from the timer: every window after the first is taken
// because a replica woke when the window opened — held-back jobs wait for
// the window, not for a poll.
func TestOpsRateLimitAcrossReplicas(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	reg := scheduler.NewRegistry()
	reg.Register("rl", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	const n, period, jobs = 20, 500 * time.Millisecond, 100
	if _, err := st.TypeSetRateLimit(ctx, "rl", jobq.RateLimit{Starts: n, Period: period}); err != nil {
		t.Fatalf("set rate limit: %v", err)
	}
	for i := range jobs {
		submit(t, st, key("rl", i), "rl", `{}`, 0)
	}
	startWokenReplicas(t, st, reg)
	waitSucceeded(t, jobs)
	if held := events(t).Count(scheduler.EventRateHeld, func(e scheduler.Event) bool { return e.Name == "rl" }); held == 0 {
		t.Fatalf("no %s event: the window never held jobs back", scheduler.EventRateHeld)
	}
	starts := executionStarts(t, st, "rl", "")
	if len(starts) != jobs {
		t.Fatalf("%d executions of rl, want %d", len(starts), jobs)
	}
	if got := checker.MostInWindow(starts, period); got != n {
		t.Fatalf("most starts in a %s window = %d, want %d (the limit, reached)", period, got, n)
	}
}

// A type limited to 1 start a day with 50 jobs due at the head of the
// queue: one starts, the other 49 wait (the probe reports them held, the
// window opening in about a day), and meanwhile 300 jobs of another type
// all run — the ordinary scan steps past the held-back jobs.
func TestOpsRateLimitedTypeDoesNotHoldUpOthers(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	reg := scheduler.NewRegistry()
	reg.Register("daily", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	reg.Register("other", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	if _, err := st.TypeSetRateLimit(ctx, "daily", jobq.RateLimit{Starts: 1, Period: 24 * time.Hour}); err != nil {
		t.Fatalf("set rate limit: %v", err)
	}
	for i := range 50 {
		opSubmit(t, st, apitype.SubmitRequest{JobKey: key("daily", i), JobType: "daily", Priority: ptr(100), MaxRetry: ptr(0)})
	}
	startScheduler(t, st, reg, fastConfig("r1"))
	startScheduler(t, st, reg, fastConfig("r2"))
	held := events(t).WaitFor(t, scheduler.EventRateHeld, func(e scheduler.Event) bool { return e.Name == "daily" }, slowWait)
	if held.Duration < 23*time.Hour {
		t.Fatalf("window opens in %s, want about a day", held.Duration)
	}
	const others = 300
	for i := range others {
		submit(t, st, key("other", i), "other", `{}`, 0)
	}
	waitSucceeded(t, others+1)
	count := func(status string) int64 {
		return scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue WHERE job_type = 'daily' AND status = ?", status)
	}
	if done, waiting := count("SUCCESS"), count("WAITING"); done != 1 || waiting != 49 {
		t.Fatalf("daily: %d SUCCESS, %d WAITING; want 1 and 49", done, waiting)
	}
}

// startWokenReplicas starts replicas r1 and r2 with an hour's poll and
// wakes each once: every later scan comes from a wake, not from the timer.
func startWokenReplicas(t *testing.T, st *store.Store, reg *scheduler.Registry) []*scheduler.Scheduler {
	t.Helper()
	var reps []*scheduler.Scheduler
	for _, owner := range []string{"r1", "r2"} {
		cfg := fastConfig(owner)
		cfg.PollInterval, cfg.PollJitter = time.Hour, time.Millisecond
		reps = append(reps, startScheduler(t, st, reg, cfg))
	}
	for _, s := range reps {
		s.Wake()
	}
	return reps
}

// executionStarts returns the started_at of every attempt of jobType's
// jobs (with rate key rateKey, unless it is ""), in order.
func executionStarts(t *testing.T, st *store.Store, jobType, rateKey string) []time.Time {
	t.Helper()
	rows, err := st.DB().Query(`SELECT e.started_at FROM job_attempt e JOIN job_queue q ON q.id = e.job_id
		WHERE q.job_type = ? AND (? = '' OR q.rate_key = ?) ORDER BY e.started_at`, jobType, rateKey, rateKey)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var starts []time.Time
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			t.Fatal(err)
		}
		starts = append(starts, at)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return starts
}

// Two replicas with an hour's poll serve a type limited to 5 starts per
// 400 ms per rate key: key a has 20 jobs due ahead of key b's 5 in priority.
// Each key gets its 5 per window, never more (per key, job_execution never
// shows more than 5 starts in any 400 ms window); b is not held up by a's
// backlog (all of b starts within a's first window); a's over-limit jobs
// wait HELD and are taken as their key's window opens (the replicas wake
// for it: a's 20 run in at least 4 windows, with no poll in between).
func TestOpsRateLimitPerKeyAcrossReplicas(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	reg := scheduler.NewRegistry()
	reg.Register("acct", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	const n, period = 5, 400 * time.Millisecond
	if _, err := st.TypeSetRateLimit(ctx, "acct", jobq.RateLimit{Starts: n, Period: period, PerKey: true}); err != nil {
		t.Fatalf("set rate limit: %v", err)
	}
	for i := range 20 {
		opSubmit(t, st, apitype.SubmitRequest{JobKey: key("a", i), JobType: "acct", Priority: ptr(100), RateKey: "a"})
	}
	for i := range n {
		opSubmit(t, st, apitype.SubmitRequest{JobKey: key("b", i), JobType: "acct", RateKey: "b"})
	}
	startWokenReplicas(t, st, reg)
	waitSucceeded(t, 20+n)
	if held := events(t).Count(scheduler.EventRateHeld, func(e scheduler.Event) bool { return e.Name == "acct" }); held == 0 {
		t.Fatalf("no %s event: the windows never held jobs back", scheduler.EventRateHeld)
	}
	a, b := executionStarts(t, st, "acct", "a"), executionStarts(t, st, "acct", "b")
	// Every job ran (waitSucceeded); a loaded machine may add attempts (a
	// run rescued after a lost lease), and each of them counts as a start.
	if len(a) < 20 || len(b) < n {
		t.Fatalf("%d executions of key a, %d of b; want at least 20 and %d", len(a), len(b), n)
	}
	for k, starts := range map[string][]time.Time{"a": a, "b": b} {
		if got := checker.MostInWindow(starts, period); got != n {
			t.Fatalf("key %s: most starts in a %s window = %d, want %d (the limit, reached)", k, period, got, n)
		}
	}
	if last := b[len(b)-1]; !last.Before(a[0].Add(period)) {
		t.Fatalf("key b's last start %s is not within key a's first window (from %s): a held b up", last, a[0])
	}
	if span := a[len(a)-1].Sub(a[0]); span < 3*period {
		t.Fatalf("key a's 20 starts span %s, want at least 3 windows of %s", span, period)
	}
}

// A claim of a per-key type that meets only jobs of full keys holds them
// all and takes nothing; the replica still learns when the first key's
// window opens and wakes then. Two replicas with an hour's poll, 2 starts
// per 500 ms per key: 2 jobs of key a start; 3 more submitted while a's
// window is full are held by the next (woken) claim, and then all start,
// window by window, with no poll and no wake from the test.
func TestOpsRateLimitPerKeyHeldByAClaimThatTookNothing(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	reg := scheduler.NewRegistry()
	reg.Register("acct", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	if _, err := st.TypeSetRateLimit(ctx, "acct", jobq.RateLimit{Starts: 2, Period: 500 * time.Millisecond, PerKey: true}); err != nil {
		t.Fatalf("set rate limit: %v", err)
	}
	for i := range 2 {
		opSubmit(t, st, apitype.SubmitRequest{JobKey: key("a", i), JobType: "acct", RateKey: "a"})
	}
	reps := startWokenReplicas(t, st, reg)
	waitSucceeded(t, 2)
	for i := 2; i < 5; i++ {
		opSubmit(t, st, apitype.SubmitRequest{JobKey: key("a", i), JobType: "acct", RateKey: "a"})
	}
	reps[0].Wake()
	waitSucceeded(t, 5)
	if got := checker.MostInWindow(executionStarts(t, st, "acct", "a"), 500*time.Millisecond); got > 2 {
		t.Fatalf("most starts of key a in a 500ms window = %d, want at most 2", got)
	}
}
