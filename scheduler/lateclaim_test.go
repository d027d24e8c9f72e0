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
// when the claim's answer arrived: a claim that returned later than
// Lease − Lease/5 after the database stamped lease_until has its handler
// cancelled at once, while the database still says the lease holds — never
// left working past lease_until (where a rescuer may hand the job to
// another replica). Counting from dispatch instead, the handler worked on
// with the database lease nearly gone.
func TestLateClaimAnswerCountsLeaseFromClaimStart(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	const lease = 3 * time.Second
	late := &lateClaimStore{Store: st, delay: lease - lease/5 + 200*time.Millisecond}
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

	v := recv(t, first, slowWait, "attempt 1's handler ended")
	if v.cause != scheduler.ErrLeaseLost {
		t.Fatalf("attempt 1's handler: context cause %v, want ErrLeaseLost (its claim answered %s after the lease was stamped; lease %s)", v.cause, late.delay, lease)
	}
	if v.withinLease != 1 {
		t.Fatalf("attempt 1's handler was cancelled after its database lease ended (NOW(6) < lease_until = %d): it worked on past lease_until", v.withinLease)
	}
	final := waitJob(t, st, job.ID, slowWait, "the job re-run and SUCCESS", func(j jobq.Job) bool { return j.Status == jobq.StateSuccess })
	if final.Attempt != 2 {
		t.Fatalf("final attempt %d, want 2 (attempt 1 given up, rescued, re-claimed)", final.Attempt)
	}
	if got := execSummary(executions(t, st, job.ID)); len(got) != 2 {
		t.Fatalf("executions %v, want attempt 1 LEASE_EXPIRED then attempt 2 SUCCESS", got)
	} else {
		t.Logf("executions %v", got)
	}
}
