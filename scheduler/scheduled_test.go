package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/testbed/faultstore"
)

var strategies = []string{scheduler.StrategySkipLocked, scheduler.StrategyCAS}

// With one worker and batches of one, due jobs run strictly by priority
// (high to low), then run_at, then id; jobs not yet due do not run at all.
// Caught mutations: a claim ordering priority ASC, one ignoring run_at or
// id, a claim or promoter that takes SCHEDULED jobs before they are due.
func TestPriorityOrder(t *testing.T) {
	t.Parallel()
	for _, strategy := range strategies {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			// key, priority, seconds before now (run_at), in insert (id) order:
			// ties on priority and run_at are broken by id.
			rows := []struct {
				key      string
				priority int
				ago      int
			}{
				{"p0-old", 0, 50}, {"p5-new", 5, 10}, {"p-3", -3, 60}, {"p5-old", 5, 40},
				{"p0-new-a", 0, 5}, {"p9", 9, 1}, {"p0-new-b", 0, 5}, {"p5-new-b", 5, 10},
			}
			var sb strings.Builder
			sb.WriteString(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, run_at, create_time, update_time) VALUES `)
			for i, r := range rows {
				if i > 0 {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, "('%s', 'rec', '{}', 'h', 'WAITING', %d, NOW(6) - INTERVAL %d SECOND, NOW(6), NOW(6))", r.key, r.priority, r.ago)
			}
			// Higher priority than any due job, but not due for an hour.
			sb.WriteString(`, ('future-p100', 'rec', '{}', 'h', 'SCHEDULED', 100, NOW(6) + INTERVAL 1 HOUR, NOW(6), NOW(6))`)
			if _, err := st.DB().Exec(sb.String()); err != nil {
				t.Fatal(err)
			}
			order := &syncList{}
			done := make(chan struct{}, len(rows))
			reg := scheduler.NewRegistry()
			reg.Register("rec", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
				order.add(job.JobKey)
				done <- struct{}{}
				return nil
			}))
			cfg := fastConfig("a")
			// One claim in flight: two claims running at once take the next
			// jobs in order between them but may answer in either order.
			cfg.Strategy, cfg.Workers, cfg.BatchLimit, cfg.ClaimsInFlight = strategy, 1, 1, 1
			s := startScheduler(t, st, reg, cfg)
			for range rows {
				recv(t, done, slowWait, "a handler call")
			}
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
			want := []string{"p9", "p5-old", "p5-new", "p5-new-b", "p0-old", "p0-new-a", "p0-new-b", "p-3"}
			if got := order.get(); !slices.Equal(got, want) {
				t.Fatalf("run order %v, want %v", got, want)
			}
			j, err := st.JobGetByKey(context.Background(), "future-p100")
			if err != nil || j.Status != jobq.StateScheduled || j.Attempt != 0 {
				t.Fatalf("future job: status %s attempt %d err %v, want SCHEDULED, 0", j.Status, j.Attempt, err)
			}
		})
	}
}

// Jobs due now and jobs due at spread instants over the next second, mixed:
// every job runs once, and no execution starts before its due time on the
// database clock (job_execution.started_at ≥ due_at, both written by it).
// Caught mutations: a claim ignoring run_at (legacy WAITING rows below), a
// claim taking SCHEDULED jobs, a promoter and claim both ignoring run_at.
func TestNoExecutionBeforeDue(t *testing.T) {
	t.Parallel()
	for _, strategy := range strategies {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			const n = 120
			ctx := context.Background()
			st := testdb.Store(t)
			var mu sync.Mutex
			ran := map[string]int{}
			reg := scheduler.NewRegistry()
			reg.Register("rec", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
				mu.Lock()
				ran[job.JobKey]++
				mu.Unlock()
				return nil
			}))
			cfg := fastConfig("a")
			cfg.Strategy = strategy
			cfg.PollInterval, cfg.PollJitter = 200*time.Millisecond, 40*time.Millisecond
			s := startScheduler(t, st, reg, cfg)
			now, err := st.DBNow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				runAt := now.Add(-time.Second)
				if i%2 == 1 {
					// 0.3–1.2 s ahead of this submit's database clock (not of
					// the loop's start: a loaded machine can take seconds for
					// the 120 submits, and every job would be due at insert).
					if now, err = st.DBNow(ctx); err != nil {
						t.Fatal(err)
					}
					runAt = now.Add(300*time.Millisecond + time.Duration(i)*7*time.Millisecond)
				}
				j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: key("due", i), JobType: "rec", Params: "{}", RequestHash: "h", RunAt: &runAt})
				if err != nil {
					t.Fatal(err)
				}
				if j.Status == jobq.StateScheduled {
					s.WakeAt(j.RunAt, j.CreateTime)
				}
			}
			// WAITING rows not yet due, as a replica from before migration 005
			// writes them during a rolling upgrade: the claim itself must honour
			// run_at, not only the promoter.
			const legacy = 20
			if _, err := st.DB().Exec(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, run_at, create_time, update_time)
				SELECT CONCAT('legacy-', seq), 'rec', '{}', 'h', 'WAITING', NOW(6) + INTERVAL seq * 50000 MICROSECOND, NOW(6), NOW(6) FROM seq_1_to_20`); err != nil {
				t.Fatal(err)
			}
			waitSucceeded(t, n+legacy)
			if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_attempt WHERE started_at < due_at"); got != 0 {
				t.Fatalf("%d executions started before their due time", got)
			}
			if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_attempt"); got != n+legacy {
				t.Fatalf("executions = %d, want %d", got, n+legacy)
			}
			if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue q JOIN job_attempt e ON e.job_id = q.id WHERE e.due_at <> q.run_at"); got != 0 {
				t.Fatalf("%d executions record a due time other than the job's run_at", got)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(ran) != n+legacy {
				t.Fatalf("handlers ran %d distinct jobs, want %d", len(ran), n+legacy)
			}
			// A job inserted after its run_at (a slow machine takes more than
			// 1.2 s for the submits) is WAITING at once: the promoter's count
			// is the jobs inserted SCHEDULED (run_at ahead of the insert's
			// clock, create_time), not n/2. The submit's read-back cannot
			// tell: the promoter may have moved the row before it.
			scheduled := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue WHERE job_key LIKE 'due-%' AND run_at > create_time")
			if got := s.Stats().Promoted; got != scheduled || scheduled == 0 {
				t.Fatalf("promoted %d, want the %d jobs inserted SCHEDULED (> 0)", got, scheduled)
			}
		})
	}
}

// A failed attempt with a backoff is SCHEDULED until its retry is due, then
// promoted and run again.
func TestRetryBackoffGoesThroughScheduled(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	promoted := make(chan int, 10)
	reg := scheduler.NewRegistry()
	reg.Register("flaky", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		if job.Attempt == 1 {
			return fmt.Errorf("attempt %d fails by design", job.Attempt)
		}
		return nil
	}))
	cfg := fastConfig("a")
	cfg.RetryBackoffBase = 300 * time.Millisecond
	cfg.PromoteInterval = time.Hour // only the completer's local hint can wake the promoter in time
	cfg.Observer = on(scheduler.EventPromoted, func(e scheduler.Event) {
		if e.N > 0 {
			promoted <- e.N
		}
	})
	startScheduler(t, st, reg, cfg)
	job := submit(t, st, "flaky", "flaky", `{}`, 3)
	waitRequeued(t, st, job.ID) // attempt 1 failed: SCHEDULED with backoff
	if n := recv(t, promoted, slowWait, "the retry promoted"); n != 1 {
		t.Fatalf("promoted %d, want 1", n)
	}
	final := waitFinished(t, st, job.ID, jobq.OutcomeSuccess)
	ex := executions(t, st, job.ID)
	if got, want := fmt.Sprint(execSummary(ex)), "[1:a:FAILED 2:a:SUCCESS]"; got != want || final.RetryTimes != 1 {
		t.Fatalf("executions %s retry_times %d, want %s and 1", got, final.RetryTimes, want)
	}
	if ex[1].StartedAt.Before(final.RunAt) {
		t.Fatalf("attempt 2 started %s, before its run_at %s", ex[1].StartedAt, final.RunAt)
	}
}

// An idle skiplocked replica's promoter plans its passes from the scan's
// idle probe (JobIdleProbe), not from probes of its own: a job another
// replica scheduled (no local hint reaches this one) is promoted and run
// although the promoter's own interval is an hour, and the promoter sent
// no probe of its own meanwhile.
func TestIdleProbeFeedsThePromoter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	reg.Register("rec", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	fs := faultstore.Wrap(st)
	cfg := fastConfig("a")
	cfg.Strategy = scheduler.StrategySkipLocked
	cfg.PromoteInterval = time.Hour
	probes := make(chan struct{}, 100)
	fs.On("JobScheduledNext.before", func(context.Context) error {
		select {
		case probes <- struct{}{}:
		default:
		}
		return nil
	})
	startScheduler(t, fs, reg, cfg)
	// The promoter's first pass runs at start; wait for it so that every
	// later probe of its own would be one this test must not see.
	recv(t, probes, slowWait, "the promoter's first probe")
	now, err := st.DBNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runAt := now.Add(500 * time.Millisecond)
	j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: "elsewhere", JobType: "rec", Params: "{}", RequestHash: "h", RunAt: &runAt})
	if err != nil || j.Status != jobq.StateScheduled {
		t.Fatalf("submit: %v, status %s; want SCHEDULED", err, j.Status)
	}
	got := waitFinished(t, st, j.ID, jobq.OutcomeSuccess)
	ex := executions(t, st, j.ID)
	if len(ex) != 1 || ex[0].StartedAt.Before(got.RunAt) {
		t.Fatalf("executions %v, want one attempt started at or after run_at %s", execSummary(ex), got.RunAt)
	}
	// The pass that promoted the job probed once (its own JobScheduledNext
	// before promoting); no idle pass ran on the hour's interval.
	if n := len(probes); n > 2 {
		t.Fatalf("the promoter probed %d times after its first pass, want at most 2 (the promoting pass)", n)
	}
}
