package scheduler_test

import (
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
	"github.com/jobq/jobq/testbed/faultstore"
	testbedtypes "github.com/jobq/jobq/testbed/jobtypes"
)

// A completion whose commit succeeded but whose acknowledgement was lost
// (the connection died after COMMIT) is retried; the retry finds the run's
// own outcome already recorded and counts it as applied, not stale — the
// audit row keeps its SUCCESS / tx effect exactly once.
func TestLostCommitAckIsNotStale(t *testing.T) {
	for _, typ := range []string{jobtypes.Noop, testbedtypes.Effect} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			reg := scheduler.NewRegistry()
			registerTestbedTypes(t, st, reg)
			fs := faultstore.Wrap(st)
			// Both completion paths: the batched one (noop) and the
			// transactional one (effect).
			fs.FailNext("JobCompleteMany.after", 1, mysql.ErrInvalidConn)
			fs.FailNext("JobCompleteTx.after", 1, mysql.ErrInvalidConn)
			s := startScheduler(t, fs, reg, fastConfig("a"))
			job := submit(t, st, "lost-ack-"+typ, typ, `{}`, 3)
			// The first completion event of the job: applied, or stale
			// when the retry did not find the run's own committed outcome.
			ev := events(t).WaitFor(t, scheduler.EventCompleted, schedulertest.Job(job.ID), slowWait)
			if !ev.Applied {
				t.Fatalf("the retried completion counted stale: the run's own committed SUCCESS was not found (event %+v)", ev.Completion)
			}
			got := getJob(t, st, job.ID)
			if got.Status != jobq.StateSuccess {
				t.Fatalf("status = %s, want SUCCESS", got.Status)
			}
			if got.Attempt != 1 {
				t.Fatalf("attempt = %d, want 1", got.Attempt)
			}
			stats := s.Stats() // counted before the completion's event reached the recorder
			if stats.Completed != 1 || stats.Stale != 0 || stats.Succeeded != 1 || stats.DBRetries < 1 {
				t.Fatalf("stats stale=%d succeeded=%d db_retries=%d, want 0, 1, ≥1", stats.Stale, stats.Succeeded, stats.DBRetries)
			}
			ex := executions(t, st, job.ID)
			if len(ex) != 1 || ex[0].Outcome != jobq.OutcomeSuccess {
				t.Fatalf("executions = %v, want one SUCCESS", execSummary(ex))
			}
			if typ == testbedtypes.Effect {
				if n := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_effect WHERE job_id=? AND kind='tx'", job.ID); n != 1 {
					t.Fatalf("tx effects = %d, want 1", n)
				}
			}
		})
	}
}
