package scheduler_test

import (
	"context"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/faultstore"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
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
	final := waitJob(t, st, job.ID, slowWait, "SUCCESS", func(j jobq.Job) bool { return j.Status == jobq.StateSuccess })
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
