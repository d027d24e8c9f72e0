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
		time.Sleep(s.delay) // the injected fault: the claim's answer arrives this late (not a wait of the test)
	}
	return jobs, err
}

// A run's local lease deadline counts from when its claim began, not from
// when the claim's answer arrived: a claim that answered 200 ms past
// Lease − Lease/5 after it was sent (the guard's point; the database lease
// still holds) never starts its handler — the guard would cancel it at
// once — and the job is released. Counting from the answer (before
// 10c299b), the handler started and worked on with the database lease
// nearly gone.
func TestLateClaimAnswerCountsLeaseFromClaimStart(t *testing.T) {
	const lease = 3 * time.Second
	lateClaimNeverStarts(t, "late", lease, lease-lease/5+200*time.Millisecond)
}

// A run whose first lease deadline has already passed when it would start
// (its claim's answer came back more than a lease after the claim was
// sent) never starts its handler either. The old dispatcher started it
// (its guard cancelled it at once, and the cancelled run's failure spent a
// retry).
func TestLateClaimPastItsLeaseNeverStarts(t *testing.T) {
	const lease = 2 * time.Second
	lateClaimNeverStarts(t, "late-past", lease, lease+300*time.Millisecond)
}

// lateClaimNeverStarts runs one job whose first claim answers delay after
// it was sent, on a replica with the given lease, and checks that attempt 1
// never started: released, fenced by its attempt, without spending a retry
// (one execution row, RELEASED), then re-claimed and run as attempt 2. The
// rescuer is kept away (a long rescue interval) so that the release, not a
// rescue, is what returns the job.
func lateClaimNeverStarts(t *testing.T, owner string, lease, delay time.Duration) {
	t.Helper()
	t.Parallel()
	st := testdb.Store(t)
	late := &lateClaimStore{Store: st, delay: delay}
	started := make(chan int, 4)
	reg := scheduler.NewRegistry()
	reg.Register("once", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		started <- job.Attempt
		return nil
	}))
	cfg := fastConfig(owner)
	cfg.Lease, cfg.RescueInterval = lease, time.Hour
	s := startScheduler(t, late, reg, cfg)
	job := submit(t, st, owner, "once", `{}`, 3)

	if a := recv(t, started, slowWait, "a handler started"); a != 2 {
		t.Fatalf("the handler started attempt %d, want only attempt 2 (attempt 1's claim answered %s after it was sent, lease %s: past its guard's point)", a, delay, lease)
	}
	final := waitFinished(t, st, job.ID, jobq.OutcomeSuccess)
	ex := executions(t, st, job.ID)
	if final.Attempt != 2 || final.RetryTimes != 0 || len(ex) != 2 || ex[0].Outcome != jobq.OutcomeReleased || ex[1].Outcome != jobq.OutcomeSuccess {
		t.Fatalf("attempt %d, retry_times %d, executions %v; want attempt 2, 0, [1 RELEASED, 2 SUCCESS]", final.Attempt, final.RetryTimes, execSummary(ex))
	}
	if stats := s.Stats(); stats.Released != 1 || stats.Rescued != 0 {
		t.Fatalf("stats: released %d, rescued %d; want 1, 0", stats.Released, stats.Rescued)
	}
}
