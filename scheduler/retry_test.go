package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/faultstore"
	testbedtypes "github.com/jobq/jobq/testbed/jobtypes"
	"github.com/jobq/jobq/testbed/sabotage"
)

// backoffSpread checks retry offsets (microseconds) against a base delay:
// max − min must be at least 40% of base, and no slice of 5% of that span
// may hold more than 15% of the offsets. It returns what is wrong, or "".
func backoffSpread(offsets []int64, base time.Duration) string {
	if len(offsets) == 0 {
		return "no offsets"
	}
	lo, hi := offsets[0], offsets[0]
	for _, o := range offsets {
		lo, hi = min(lo, o), max(hi, o)
	}
	span := hi - lo
	if float64(span) < 0.4*float64(base.Microseconds()) {
		return fmt.Sprintf("offsets span %dµs (min %d, max %d), want ≥ 40%% of the base %s", span, lo, hi, base)
	}
	const slices = 20 // 5% of the span each
	var bins [slices]int
	for _, o := range offsets {
		i := min(int((o-lo)*slices/span), slices-1)
		bins[i]++
	}
	for i, n := range bins {
		if float64(n) > 0.15*float64(len(offsets)) {
			return fmt.Sprintf("slice %d of 20 holds %d of %d retries (> 15%%): %v", i, n, len(offsets), bins)
		}
	}
	return ""
}

// 1,000 jobs failing at once are re-queued spread over the jittered backoff,
// not all at the same instant.
func TestRetryBackoffSpreadsRequeues(t *testing.T) {
	t.Parallel()
	const n = 1000
	// Nothing re-runs during the test however slow the machine: the first
	// retry is due 45–75 minutes after each failure.
	const base = time.Hour
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	reg.Register("fail", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		return errors.New("fails by design")
	}))
	t0 := time.Now()
	// One multi-row INSERT: the rows a submit writes, without 1,000 commits.
	var sb strings.Builder
	sb.WriteString(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, max_retry, run_at, create_time, update_time) VALUES `)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "('fail-%d', 'fail', '{}', REPEAT('0', 64), 'WAITING', 1, NOW(6), NOW(6), NOW(6))", i)
	}
	if _, err := st.DB().Exec(sb.String()); err != nil {
		t.Fatalf("insert jobs: %v", err)
	}
	t.Logf("inserted %d jobs in %s", n, time.Since(t0))
	t.Cleanup(func() {
		if t.Failed() {
			logOutcomes(t, st)
		}
	})
	cfg := fastConfig("a")
	cfg.RetryBackoffBase = base
	cfg.Workers = 200
	cfg.Logger = bufferedLogger(t)
	s := startScheduler(t, st, reg, cfg)
	// Every job's first attempt failed and was re-queued.
	events(t).WaitN(t, scheduler.EventCompleted, func(e scheduler.Event) bool {
		return e.Applied && e.Completion.Outcome == jobq.OutcomeFailed && e.Completion.Retry
	}, n, slowWait)
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("all failed and re-queued after %s", time.Since(t0))

	// offset = run_at − the attempt-1 execution's finished_at, both written by
	// the database clock in the completion's transaction.
	rows, err := st.DB().Query(`SELECT TIMESTAMPDIFF(MICROSECOND, e.finished_at, q.run_at)
		FROM job_queue q JOIN job_attempt e ON e.job_id = q.id AND e.attempt = 1 AND e.outcome = 'FAILED'`)
	if err != nil {
		t.Fatalf("offsets: %v", err)
	}
	defer rows.Close()
	var offsets []int64
	for rows.Next() {
		var o int64
		if err := rows.Scan(&o); err != nil {
			t.Fatalf("scan offset: %v", err)
		}
		offsets = append(offsets, o)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("offsets: %v", err)
	}
	if len(offsets) != n {
		t.Fatalf("failed attempt-1 executions = %d, want %d", len(offsets), n)
	}
	if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_attempt"); got != n {
		t.Fatalf("executions = %d, want %d (no job re-ran)", got, n)
	}
	// Every offset lies in the documented range base·[1−0.25, 1+0.25]
	// (a minute of slack: finished_at is read by a later statement of the
	// same transaction, which may wait for locks a concurrent claim holds —
	// for long on a loaded machine).
	lo, hi := int64(0.75*float64(base.Microseconds()))-60_000_000, int64(1.25*float64(base.Microseconds()))
	for _, o := range offsets {
		if o < lo || o > hi {
			t.Fatalf("offset %dµs outside [%d, %d]", o, lo, hi)
		}
	}
	if msg := backoffSpread(offsets, base); msg != "" {
		t.Fatal(msg)
	}
}

// The spread check fails on re-queues that are not spread (all at once, or
// bunched), so it can catch a missing jitter.
func TestBackoffSpreadCheckCatchesBunching(t *testing.T) {
	t.Parallel()
	base := 10 * time.Second
	same := make([]int64, 1000)
	for i := range same {
		same[i] = 10_000_000
	}
	bunched := make([]int64, 1000)
	for i := range bunched {
		bunched[i] = 8_000_000 + int64(i%10)*400_000 // span 3.6 s < 4 s
	}
	clump := make([]int64, 1000)
	for i := range clump {
		clump[i] = 7_500_000 + int64(i)*5_000 // uniform over 5 s …
		if i < 200 {
			clump[i] = 10_000_000 // … but 20% at one instant
		}
	}
	for name, offs := range map[string][]int64{"same": same, "bunched": bunched, "clump": clump} {
		if backoffSpread(offs, base) == "" {
			t.Errorf("%s: spread check passed, want it to fail", name)
		}
	}
}

// A deadlock (1213) on the claim and on the completion is retried: the job
// runs once, with one execution row.
func TestDeadlockRetried(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		strategy   string
		claimAt    string
		jobType    string
		completeAt string
	}{
		{"skiplocked", scheduler.StrategySkipLocked, faultstore.ClaimSkipLocked, "count", faultstore.CompleteBefore},
		{"cas", scheduler.StrategyCAS, faultstore.ClaimCASBefore, "count", faultstore.CompleteBefore},
		{"skiplocked tx", scheduler.StrategySkipLocked, faultstore.ClaimSkipLocked, testbedtypes.Effect, faultstore.CompleteTxBefore},
		{"cas tx", scheduler.StrategyCAS, faultstore.ClaimCASBefore, testbedtypes.Effect, faultstore.CompleteTxBefore},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			calls := newInvocations()
			reg := scheduler.NewRegistry()
			registerTestbedTypes(t, st, reg)
			reg.Register("count", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
				calls.add(job)
				return nil
			}))
			job := submit(t, st, "dl", c.jobType, `{}`, 3)
			fs := faultstore.Wrap(st)
			fs.FailNext(c.claimAt, 1, faultstore.Deadlock)
			fs.FailNext(c.completeAt, 1, faultstore.Deadlock)
			dbErrs := &syncList{}
			cfg := fastConfig("a")
			cfg.Strategy = c.strategy
			hook, done := completions()
			cfg.Observer = scheduler.Observers(hook, on(scheduler.EventDBError, func(e scheduler.Event) {
				dbErrs.add(fmt.Sprintf("%s:%d", e.Op, store.ErrorNumber(e.Err)))
			}))
			s := startScheduler(t, fs, reg, cfg)
			comp := recv(t, done, slowWait, "the completion")
			if err := s.Stop(); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if !comp.Applied || comp.Outcome != jobq.OutcomeSuccess {
				t.Fatalf("completion = %+v, want an applied SUCCESS", comp)
			}
			st2 := s.Stats()
			if st2.DBRetries != 2 || st2.ClaimErrors != 0 || st2.Claimed != 1 || st2.Succeeded != 1 {
				t.Fatalf("stats db_retries=%d claim_errors=%d claimed=%d succeeded=%d, want 2, 0, 1, 1 (db errors %v)",
					st2.DBRetries, st2.ClaimErrors, st2.Claimed, st2.Succeeded, dbErrs.get())
			}
			j := getJob(t, st, job.ID)
			if j.Status != jobq.StateSuccess || j.Attempt != 1 || j.RetryTimes != 0 {
				t.Fatalf("job status=%s attempt=%d retry_times=%d, want SUCCESS 1 0", j.Status, j.Attempt, j.RetryTimes)
			}
			want := []string{"1:a:SUCCESS"}
			if got := execSummary(executions(t, st, job.ID)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("executions = %v, want %v", got, want)
			}
			if c.jobType == "count" {
				if got := calls.byAttempt(); fmt.Sprint(got) != fmt.Sprint(map[int]int{1: 1}) {
					t.Fatalf("handler calls = %v, want map[1:1]", got)
				}
			} else if tx := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_effect WHERE kind = 'tx'"); tx != 1 {
				t.Fatalf("tx effects = %d, want 1", tx)
			}
		})
	}
}

// With the testbed's deadlock-retry sabotage the same deadlocks are not retried: the
// claim fails (the next scan claims the job), the completion is lost and the
// job runs a second time after its lease expires — the check above fails.
func TestDeadlockNotRetriedWhenRetriesAreBroken(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	job := submit(t, st, "dl", jobtypes.Noop, `{}`, 3)
	fs := faultstore.Wrap(st)
	fs.FailNext(faultstore.ClaimSkipLocked, 1, faultstore.Deadlock)
	fs.FailNext(faultstore.CompleteBefore, 1, faultstore.Deadlock)
	cfg := fastConfig("a")
	cfg.Strategy = scheduler.StrategySkipLocked
	cfg.Lease = time.Second
	s := startScheduler(t, sabotage.Wrap(fs, st.DB(), sabotage.Switches{NoDeadlockRetry: true}), reg, cfg)
	j := waitFinished(t, st, job.ID, jobq.OutcomeSuccess)
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stats := s.Stats()
	if stats.DBRetries != 0 || stats.ClaimErrors != 1 {
		t.Fatalf("stats db_retries=%d claim_errors=%d, want 0 and 1", stats.DBRetries, stats.ClaimErrors)
	}
	if j.Attempt != 2 || j.RetryTimes != 1 {
		t.Fatalf("job attempt=%d retry_times=%d, want 2 and 1 (the lost completion made it run again)", j.Attempt, j.RetryTimes)
	}
	want := []string{"1:a:LEASE_EXPIRED", "2:a:SUCCESS"}
	if got := execSummary(executions(t, st, job.ID)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("executions = %v, want %v", got, want)
	}
}
