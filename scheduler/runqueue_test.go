package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
)

// With a run queue, a replica whose handlers return quickly claims more
// jobs than it has workers (the queue is sized by the jobs it finishes);
// every job still runs once and leaves exactly one execution row.
func TestRunQueueClaimsBeyondWorkers(t *testing.T) {
	t.Parallel()
	const workers, n = 4, 600
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	for i := range n {
		submit(t, st, key("rq", i), "noop", `{}`, 0)
	}
	var sizes claimSizes
	cfg := fastConfig("rq")
	cfg.Workers, cfg.BatchLimit, cfg.RunQueue = workers, 200, 100
	cfg.Hooks.ClaimedFunc = sizes.hook
	startScheduler(t, st, reg, cfg)
	waitFor(t, slowWait, "all jobs SUCCESS", func() (bool, error) {
		got, err := countStatus(st, jobq.StateSuccess)
		return got == n, err
	})
	got := sizes.get()
	if m := slices.Max(got); m <= workers || m > workers+100 {
		t.Fatalf("largest claim %d jobs, want more than %d workers and at most %d (workers + run queue); claims %v", m, workers, workers+100, got)
	}
	if bad := scalar(t, st.DB(), `SELECT COUNT(*) FROM job_queue q
		WHERE q.attempt <> 1 OR 1 <> (SELECT COUNT(*) FROM job_execution e WHERE e.job_id = q.id AND e.outcome = 'SUCCESS')`); bad != 0 {
		t.Fatalf("%d jobs not run exactly once with one SUCCESS row", bad)
	}
}

// At shutdown, queued jobs that never started are released to WAITING
// without spending a retry (one RELEASED execution row each), as is the run
// cancelled at the shutdown timeout.
func TestRunQueueReleasedAtShutdown(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	reg.Register("hold", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}))
	const quick, held = 200, 30
	cfg := fastConfig("rq-stop")
	cfg.Workers, cfg.BatchLimit, cfg.RunQueue = 1, 50, 40
	cfg.ShutdownTimeout = 100 * time.Millisecond
	s := startScheduler(t, st, reg, cfg)
	// Quick jobs first (higher priority) so the queue has places when the
	// held jobs are claimed.
	for i := range quick {
		submitPriority(t, st, key("quick", i), "noop", 10)
	}
	for i := range held {
		submitPriority(t, st, key("held", i), "hold", 0)
	}
	s.Wake()
	waitFor(t, slowWait, "held jobs queued behind the running one", func() (bool, error) {
		var n int64
		err := st.DB().QueryRow("SELECT COUNT(*) FROM job_queue WHERE job_type = 'hold' AND status = 'RUNNING'").Scan(&n)
		return n > 1, err
	})
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if n := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue WHERE job_type = 'hold' AND (status <> 'WAITING' OR retry_times <> 0)"); n != 0 {
		logOutcomes(t, st)
		t.Fatalf("%d held jobs not WAITING with retry_times 0 after shutdown", n)
	}
	// Claims go on until Stop, so the count held at the stop is not known
	// in advance: every execution of a held job (they never end on their
	// own) must be RELEASED, and at least the two seen RUNNING above.
	if got := scalar(t, st.DB(), `SELECT COUNT(*) FROM job_execution e JOIN job_queue q ON q.id = e.job_id
		WHERE q.job_type = 'hold' AND e.outcome <> 'RELEASED'`); got != 0 {
		logOutcomes(t, st)
		t.Fatalf("%d executions of held jobs not RELEASED (every job held at the stop is released)", got)
	}
	if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_execution WHERE outcome = 'RELEASED'"); got < 2 {
		t.Fatalf("RELEASED executions = %d, want ≥ 2 (the running held job and the queued ones)", got)
	}
	if bad := scalar(t, st.DB(), `SELECT COUNT(*) FROM job_queue q
		WHERE q.attempt <> (SELECT COUNT(*) FROM job_execution e WHERE e.job_id = q.id)`); bad != 0 {
		t.Fatalf("%d jobs without exactly one execution row per attempt", bad)
	}
}

func submitPriority(t *testing.T, st interface {
	JobSubmit(context.Context, jobq.SubmitParams) (jobq.Job, bool, error)
}, k, typ string, prio int) {
	t.Helper()
	if _, _, err := st.JobSubmit(context.Background(), jobq.SubmitParams{JobKey: k, JobType: typ, Params: "{}",
		RequestHash: fmt.Sprint(k), Priority: prio, MaxRetry: 3}); err != nil {
		t.Fatalf("submit %s: %v", k, err)
	}
}
