package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
)

// claimSizes records the size of every non-empty claim.
type claimSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (c *claimSizes) hook(jobs []jobq.ClaimedJob, _ int) {
	if len(jobs) == 0 {
		return
	}
	c.mu.Lock()
	c.sizes = append(c.sizes, len(jobs))
	c.mu.Unlock()
}

func (c *claimSizes) get() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.sizes...)
}

// While a long queue drains, the scanner waits (DrainWait) for a full batch
// of free worker slots instead of claiming each slot as it frees: with
// no-op handlers every claim takes exactly Workers jobs (n is a multiple of
// it). Without the wait claims follow the slots as they free one by one;
// that side is logged, not asserted: how many slots free between two claims
// depends on goroutine scheduling.
func TestDrainClaimsFullBatches(t *testing.T) {
	const workers, n = 20, 400
	for _, c := range []struct {
		name      string
		drainWait time.Duration
	}{{"wait", time.Second}, {"no-wait", -1}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			reg := scheduler.NewRegistry()
			jobtypes.Register(reg)
			for i := range n {
				submit(t, st, key("drain", i), "noop", `{}`, 0)
			}
			var sizes claimSizes
			cfg := fastConfig("drain-" + c.name)
			cfg.Workers, cfg.BatchLimit, cfg.DrainWait = workers, 200, c.drainWait
			cfg.RunQueue = -1 // claims sized by free workers alone (TestRunQueue covers the queue)
			cfg.Observer = on(scheduler.EventClaimed, func(e scheduler.Event) { sizes.hook(e.Jobs, e.Conflicts) })
			startScheduler(t, st, reg, cfg)
			waitSucceeded(t, n)
			got := sizes.get()
			total, partial := 0, 0
			for _, s := range got {
				total += s
				if s > workers {
					t.Fatalf("a claim took %d jobs, more than the %d worker slots", s, workers)
				}
				if s < workers {
					partial++
				}
			}
			if total != n {
				t.Fatalf("claimed %d jobs in %d claims, want %d", total, len(got), n)
			}
			t.Logf("%d claims, %d partial: %v", len(got), partial, got)
			if c.drainWait > 0 && partial > 0 {
				// Every slot frees within DrainWait, so no claim is short:
				// n is a multiple of workers.
				t.Fatalf("%d of %d claims took fewer than %d jobs: %v", partial, len(got), workers, got)
			}
		})
	}
}

// The completer lingers (CompleteLinger) while handlers run, so a no-op job
// and a job released after it started commit in one batch: their execution
// rows get the same finished_at (one statement's NOW(6)). Whichever hands on
// its outcome first, the other is still counted as running (both were
// dispatched before either ran), so the completer waits for it. With
// lingering off, the no-op job is written first, on its own.
func TestCompleteLingerBatchesCompletions(t *testing.T) {
	for _, c := range []struct {
		name      string
		linger    time.Duration
		sameBatch bool
	}{{"linger", time.Second, true}, {"no-linger", -1, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			reg := scheduler.NewRegistry()
			jobtypes.Register(reg)
			noopStarted := make(chan struct{})
			release := newGate(t)
			reg.Register("first", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
				close(noopStarted)
				return nil
			}))
			reg.Register("later", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
				<-release.Wait()
				return nil
			}))
			// One claim takes both (fastConfig: 20 workers).
			later := submit(t, st, "later", "later", `{}`, 0)
			first := submit(t, st, "first", "first", `{}`, 0)
			cfg := fastConfig("linger-" + c.name)
			cfg.CompleteLinger = c.linger
			startScheduler(t, st, reg, cfg)
			closed(t, noopStarted, slowWait, "the no-op job started")
			if !c.sameBatch {
				waitFinished(t, st, first.ID, jobq.OutcomeSuccess)
			}
			release.Open()
			for _, id := range []uint64{first.ID, later.ID} {
				waitFinished(t, st, id, jobq.OutcomeSuccess)
			}
			fin := func(id uint64) time.Time {
				ex := executions(t, st, id)
				if len(ex) != 1 || ex[0].FinishedAt == nil {
					t.Fatalf("job %d executions %v, want one finished", id, execSummary(ex))
				}
				return *ex[0].FinishedAt
			}
			a, b := fin(first.ID), fin(later.ID)
			if got := a.Equal(b); got != c.sameBatch {
				t.Fatalf("finished_at %s and %s: same batch = %v, want %v", a.Format(time.RFC3339Nano), b.Format(time.RFC3339Nano), got, c.sameBatch)
			}
		})
	}
}

// A lone job is neither held by DrainWait (the queue is short) nor by
// CompleteLinger (no other handler is running), even when both are 1s: on
// the database clock it finishes before either could have run out.
func TestLoneJobIsNotDelayedByBatching(t *testing.T) {
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	cfg := fastConfig("lone")
	cfg.DrainWait, cfg.CompleteLinger = time.Second, time.Second
	s := startScheduler(t, st, reg, cfg)
	j := submit(t, st, "lone", "noop", `{}`, 0)
	s.Wake()
	done := waitFinished(t, st, j.ID, jobq.OutcomeSuccess)
	if took := done.FinishedAt.Sub(done.CreateTime); took >= cfg.DrainWait {
		t.Fatalf("submit to finish took %s: held by the %s drain wait or completion linger", took, cfg.DrainWait)
	}
}

// Slots held by long-running handlers are not waited for: with 9 of 10
// slots blocked for the whole test and DrainWait at its 1s maximum, a
// backlog of short jobs drains one slot at a time at the pace the handlers
// return (claims of 1 that fill their batch), and a job submitted to the
// busy replica afterwards is picked up at once. Waiting for all 10 slots
// would cost 1s per claim: 100 s for the backlog.
func TestDrainWaitIgnoresSlotsHeldByLongHandlers(t *testing.T) {
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	hold := newGate(t)
	t.Cleanup(hold.Open)
	var blocked sync.WaitGroup
	blocked.Add(9)
	reg.Register("hold", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		blocked.Done()
		select {
		case <-hold.Wait():
		case <-ctx.Done():
		}
		return nil
	}))
	for i := range 9 {
		submit(t, st, key("hold", i), "hold", `{}`, 0)
	}
	cfg := fastConfig("held")
	cfg.Workers, cfg.DrainWait, cfg.ShutdownTimeout = 10, time.Second, 200*time.Millisecond
	s := startScheduler(t, st, reg, cfg)
	blocked.Wait()
	const n = 100
	for i := range n {
		submit(t, st, key("short", i), "noop", `{}`, 0)
	}
	s.Wake()
	waitSucceeded(t, n)
	lone := submit(t, st, "lone-busy", "noop", `{}`, 0)
	s.Wake()
	done := waitFinished(t, st, lone.ID, jobq.OutcomeSuccess)
	if took := done.FinishedAt.Sub(done.CreateTime); took >= cfg.DrainWait {
		t.Fatalf("a job submitted to the busy replica took %s: it waited the %s drain wait for slots held by long handlers", took, cfg.DrainWait)
	}
	hold.Open()
}
