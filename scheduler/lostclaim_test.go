package scheduler_test

import (
	"context"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/testbed/faultstore"
)

// A claim whose COMMIT reached the database while its answer was lost (the
// connection died after it) leaves the job RUNNING under this replica's
// owner id with no handler. The replica finds it at once (JobHeldBy after
// the failed try) and runs it as attempt 1 — it does not wait, unrenewed,
// for the rescuer to expire the lease and hand out attempt 2.
func TestClaimWithLostAnswerIsAdoptedNotRescued(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	fs := faultstore.Wrap(st)
	fs.FailNext(faultstore.ClaimSkipLockedAfter, 1, mysql.ErrInvalidConn)
	ran := make(chan int, 4)
	reg := scheduler.NewRegistry()
	reg.Register("once", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		ran <- job.Attempt
		return nil
	}))
	s := startScheduler(t, fs, reg, fastConfig("lost-answer"))
	job := submit(t, st, "lost-answer", "once", `{}`, 3)

	if got := recv(t, ran, slowWait, "the handler ran"); got != 1 {
		t.Fatalf("the handler ran attempt %d, want 1 (the lost claim's own run, adopted)", got)
	}
	final := waitFinished(t, st, job.ID, jobq.OutcomeSuccess)
	if final.Attempt != 1 {
		t.Fatalf("final attempt %d, want 1", final.Attempt)
	}
	if ex := execSummary(executions(t, st, job.ID)); len(ex) != 1 {
		t.Fatalf("executions %v, want one SUCCESS (no LEASE_EXPIRED attempt)", ex)
	}
	stats := s.Stats()
	if stats.Adopted != 1 || stats.Rescued != 0 || stats.ClaimErrors+stats.DBRetries == 0 {
		t.Fatalf("stats: adopted %d rescued %d claim errors %d db retries %d; want 1 adopted, 0 rescued, the lost answer seen",
			stats.Adopted, stats.Rescued, stats.ClaimErrors, stats.DBRetries)
	}
	select {
	case a := <-ran:
		t.Fatalf("the handler ran again (attempt %d)", a)
	default:
	}
}

// A lost-answer claim found when no worker slot (and no run-queue place) is
// free is released at once, like a queued run at shutdown: WAITING, fenced
// by its attempt, no retry spent, its one execution row RELEASED. It is not
// left RUNNING, unrenewed, for the rescuer to expire after the lease (which
// spent a retry and wrote LEASE_EXPIRED for a run that never started).
//
// One worker, no run queue, two due jobs: the first claim try commits job A
// and loses its answer; its retry claims job B, whose handler holds the only
// worker; the reconciliation after the failed try then finds A held and
// nowhere to run it.
func TestLostClaimWithoutFreeSlotIsReleased(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	fs := faultstore.Wrap(st)
	fs.FailNext(faultstore.ClaimSkipLockedAfter, 1, mysql.ErrInvalidConn)
	started := make(chan uint64, 4)
	unblock := make(chan struct{})
	reg := scheduler.NewRegistry()
	reg.Register("hold", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		started <- job.ID
		select {
		case <-unblock:
		case <-ctx.Done():
		}
		return nil
	}))
	a := submit(t, st, "lost-full-a", "hold", `{}`, 3)
	b := submit(t, st, "lost-full-b", "hold", `{}`, 3)
	cfg := fastConfig("lost-full")
	cfg.Workers, cfg.RunQueue, cfg.BatchLimit = 1, -1, 1
	s := startScheduler(t, fs, reg, cfg)

	first := recv(t, started, slowWait, "a handler started")
	lost := a.ID
	if first == a.ID {
		lost = b.ID
	}
	// The lost claim committed before the retry that started `first`.
	events(t).WaitFor(t, scheduler.EventCompleted, func(e scheduler.Event) bool {
		return e.Completion.ID == lost && e.Completion.Outcome == jobq.OutcomeReleased
	}, slowWait)
	j := getJob(t, st, lost)
	ex := executions(t, st, lost)
	if j.Status != jobq.StateWaiting || j.RetryTimes != 0 || len(ex) != 1 || ex[0].Attempt != 1 || ex[0].Outcome != jobq.OutcomeReleased {
		t.Fatalf("lost claim's job: %s, retry_times %d, executions %v; want WAITING, 0, [1 RELEASED]", j.Status, j.RetryTimes, execSummary(ex))
	}
	close(unblock)
	for _, id := range []uint64{a.ID, b.ID} {
		waitFinished(t, st, id, jobq.OutcomeSuccess)
	}
	final := getJob(t, st, lost)
	if got := execSummary(executions(t, st, lost)); final.Attempt != 2 || final.RetryTimes != 0 || len(got) != 2 {
		t.Fatalf("lost claim's job: attempt %d, retry_times %d, executions %v; want attempt 2, 0, [RELEASED SUCCESS]", final.Attempt, final.RetryTimes, got)
	}
	if got := execSummary(executions(t, st, first)); len(got) != 1 {
		t.Fatalf("the other job's executions %v, want one SUCCESS", got)
	}
	if stats := s.Stats(); stats.Released != 1 || stats.Adopted != 0 || stats.Rescued != 0 {
		t.Fatalf("stats: released %d adopted %d rescued %d; want 1, 0, 0", stats.Released, stats.Adopted, stats.Rescued)
	}
}
