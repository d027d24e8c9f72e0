package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
)

// lateClaimStore is the real store whose first non-empty skiplocked claim
// answers delay after the database stamped the lease: a claim whose reply
// crossed a slow link, or whose replica was not scheduled for that long.
type lateClaimStore struct {
	scheduler.Store
	delay time.Duration
	done  atomic.Bool
}

func (s *lateClaimStore) JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	jobs, err := s.Store.JobClaimSkipLocked(ctx, p)
	if len(jobs) > 0 && s.done.CompareAndSwap(false, true) {
		time.Sleep(s.delay)
	}
	return jobs, err
}

// A run's local lease deadline counts from when its claim began, not from
// when the claim's answer arrived: a claim that returned 400 ms before
// Lease − Lease/5 after the database stamped lease_until has its handler
// cancelled by the guard while the database still says the lease holds —
// never left working past lease_until (where a rescuer may hand the job to
// another replica). Counting from dispatch instead, the handler worked on
// with the database lease nearly gone. On a loaded machine the handler may
// only get to start after the guard's point: then it does not start at all
// and attempt 1 is released (TestLateClaimPastItsLeaseNeverStarts), which
// the old count could not do either.
func TestLateClaimAnswerCountsLeaseFromClaimStart(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	const lease = 3 * time.Second
	late := &lateClaimStore{Store: st, delay: lease - lease/5 - 400*time.Millisecond}
	type verdict struct {
		cause       error
		withinLease int64
	}
	first := make(chan verdict, 1)
	reg := scheduler.NewRegistry()
	reg.Register("hold", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		if job.Attempt > 1 {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * lease): // never cancelled: the guard did not fire
		}
		var within int64
		if err := st.DB().QueryRow(`SELECT NOW(6) < lease_until FROM job_queue WHERE id = ? AND attempt = 1`, job.ID).Scan(&within); err != nil {
			within = -1 // the attempt-1 row is gone: rescued and re-claimed while this handler worked
		}
		first <- verdict{context.Cause(ctx), within}
		return context.Cause(ctx)
	}))
	cfg := fastConfig("late")
	cfg.Lease = lease
	startScheduler(t, late, reg, cfg)
	job := submit(t, st, "late-claim", "hold", `{}`, 3)

	final := waitJob(t, st, job.ID, slowWait, "the job re-run and SUCCESS", func(j jobq.Job) bool { return j.Status == jobq.StateSuccess })
	if final.Attempt != 2 {
		t.Fatalf("final attempt %d, want 2 (attempt 1 given up, re-claimed)", final.Attempt)
	}
	got := executions(t, st, job.ID)
	if len(got) != 2 {
		t.Fatalf("executions %v, want attempt 1 given up then attempt 2 SUCCESS", execSummary(got))
	}
	t.Logf("executions %v", execSummary(got))
	select {
	case v := <-first:
		if v.cause != scheduler.ErrLeaseLost {
			t.Fatalf("attempt 1's handler: context cause %v, want ErrLeaseLost (its claim answered %s after the lease was stamped; lease %s)", v.cause, late.delay, lease)
		}
		if v.withinLease != 1 {
			t.Fatalf("attempt 1's handler was cancelled after its database lease ended (NOW(6) < lease_until = %d): it worked on past lease_until", v.withinLease)
		}
	default:
		if got[0].Outcome != jobq.OutcomeReleased {
			t.Fatalf("attempt 1's handler never ran, yet its execution is %s, want RELEASED", got[0].Outcome)
		}
		t.Logf("attempt 1 reached a worker past its guard's point (a loaded machine): released, never started")
	}
}

// A run whose first lease deadline has already passed when it would start
// (its claim's answer came back more than a lease after the claim was
// sent) never starts its handler: the job is released, fenced by the
// attempt, without spending a retry — one execution row, RELEASED — and
// re-claimed as attempt 2. The old dispatcher started the handler (its
// guard cancelled it at once, and the cancelled run's failure spent a
// retry). The rescuer is kept away (a long rescue interval) so that the
// release, not a rescue, is what returns the job.
func TestLateClaimPastItsLeaseNeverStarts(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	const lease = 2 * time.Second
	late := &lateClaimStore{Store: st, delay: lease + 300*time.Millisecond}
	started := make(chan int, 4)
	reg := scheduler.NewRegistry()
	reg.Register("once", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		started <- job.Attempt
		return nil
	}))
	cfg := fastConfig("late-past")
	cfg.Lease, cfg.RescueInterval = lease, time.Hour
	s := startScheduler(t, late, reg, cfg)
	job := submit(t, st, "late-past", "once", `{}`, 3)

	if a := recv(t, started, slowWait, "a handler started"); a != 2 {
		t.Fatalf("the handler started attempt %d, want only attempt 2 (attempt 1's lease had run out before it could start)", a)
	}
	final := waitJob(t, st, job.ID, slowWait, "SUCCESS", func(j jobq.Job) bool { return j.Status == jobq.StateSuccess })
	ex := executions(t, st, job.ID)
	if final.Attempt != 2 || final.RetryTimes != 0 || len(ex) != 2 || ex[0].Outcome != jobq.OutcomeReleased || ex[1].Outcome != jobq.OutcomeSuccess {
		t.Fatalf("attempt %d, retry_times %d, executions %v; want attempt 2, 0, [1 RELEASED, 2 SUCCESS]", final.Attempt, final.RetryTimes, execSummary(ex))
	}
	if stats := s.Stats(); stats.Released != 1 || stats.Rescued != 0 {
		t.Fatalf("stats: released %d, rescued %d; want 1, 0", stats.Released, stats.Rescued)
	}
}
