package scheduler_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
	"github.com/jobq/jobq/store"
)

// The tests in this file each name the rule a planted bug breaks in their
// failure message (testbed/mutants matches that text), and wait on signals
// or database states, never on the run queue's or the heartbeat's timing.

// queueFill fills a replica's run queue by signals: the real store, whose
// first SKIP LOCKED claim that takes at least min jobs (the run queue in
// use: more jobs than the one worker) turns holding on before the claim
// returns, so before any of its jobs is dispatched. Its handler returns at
// once while holding is off; once it is on, the handler that takes the
// worker next holds it (until release or its context ends) and the rest of
// that claim, at least min-1 jobs, stays queued behind it.
type queueFill struct {
	*store.Store
	min     int
	holding atomic.Bool
	held    chan struct{} // a token when a handler starts holding the worker
	release chan struct{} // closed: holding handlers return nil
}

func newQueueFill(st *store.Store, min int) *queueFill {
	return &queueFill{Store: st, min: min, held: make(chan struct{}, 1), release: make(chan struct{})}
}

func (q *queueFill) JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	jobs, err := q.Store.JobClaimSkipLocked(ctx, p)
	if len(jobs) >= q.min {
		q.holding.Store(true)
	}
	return jobs, err
}

func (q *queueFill) handler() scheduler.Handler {
	return scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		if !q.holding.Load() {
			return nil
		}
		select {
		case q.held <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-q.release:
			return nil
		}
	})
}

// awaitHeld waits until a handler holds the worker with the queue filled
// behind it; it fails when every job finished first (the run queue never
// took min jobs in one claim).
func (q *queueFill) awaitHeld(t *testing.T, st *store.Store, n int) {
	t.Helper()
	held := false
	// Checked at each event (scans come every poll interval).
	events(t).WaitUntil(t, "a handler holding the worker with jobs queued behind it", func(evs []scheduler.Event) bool {
		select {
		case <-q.held:
			held = true
			return true
		default:
		}
		return len(schedulertest.Succeeded(evs)) == n
	}, slowWait)
	if !held {
		t.Fatalf("all %d jobs finished and no claim took %d jobs: the run queue never held a job behind the busy worker", n, q.min)
	}
}

// A job queued behind a busy worker keeps its lease: the heartbeat renews
// queued runs like running ones, so three leases later none was rescued,
// and once the worker is free each runs on its first attempt.
func TestQueuedRunsRenewedWhileTheyWait(t *testing.T) {
	t.Parallel()
	const n = 300
	st := testdb.Store(t)
	q := newQueueFill(st, 3)
	reg := scheduler.NewRegistry()
	reg.Register("fill", q.handler())
	for i := range n {
		submitPriority(t, st, key("wait", i), "fill", 0)
	}
	cfg := fastConfig("rq-renew")
	cfg.Workers, cfg.BatchLimit, cfg.RunQueue = 1, 50, 40
	// The queued runs stay queued behind the held worker: no give-back
	// (TestRunQueueLongJobsGoToIdlePeer covers it).
	cfg.RunQueueWait = -1
	cfg.Lease = time.Second
	s := startScheduler(t, q, reg, cfg)
	s.Wake()
	q.awaitHeld(t, st, n)
	queued := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue WHERE status = 'RUNNING'") - 1
	if queued < int64(q.min-1) {
		t.Fatalf("%d runs queued behind the held worker, want ≥ %d", queued, q.min-1)
	}
	// Three leases (nine heartbeats of Lease/3, each renewing the held and
	// the queued runs): a queued run that nobody renews is rescued by now
	// (the rescuer runs every 200 ms).
	events(t).WaitAfterN(t, events(t).Mark(), scheduler.EventRenewed, schedulertest.NonEmpty, 9, slowWait)
	if bad := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue WHERE attempt > 1 OR retry_times > 0"); bad != 0 || s.Stats().Rescued != 0 {
		logOutcomes(t, st)
		t.Fatalf("queued run not renewed while it waited: %d of %d jobs queued behind a held worker for 3 leases were rescued (Stats.Rescued %d)",
			bad, queued, s.Stats().Rescued)
	}
	close(q.release)
	waitSucceeded(t, n) // every job, once the worker is free
	if bad := scalar(t, st.DB(), `SELECT COUNT(*) FROM job_queue q WHERE q.attempt <> 1
		OR 1 <> (SELECT COUNT(*) FROM job_attempt e WHERE e.job_id = q.id AND e.outcome = 'SUCCESS')`); bad != 0 {
		logOutcomes(t, st)
		t.Fatalf("queued run not renewed while it waited: %d jobs not run once, on their first attempt", bad)
	}
}

// The run queue offers places only for jobs finished within its window: a
// replica whose one worker is held, with nothing finished lately (the
// earlier finishes are well past the window), claims no job into the queue
// however long the backlog.
func TestRunQueueOffersPlacesOnlyForRecentFinishes(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	reg.Register("hold", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-release:
			return nil
		}
	}))
	cfg := fastConfig("rq-window")
	cfg.Workers, cfg.BatchLimit, cfg.RunQueue = 1, 50, 40
	// The queued runs stay queued behind the held worker: no give-back
	// (TestRunQueueLongJobsGoToIdlePeer covers it).
	cfg.RunQueueWait = -1
	s := startScheduler(t, st, reg, cfg)
	// 30 finishes first, so that a queue that counts every finish ever
	// (not those of its window) has places to offer.
	const early = 30
	for i := range early {
		submitPriority(t, st, key("early", i), "noop", 0)
	}
	s.Wake()
	waitSucceeded(t, early)
	submitPriority(t, st, "holder", "hold", 0)
	s.Wake()
	recv(t, started, slowWait, "the holding handler started")
	// Well past the window (100 ms): nothing finished lately. A sleep: the
	// test needs time to pass with nothing happening, which no event marks.
	time.Sleep(time.Second)
	for i := range 10 {
		submitPriority(t, st, key("late", i), "noop", 0)
	}
	// Scans on wake-up and every 50 ms; a second is 20 of them.
	mark := events(t).Mark()
	s.Wake()
	events(t).WaitAfterN(t, mark, scheduler.EventScanDone, nil, 20, slowWait)
	if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue WHERE job_key LIKE 'late-%' AND status <> 'WAITING'"); got != 0 {
		t.Fatalf("run queue offered places for finishes outside its window: %d jobs claimed behind the held worker with no job finished within the window", got)
	}
	close(release)
	waitSucceeded(t, early+11) // every job, once the worker is free
}

// A run whose job another owner holds now (rescued and re-claimed by a
// peer) is cancelled by the next heartbeat, well before its guard timer
// (lease − Lease/5) would give it up.
func TestRunHeldByAnotherOwnerCancelledWithinOneHeartbeat(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	type cancelled struct {
		at    time.Time
		cause error
	}
	started := make(chan uint64, 1)
	done := make(chan cancelled, 1)
	reg := scheduler.NewRegistry()
	reg.Register("watch", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		started <- job.ID
		<-ctx.Done()
		done <- cancelled{time.Now(), context.Cause(ctx)}
		return context.Cause(ctx)
	}))
	cfg := fastConfig("hb-owner")
	cfg.Lease, cfg.HeartbeatInterval = 6*time.Second, 200*time.Millisecond
	startScheduler(t, st, reg, cfg)
	submitPriority(t, st, "watched", "watch", 0)
	id := recv(t, started, slowWait, "the handler started")
	if _, err := st.DB().Exec(`UPDATE job_queue SET owner = 'thief', attempt = attempt + 1,
		lease_until = NOW(6) + INTERVAL 1 MINUTE WHERE id = ? AND status = 'RUNNING'`, id); err != nil {
		t.Fatal(err)
	}
	stolen := time.Now()
	c := recv(t, done, slowWait, "the handler cancelled")
	// One heartbeat and a generous margin for a loaded machine; the guard
	// would fire no earlier than lease − Lease/5 − one heartbeat (4.6 s).
	bound := cfg.HeartbeatInterval + 2*time.Second
	if elapsed := c.at.Sub(stolen); elapsed > bound {
		t.Fatalf("run whose job another owner holds not cancelled within one heartbeat: cancelled %v after the steal, want ≤ %v (heartbeat %v + margin)",
			elapsed.Round(time.Millisecond), bound, cfg.HeartbeatInterval)
	}
	if !errors.Is(c.cause, scheduler.ErrLeaseLost) {
		t.Fatalf("handler cancelled with %v, want ErrLeaseLost", c.cause)
	}
}

// outcomeStore is the real store whose outcome writes and lease renewals
// fail with completeErr and renewErr while they are set (nil: through).
type outcomeStore struct {
	*store.Store
	completeErr, renewErr atomic.Pointer[error]
}

func (o *outcomeStore) JobCompleteMany(ctx context.Context, cs []jobq.Completion) ([]bool, error) {
	if e := o.completeErr.Load(); e != nil {
		return nil, *e
	}
	return o.Store.JobCompleteMany(ctx, cs)
}

func (o *outcomeStore) LeaseRenewMany(ctx context.Context, p jobq.LeaseRenewParams) ([]uint64, error) {
	if e := o.renewErr.Load(); e != nil {
		return nil, *e
	}
	return o.Store.LeaseRenewMany(ctx, p)
}

func errPtr(err error) *error { return &err }

// offer sends v unless ch is full (a hook must never block the scheduler).
func offer[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// An outcome write that keeps failing with a transient error while the
// server accepts writes (a deadlock; the renewals fail too, so the lease
// deadline does not move) is retried only until the run's lease deadline
// and then given up, so the rescuer can return the job; while the server
// refuses writes (read-only), the write goes on past that deadline and
// commits once writes are accepted again (fenced, it cannot race a rescue
// that no read-only server commits).
func TestOutcomeWriteGivesUpAtTheLeaseDeadline(t *testing.T) {
	t.Parallel()
	type failure struct {
		at  time.Time
		err error
	}
	setup := func(t *testing.T, writeErr error) (*outcomeStore, *store.Store, chan time.Time, chan failure, chan bool, scheduler.Config) {
		st := testdb.Store(t)
		ws := &outcomeStore{Store: st}
		// Marked as the MySQL adapter marks a driver error (store.Mark):
		// the scheduler reads only the mark.
		ws.completeErr.Store(errPtr(store.Mark(writeErr)))
		ws.renewErr.Store(errPtr(store.Mark(writeErr)))
		claimed := make(chan time.Time, 1)
		failed := make(chan failure, 1)
		applied := make(chan bool, 1)
		reg := scheduler.NewRegistry()
		jobtypes.Register(reg)
		cfg := fastConfig("outcome-deadline")
		cfg.Lease = time.Second
		// The first of each is kept: a rescued job runs and fails again.
		cfg.Observer = scheduler.ObserverFunc(func(e scheduler.Event) {
			switch e.Kind {
			case scheduler.EventClaimed:
				if len(e.Jobs) > 0 {
					offer(claimed, time.Now())
				}
			case scheduler.EventCompletionFailed:
				offer(failed, failure{time.Now(), e.Err})
			case scheduler.EventCompleted:
				offer(applied, e.Applied)
			}
		})
		startScheduler(t, ws, reg, cfg)
		submitPriority(t, st, "outcome", "noop", 0)
		return ws, st, claimed, failed, applied, cfg
	}
	t.Run("transient", func(t *testing.T) {
		t.Parallel()
		deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}
		_, _, claimed, failed, _, cfg := setup(t, deadlock)
		at := recv(t, claimed, slowWait, "the claim")
		f := recv(t, failed, slowWait, "the outcome write given up")
		// The lease deadline is a lease after the claim (before it
		// returned); a try may start up to one backoff cap before it.
		bound := cfg.Lease + scheduler.OutcomeRetryMaxBackoff + time.Second
		if took := f.at.Sub(at); took > bound {
			t.Fatalf("outcome write retried past the lease deadline on a transient error while the server accepts writes: given up %v after the claim, want ≤ %v (lease %v + one backoff cap + margin)",
				took.Round(time.Millisecond), bound, cfg.Lease)
		}
		if !errors.Is(f.err, deadlock) {
			t.Fatalf("given up with %v, want the deadlock", f.err)
		}
	})
	t.Run("read-only", func(t *testing.T) {
		t.Parallel()
		readOnly := &mysql.MySQLError{Number: 1290, Message: "The MariaDB server is running with the --read-only option so it cannot execute this statement"}
		ws, st, claimed, failed, applied, cfg := setup(t, readOnly)
		at := recv(t, claimed, slowWait, "the claim")
		// Past the lease deadline while the server refuses writes.
		select {
		case f := <-failed:
			t.Fatalf("outcome write refused by a read-only server given up after %v, within its lease: it must be retried while the server refuses writes (err %v)", f.at.Sub(at), f.err)
		case <-time.After(time.Until(at.Add(2 * cfg.Lease))):
		}
		ws.completeErr.Store(nil)
		ws.renewErr.Store(nil)
		select {
		case f := <-failed:
			t.Fatalf("outcome write refused by a read-only server given up past the lease deadline: it must be retried while the server refuses writes (given up %v after the claim: %v)", f.at.Sub(at), f.err)
		case ok := <-applied:
			if !ok {
				t.Fatal("the late outcome write was refused as stale, want applied (no rescue ran)")
			}
		case <-time.After(slowWait):
			t.Fatal("timed out waiting for the late outcome write")
		}
		if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue WHERE status = 'SUCCESS' AND attempt = 1"); got != 1 {
			logOutcomes(t, st)
			t.Fatalf("%d jobs SUCCESS on attempt 1, want 1", got)
		}
	})
}

// A run whose outcome write was given up leaves this replica's run table:
// the heartbeat stops renewing it, its lease runs out and the rescuer
// returns the job, which runs again. (Renewed for ever, it would stay
// RUNNING with nobody running it.)
func TestGivenUpOutcomeWriteLeavesTheRunToTheRescuer(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	var failOnce sync.Once
	fs := &failFirstCompletion{Store: st, key: "given-up", fail: &failOnce}
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	started := make(chan struct{}, 1)
	reg.Register("hold", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		started <- struct{}{}
		<-ctx.Done()
		return context.Cause(ctx)
	}))
	failed := make(chan jobq.Fence, 1)
	cfg := fastConfig("given-up")
	cfg.Lease = 2 * time.Second
	cfg.Observer = on(scheduler.EventCompletionFailed, func(e scheduler.Event) { offer(failed, e.Completion.Fence) })
	startScheduler(t, fs, reg, cfg)
	// A held run whose lease the heartbeat renews: each move of its
	// lease_until is a beat that landed.
	holder := submit(t, st, "holder", "hold", `{}`, 0)
	recv(t, started, slowWait, "the holding handler started")
	job := submit(t, st, "given-up", "noop", `{}`, 3)
	f := recv(t, failed, slowWait, "the outcome write given up")
	if f.ID != job.ID {
		t.Fatalf("given-up write of job %d, want %d", f.ID, job.ID)
	}
	leaseOf := func(id uint64) (lease sql.NullTime, attempt int) {
		t.Helper()
		if err := st.DB().QueryRow("SELECT lease_until, attempt FROM job_queue WHERE id = ?", id).Scan(&lease, &attempt); err != nil {
			t.Fatal(err)
		}
		return lease, attempt
	}
	nextBeat := func(after sql.NullTime) sql.NullTime {
		t.Helper()
		for {
			mark := events(t).Mark()
			events(t).WaitAfter(t, mark, scheduler.EventRenewed, schedulertest.NonEmpty, slowWait)
			if got, _ := leaseOf(holder.ID); got.Time.After(after.Time) {
				return got
			}
		}
	}
	// A beat in flight when the write was given up may still carry the
	// run: the baseline is taken after the next beat landed.
	h0, _ := leaseOf(holder.ID)
	h1 := nextBeat(h0)
	l1, a1 := leaseOf(job.ID)
	nextBeat(h1)
	l2, a2 := leaseOf(job.ID)
	if a1 == f.Attempt && a2 == f.Attempt && l2.Valid && l2.Time.After(l1.Time) {
		t.Fatalf("run renewed after its outcome write was given up (lease_until %s → %s): a given-up outcome write must leave the run to the rescuer",
			l1.Time.Format(time.RFC3339Nano), l2.Time.Format(time.RFC3339Nano))
	}
	// The job rescued and run again.
	if j := waitFinished(t, st, job.ID, jobq.OutcomeSuccess); j.Attempt != f.Attempt+1 {
		t.Fatalf("succeeded on attempt %d, want %d (the run after the rescue)", j.Attempt, f.Attempt+1)
	}
}

// failFirstCompletion is the real store whose first outcome write that
// carries the job keyed key fails with a permanent (not retried) error.
type failFirstCompletion struct {
	*store.Store
	key  string
	fail *sync.Once
}

func (f *failFirstCompletion) JobCompleteMany(ctx context.Context, cs []jobq.Completion) ([]bool, error) {
	for _, c := range cs {
		j, err := f.Store.JobGet(ctx, c.ID)
		if err != nil || j.JobKey != f.key {
			continue
		}
		failed := false
		f.fail.Do(func() { failed = true })
		if failed {
			return nil, errors.New("outcome write failed for good (test)")
		}
	}
	return f.Store.JobCompleteMany(ctx, cs)
}

// The promoter never makes a job WAITING before its run_at on the database
// clock: a job due in 500 ms is still SCHEDULED when a promotion that finds
// another job due runs before then, and when it is promoted, the promotion
// (its update_time) is not before its run_at.
func TestPromoterNeverPromotesBeforeRunAt(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	cfg := fastConfig("promote-early")
	cfg.PromoteInterval = 50 * time.Millisecond
	s := startScheduler(t, st, reg, cfg)
	if _, err := st.DB().Exec(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, run_at, create_time, update_time) VALUES
		('due', 'noop', '{}', 'h', 'SCHEDULED', NOW(6) - INTERVAL 1 SECOND, NOW(6), NOW(6)),
		('soon', 'noop', '{}', 'h', 'SCHEDULED', NOW(6) + INTERVAL 500000 MICROSECOND, NOW(6), NOW(6))`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PromoteNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	check := func() (status string, promotedEarly, beforeDue bool) {
		t.Helper()
		if err := st.DB().QueryRow(`SELECT status, status <> 'SCHEDULED' AND update_time < run_at, NOW(6) < run_at
			FROM job_queue WHERE job_key = 'soon'`).Scan(&status, &promotedEarly, &beforeDue); err != nil {
			t.Fatal(err)
		}
		return status, promotedEarly, beforeDue
	}
	status, early, beforeDue := check()
	if early || (beforeDue && status != string(jobq.StateScheduled)) {
		t.Fatalf("promoter promoted a job before its run_at: %s while the database clock is before its run_at (promoted early: %v)", status, early)
	}
	soon, err := st.JobGetByKey(context.Background(), "soon")
	if err != nil {
		t.Fatal(err)
	}
	waitFinished(t, st, soon.ID, jobq.OutcomeSuccess) // the job due in 500 ms
	if got := scalar(t, st.DB(), `SELECT COUNT(*) FROM job_queue WHERE job_key = 'soon' AND started_at < run_at`); got != 0 {
		t.Fatal("promoter promoted a job before its run_at: it started before its run_at")
	}
}

// A run that waited in the run queue longer than RunQueueWait while no
// worker took a queued run is given back: released unstarted (its
// attempt's execution row RELEASED) to WAITING, without spending a retry.
// The queue is filled behind one held worker; three heartbeats later (two
// intervals of Lease/3, over 1 s, against the 250 ms within which a run
// that waited longer than the 200 ms wait is given back) every run queued
// behind it has been given back, and once the worker is free every job
// runs to SUCCESS with retry_times 0.
func TestRunQueueGivesBackWithoutSpendingARetry(t *testing.T) {
	t.Parallel()
	const n = 300
	st := testdb.Store(t)
	q := newQueueFill(st, 3)
	reg := scheduler.NewRegistry()
	reg.Register("fill", q.handler())
	for i := range n {
		submitPriority(t, st, key("give", i), "fill", 0)
	}
	cfg := fastConfig("rq-give-back")
	cfg.Workers, cfg.BatchLimit, cfg.RunQueue = 1, 50, 40
	cfg.RunQueueWait = 200 * time.Millisecond
	s := startScheduler(t, q, reg, cfg)
	s.Wake()
	q.awaitHeld(t, st, n)
	rec := events(t)
	rec.WaitAfterN(t, rec.Mark(), scheduler.EventRenewed, nil, 3, slowWait)

	// The runs claimed and never started by now are those queued behind the
	// held worker: each must have been given back, and released.
	started := map[jobq.Fence]bool{}
	for _, e := range rec.Events(scheduler.EventStarted, nil) {
		started[e.Fence] = true
	}
	var queued []jobq.Fence
	for _, e := range rec.Events(scheduler.EventClaimed, nil) {
		for _, j := range e.Jobs {
			if !started[j.Fence()] {
				queued = append(queued, j.Fence())
			}
		}
	}
	given := map[jobq.Fence]bool{}
	for _, e := range rec.Events(scheduler.EventGivenBack, nil) {
		given[e.Fence] = true
	}
	if len(queued) < q.min-1 {
		t.Fatalf("%d runs claimed and not started behind the held worker, want ≥ %d", len(queued), q.min-1)
	}
	for _, f := range queued {
		if !given[f] {
			t.Fatalf("queued run not given back: job %d attempt %d waited in the run queue behind the held worker past 3 heartbeats (RunQueueWait %s); %d of %d queued runs given back",
				f.ID, f.Attempt, cfg.RunQueueWait, len(given), len(queued))
		}
	}
	for f := range given {
		j, ex := getJob(t, st, f.ID), executions(t, st, f.ID)
		if j.RetryTimes != 0 || len(ex) < f.Attempt || ex[f.Attempt-1].Outcome != jobq.OutcomeReleased {
			t.Fatalf("job %d given back at attempt %d: %s retry_times %d, executions %v; a give-back spends no retry and records the attempt RELEASED",
				f.ID, f.Attempt, j.Status, j.RetryTimes, execSummary(ex))
		}
	}
	if got := s.Stats().GivenBack; got != int64(len(given)) {
		t.Fatalf("Stats.GivenBack %d, want the %d given_back events", got, len(given))
	}

	close(q.release)
	waitSucceeded(t, n) // every job, once the worker is free
	if bad := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue WHERE status <> 'SUCCESS' OR retry_times <> 0"); bad != 0 {
		logOutcomes(t, st)
		t.Fatalf("%d jobs not SUCCESS with retry_times 0 after %d give-backs (a give-back spends no retry)", bad, len(given))
	}
}
