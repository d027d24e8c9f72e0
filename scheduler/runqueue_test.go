package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
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
	cfg.Observer = on(scheduler.EventClaimed, func(e scheduler.Event) { sizes.hook(e.Jobs, e.Conflicts) })
	startScheduler(t, st, reg, cfg)
	waitSucceeded(t, n)
	got := sizes.get()
	if m := slices.Max(got); m <= workers || m > workers+100 {
		t.Fatalf("largest claim %d jobs, want more than %d workers and at most %d (workers + run queue); claims %v", m, workers, workers+100, got)
	}
	// A job the run queue gave back unstarted (a queue stuck for the
	// run-queue wait: a starved machine) has RELEASED rows before its one
	// SUCCESS; its handler still ran once.
	if bad := scalar(t, st.DB(), `SELECT COUNT(*) FROM job_queue q
		WHERE 1 <> (SELECT COUNT(*) FROM job_attempt e WHERE e.job_id = q.id AND e.outcome = 'SUCCESS')
		   OR q.attempt <> (SELECT COUNT(*) FROM job_attempt e WHERE e.job_id = q.id AND e.outcome IN ('SUCCESS', 'RELEASED'))`); bad != 0 {
		t.Fatalf("%d jobs not run exactly once with one SUCCESS row (and RELEASED rows only besides)", bad)
	}
}

// At shutdown, queued jobs that never started are released to WAITING
// without spending a retry (one RELEASED execution row each, "never
// started"), as is the run cancelled at the shutdown timeout. The queue is
// filled by signals (queueFill): the first claim of three or more jobs makes
// the next handler hold the one worker, so the rest of that claim is queued
// behind it whatever the machine's speed. (It used to wait for jobs claimed
// after a burst of quick ones to reach the queue, which needs a claim within
// the run queue's 100 ms window of the last finish: a loaded machine missed
// it and the wait hung for its full 2 minutes.)
func TestRunQueueReleasedAtShutdown(t *testing.T) {
	t.Parallel()
	const n = 300
	st := testdb.Store(t)
	q := newQueueFill(st, 3)
	reg := scheduler.NewRegistry()
	reg.Register("fill", q.handler())
	for i := range n {
		submitPriority(t, st, key("fill", i), "fill", 0)
	}
	cfg := fastConfig("rq-stop")
	cfg.Workers, cfg.BatchLimit, cfg.RunQueue = 1, 50, 40
	// The held jobs stay queued behind the running one until the stop: no
	// give-back (TestRunQueueLongJobsGoToIdlePeer covers it).
	cfg.RunQueueWait = -1
	cfg.ShutdownTimeout = 100 * time.Millisecond
	s := startScheduler(t, q, reg, cfg)
	s.Wake()
	q.awaitHeld(t, st, n)
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if bad := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue WHERE status NOT IN ('SUCCESS', 'WAITING') OR retry_times <> 0"); bad != 0 {
		logOutcomes(t, st)
		t.Fatalf("%d jobs neither SUCCESS nor WAITING with retry_times 0 after shutdown", bad)
	}
	// Every job that did not succeed was held at the stop: its one
	// execution row is RELEASED.
	if got := scalar(t, st.DB(), `SELECT COUNT(*) FROM job_attempt e JOIN job_queue q ON q.id = e.job_id
		WHERE q.status = 'WAITING' AND e.outcome <> 'RELEASED'`); got != 0 {
		logOutcomes(t, st)
		t.Fatalf("%d executions of jobs held at the stop not RELEASED (every job held at the stop is released)", got)
	}
	if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_attempt WHERE outcome NOT IN ('SUCCESS', 'RELEASED')"); got != 0 {
		logOutcomes(t, st)
		t.Fatalf("%d executions neither SUCCESS nor RELEASED", got)
	}
	// The holding run (cancelled at the shutdown timeout) and at least
	// min-1 queued ones that never started.
	if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_attempt WHERE outcome = 'RELEASED' AND error LIKE '%never started%'"); got < int64(q.min-1) {
		logOutcomes(t, st)
		t.Fatalf("RELEASED never-started executions = %d, want ≥ %d (the queued jobs)", got, q.min-1)
	}
	if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_attempt WHERE outcome = 'RELEASED'"); got < int64(q.min) {
		t.Fatalf("RELEASED executions = %d, want ≥ %d (the running held job and the queued ones)", got, q.min)
	}
	if bad := scalar(t, st.DB(), `SELECT COUNT(*) FROM job_queue q
		WHERE q.attempt <> (SELECT COUNT(*) FROM job_attempt e WHERE e.job_id = q.id)`); bad != 0 {
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

// heldClaims is the real store with its SKIP LOCKED claims held by
// signals, never by sleeps: each claim after the first waits until a second
// claim is running too (or pairWait passed), so two claims in flight are
// seen at the database; once gate is set, a claim says so on entered and
// waits until the gate opens or its context ends (a stop began). The claim
// then runs on the database whatever happened to its context, as a claim
// whose answer arrives after a stop began. It records the most claims in
// flight at once.
type heldClaims struct {
	*store.Store
	pairWait time.Duration
	paired   chan struct{} // closed once two claims ran at once
	pairOnce sync.Once
	gate     atomic.Pointer[chan struct{}]
	entered  chan struct{} // a token per claim that reached the gate
	// answeredAfterStop counts claims whose context ended at the gate.
	answeredAfterStop atomic.Int64
	mu                sync.Mutex
	sent              int
	running           int
	most              int
}

func newHeldClaims(st *store.Store, pairWait time.Duration) *heldClaims {
	return &heldClaims{Store: st, pairWait: pairWait, paired: make(chan struct{}), entered: make(chan struct{}, 16)}
}

func (h *heldClaims) JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	h.mu.Lock()
	h.sent++
	first := h.sent == 1
	h.running++
	h.most = max(h.most, h.running)
	if h.running >= 2 {
		h.pairOnce.Do(func() { close(h.paired) })
	}
	h.mu.Unlock()
	defer func() { h.mu.Lock(); h.running--; h.mu.Unlock() }()
	if g := h.gate.Load(); g != nil {
		select {
		case h.entered <- struct{}{}:
		default:
		}
		select {
		case <-*g:
		case <-ctx.Done():
			h.answeredAfterStop.Add(1)
		}
	} else if !first {
		select {
		case <-h.paired:
		case <-time.After(h.pairWait):
		}
	}
	return h.Store.JobClaimSkipLocked(context.WithoutCancel(ctx), p)
}

func (h *heldClaims) mostInFlight() int { h.mu.Lock(); defer h.mu.Unlock(); return h.most }

// With two claims in flight, the runs of both claims keep their leases
// (the heartbeat renews every run whatever claim took it: no rescue after
// several leases) and are released at shutdown without spending a retry,
// including the runs of claims still in flight when the stop began (the
// stop waits for them; their runs are handled like every other at shutdown).
func TestTwoClaimsInFlightHoldLeasesAndReleaseAtShutdown(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	reg.Register("hold", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}))
	const workers, batch, n = 16, 4, 40
	for i := range n {
		submitPriority(t, st, key("inflight", i), "hold", 0)
	}
	hc := newHeldClaims(st, slowWait)
	cfg := fastConfig("inflight")
	cfg.Workers, cfg.BatchLimit, cfg.RunQueue, cfg.ClaimsInFlight = workers, batch, -1, 2
	cfg.Lease, cfg.ShutdownTimeout = time.Second, 100*time.Millisecond
	s := startScheduler(t, hc, reg, cfg)
	s.Wake()
	events(t).WaitN(t, scheduler.EventStarted, nil, workers, slowWait) // every worker holding a run
	if m := hc.mostInFlight(); m != 2 {
		t.Fatalf("at most %d claims in flight, want 2", m)
	}
	// Three leases later (nine heartbeats of Lease/3, each renewing every
	// run) nothing was rescued: every run still holds its first attempt.
	events(t).WaitAfterN(t, events(t).Mark(), scheduler.EventRenewed, func(e scheduler.Event) bool { return e.N == workers }, 9, slowWait)
	if bad := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue WHERE status = 'RUNNING' AND attempt <> 1"); bad != 0 {
		t.Fatalf("%d runs rescued while their replica renewed them", bad)
	}
	if got := s.Stats().Rescued; got != 0 {
		t.Fatalf("rescued = %d, want 0", got)
	}
	// Free workers so that a claim is in flight when the stop begins: the
	// handlers of 8 runs return (cancel requested), the scan claims again
	// into the freed slots, and the claim waits at the gate, which only the
	// stop (its context ending) lets it through.
	gate := make(chan struct{})
	hc.gate.Store(&gate)
	if _, err := st.DB().Exec("UPDATE job_queue SET cancel_requested = 1 WHERE status = 'RUNNING' ORDER BY id LIMIT 8"); err != nil {
		t.Fatal(err)
	}
	recv(t, hc.entered, slowWait, "a claim held at the gate after the cancels")
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if hc.answeredAfterStop.Load() == 0 {
		t.Fatal("no claim was in flight when the stop began")
	}
	if bad := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue WHERE status NOT IN ('WAITING', 'CANCELED') OR retry_times <> 0"); bad != 0 {
		logOutcomes(t, st)
		t.Fatalf("%d jobs neither WAITING nor CANCELED with retry_times 0 after shutdown", bad)
	}
	if got := scalar(t, st.DB(), `SELECT COUNT(*) FROM job_attempt WHERE outcome NOT IN ('RELEASED', 'CANCELED')`); got != 0 {
		logOutcomes(t, st)
		t.Fatalf("%d executions neither RELEASED nor CANCELED", got)
	}
	if bad := scalar(t, st.DB(), `SELECT COUNT(*) FROM job_queue q
		WHERE q.attempt <> (SELECT COUNT(*) FROM job_attempt e WHERE e.job_id = q.id)`); bad != 0 {
		t.Fatalf("%d jobs without exactly one execution row per attempt", bad)
	}
}
