package scheduler

// Each service started alone against the real database, observed through
// the events it emits (no polling of the database, no sleeps).

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// signalTimeout bounds every wait on an event (a hang, not a timing
// assertion: the events come within milliseconds).
const signalTimeout = 10 * time.Second

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testRetrier() dbRetrier {
	return dbRetrier{log: discardLog()}
}

// eventLog records the events of a service built alone (its params'
// Events emitter), for the test to count and to wait on in order.
type eventLog struct {
	mu      sync.Mutex
	events  []Event
	read    map[EventKind]int // per kind, how many next has returned
	changed chan struct{}     // closed and replaced at each event
}

func (l *eventLog) emitter() emitter {
	return func(e Event) {
		l.mu.Lock()
		l.events = append(l.events, e)
		if l.changed != nil {
			close(l.changed)
			l.changed = nil
		}
		l.mu.Unlock()
	}
}

// next returns the next event of kind not returned before, waiting up to
// timeout for it.
func (l *eventLog) next(t testing.TB, kind EventKind, timeout time.Duration) Event {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		if l.read == nil {
			l.read = map[EventKind]int{}
		}
		seen := 0
		for _, e := range l.events {
			if e.Kind != kind {
				continue
			}
			if seen == l.read[kind] {
				l.read[kind]++
				l.mu.Unlock()
				return e
			}
			seen++
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no %s event within %s", kind, timeout)
			return Event{}
		}
	}
}

// total sums over the events of kind what they count: runs rescued, jobs
// promoted or claimed.
func (l *eventLog) total(kind EventKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == kind {
			n += len(e.Fences) + len(e.Jobs) + e.N
		}
	}
	return n
}

// count returns how many events of kind were emitted.
func (l *eventLog) count(kind EventKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func submitJob(t *testing.T, st *store.Store, key string) jobq.Job {
	t.Helper()
	j, _, err := st.JobSubmit(context.Background(), jobq.SubmitParams{JobKey: key, JobType: "t", Params: "{}", RequestHash: "h"})
	if err != nil {
		t.Fatalf("submit %s: %v", key, err)
	}
	return j
}

func claimAll(t *testing.T, st *store.Store, owner string, lease time.Duration) []jobq.ClaimedJob {
	t.Helper()
	jobs, err := st.JobClaimSkipLocked(context.Background(), jobq.ClaimParams{Owner: owner, Limit: 100, Lease: lease})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return jobs
}

func jobStatus(t *testing.T, st *store.Store, id uint64) jobq.JobState {
	t.Helper()
	j, err := st.JobGet(context.Background(), id)
	if err != nil {
		t.Fatalf("get %d: %v", id, err)
	}
	return j.Status
}

func startService(t *testing.T, svc interface {
	Start(context.Context) error
	Stop()
}) {
	t.Helper()
	if err := svc.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(svc.Stop)
}

func TestHeartbeatRenewsAndLosesRuns(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	j := submitJob(t, st, "hb")
	cj := claimAll(t, st, "hb-owner", 2*time.Second)[0]
	runs := newRunTable()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	r := &run{job: &Job{ClaimedJob: jobq.ClaimedJob{ID: cj.ID, Attempt: cj.Attempt}}, cancel: cancel, leaseDeadline: firstLeaseDeadline(time.Time{}, 2*time.Second)}
	events := &eventLog{}
	h := newHeartbeat(heartbeatParams{
		Store: st, Runs: runs, Owner: "hb-owner", Lease: 2 * time.Second, Interval: 250 * time.Millisecond,
		Retry: testRetrier(), Log: discardLog(), Events: events.emitter(),
	})
	runs.add(r, time.Hour, func() {})
	startService(t, h)

	if got := events.next(t, EventRenewed, signalTimeout).N; got != 1 {
		t.Fatalf("first beat renewed %d runs, want 1 (fails %d)", got, events.count(EventRenewalFailed))
	}
	// Another replica takes the job over: the next beat must lose the run.
	if _, err := st.DB().Exec("UPDATE job_queue SET owner = 'other', attempt = attempt + 1 WHERE id = ?", j.ID); err != nil {
		t.Fatal(err)
	}
	if got := events.next(t, EventLeaseLost, signalTimeout).Fence; got != cj.Fence() {
		t.Fatalf("lost %+v, want %+v", got, cj.Fence())
	}
	if cause := context.Cause(ctx); !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("handler context cause = %v, want ErrLeaseLost", cause)
	}
	if n := events.count(EventLeaseLost); n != 1 {
		t.Fatalf("LeaseLost = %d, want 1", n)
	}
}

func TestCompleterWritesFencedOutcomes(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	for _, k := range []string{"c1", "c2"} {
		submitJob(t, st, k)
	}
	claimed := claimAll(t, st, "c-owner", time.Minute)
	type finish struct {
		fence   jobq.Fence
		applied bool
	}
	finished := make(chan finish, len(claimed))
	c := newCompleter(completerParams{
		Store: st, Batch: 10, Linger: -1, QueueSize: 10, Work: newWorkTracker(),
		FinishFunc: func(c jobq.Completion, applied bool, err error) {
			if err != nil {
				t.Errorf("completion %+v: %v", c.Fence, err)
			}
			finished <- finish{c.Fence, applied}
		},
		Writer: outcomeWriter{Runs: newRunTable(), Lease: time.Minute, Retry: testRetrier(), Log: discardLog()},
		Log:    discardLog(),
	})
	startService(t, c)

	// The second run is stale: its attempt no longer owns the job.
	stale := claimed[1].Fence()
	stale.Attempt++
	c.submit(jobq.Completion{Fence: claimed[0].Fence(), Outcome: jobq.OutcomeSuccess})
	c.submit(jobq.Completion{Fence: stale, Outcome: jobq.OutcomeSuccess})
	var written []jobq.Fence
	got := map[jobq.Fence]bool{}
	for range 2 {
		select {
		case f := <-finished:
			written = append(written, f.fence)
			got[f.fence] = f.applied
		case <-time.After(signalTimeout):
			t.Fatalf("%d of 2 completions written within %s", len(written), signalTimeout)
		}
	}
	if !slices.Equal(written, []jobq.Fence{claimed[0].Fence(), stale}) {
		t.Fatalf("written %+v", written)
	}
	if !got[claimed[0].Fence()] || got[stale] {
		t.Fatalf("applied = %v, want only %+v", got, claimed[0].Fence())
	}
	if s := jobStatus(t, st, claimed[0].ID); s != jobq.StateSuccess {
		t.Fatalf("job 1 status %s, want SUCCESS", s)
	}
	if s := jobStatus(t, st, claimed[1].ID); s != jobq.StateRunning {
		t.Fatalf("job 2 status %s, want RUNNING (stale completion refused)", s)
	}
}

func TestRescuerReturnsExpiredLeases(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	j, _, err := st.JobSubmit(context.Background(), jobq.SubmitParams{JobKey: "r", JobType: "t", Params: "{}", RequestHash: "h", MaxRetry: 3})
	if err != nil {
		t.Fatal(err)
	}
	cj := claimAll(t, st, "dead-owner", time.Millisecond)[0]
	events := &eventLog{}
	r := newRescuer(rescuerParams{
		Store: st, Interval: 20 * time.Millisecond, Batch: 10, Retry: testRetrier(), Log: discardLog(),
		Events: events.emitter(),
	})
	startService(t, r)
	for {
		rescued := events.next(t, EventRescued, signalTimeout).Fences
		if len(rescued) == 0 {
			continue // a pass ran before the lease expired on the database clock
		}
		if !slices.Equal(rescued, []jobq.Fence{cj.Fence()}) {
			t.Fatalf("rescued %+v, want %+v", rescued, cj.Fence())
		}
		break
	}
	if s := jobStatus(t, st, j.ID); s != jobq.StateWaiting {
		t.Fatalf("status %s, want WAITING", s)
	}
	if n := events.total(EventRescued); n != 1 {
		t.Fatalf("Rescued = %d, want 1", n)
	}
}

func TestScannerClaimsAndDispatches(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	want := []uint64{submitJob(t, st, "s1").ID, submitJob(t, st, "s2").ID, submitJob(t, st, "s3").ID}
	slots := newSlots(10, 0, 0)
	var got []uint64
	events := &eventLog{}
	sc := newScanner(scannerParams{
		Claimer: newClaimer(claimerParams{
			Store: st, Strategy: StrategySkipLocked, Owner: "s-owner", Lease: time.Minute, Retry: testRetrier(),
			Events: events.emitter(),
		}),
		Slots:        slots,
		DispatchFunc: func(cj jobq.ClaimedJob) { got = append(got, cj.ID) },
		PollInterval: time.Hour, BatchLimit: 2, Workers: 10, DrainWait: -1, Log: discardLog(),
		Events: events.emitter(),
	})
	startService(t, sc)
	slots.wakeUp() // the poll interval is an hour: only the wake-up scans
	// Batches of 2: the first comes back full, so the scan drains on to the
	// second (1 job) in the same scan.
	if n := events.next(t, EventScanDone, signalTimeout).N; n != 3 {
		t.Fatalf("scan dispatched %d jobs, want 3", n)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("dispatched %v, want %v", got, want)
	}
	if n := events.count(EventScanned); n != 2 {
		t.Fatalf("claims = %d, want 2", n)
	}
	if free := slots.available(); free != 7 {
		t.Fatalf("free slots = %d, want 7", free)
	}
}

func TestPeriodicPlannerFiresSchedules(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	due := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	if _, _, err := st.PeriodicUpsert(ctx, jobq.PeriodicSpec{Name: "p", Cron: "@every 1h", JobType: "t", Params: "{}",
		Misfire: jobq.MisfireOnce, Source: jobq.PeriodicSourceAPI}, func(time.Time) time.Time { return due }); err != nil {
		t.Fatal(err)
	}
	var woken, refreshed atomic.Int64
	events := &eventLog{}
	pl := newPeriodicPlanner(periodicPlannerParams{
		Store: st, RefreshInterval: time.Hour, MisfireThreshold: time.Second,
		RefreshFunc: func(context.Context) { refreshed.Add(1) }, WakeFunc: func() { woken.Add(1) },
		Retry: testRetrier(), Log: discardLog(), Events: events.emitter(),
	})
	startService(t, pl)
	if n := events.next(t, EventOpsRefreshed, signalTimeout).N; n != 1 {
		t.Fatalf("refresh knew %d schedules, want 1", n)
	}
	if name := events.next(t, EventPeriodicFired, signalTimeout).Name; name != "p" {
		t.Fatalf("fired %q, want p", name)
	}
	// The cursor was a minute late: misfire "once" enqueues that one instant.
	j, err := st.JobGetByKey(ctx, jobq.PeriodicKey("p", due))
	if err != nil {
		t.Fatalf("job of the missed instant: %v", err)
	}
	if j.JobType != "t" || j.Status != jobq.StateWaiting {
		t.Fatalf("job = %s %s, want t WAITING", j.JobType, j.Status)
	}
	if woken.Load() != 1 || refreshed.Load() != 1 {
		t.Fatalf("woken %d, refreshed %d; want 1, 1", woken.Load(), refreshed.Load())
	}
	pl.refreshNow()
	if n := events.next(t, EventOpsRefreshed, signalTimeout).N; n != 1 {
		t.Fatalf("refresh knew %d schedules, want 1", n)
	}
}

func TestCleanerDeletesOldTerminalJobs(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	old, fresh := submitJob(t, st, "old"), submitJob(t, st, "fresh")
	for _, cj := range claimAll(t, st, "cl-owner", time.Minute) {
		if _, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: cj.Fence(), Outcome: jobq.OutcomeSuccess}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.DB().Exec("UPDATE job_queue SET create_time = NOW(6) - INTERVAL 3 HOUR, finished_at = NOW(6) - INTERVAL 2 HOUR WHERE id = ?", old.ID); err != nil {
		t.Fatal(err)
	}
	events := &eventLog{}
	c := newCleaner(cleanerParams{
		Store: st, Retention: time.Hour, Interval: 20 * time.Millisecond, Batch: 10, MaxPerPass: 100,
		Retry: testRetrier(), Log: discardLog(), Events: events.emitter(),
	})
	startService(t, c)
	// The batched success wrote no job_execution row (its job row was its
	// attempt's record), so the pass deletes the job and no execution row.
	if res := events.next(t, EventCleaned, signalTimeout).Purged; res.Jobs != 1 || res.Executions != 0 || res.Batches != 1 {
		t.Fatalf("first pass deleted %+v, want 1 job, 0 execution rows, 1 batch", res)
	}
	if _, err := st.JobGet(ctx, old.ID); !errors.Is(err, jobq.ErrNotFound) {
		t.Fatalf("old job: err %v, want ErrNotFound", err)
	}
	if s := jobStatus(t, st, fresh.ID); s != jobq.StateSuccess {
		t.Fatalf("fresh job status %s, want SUCCESS (kept)", s)
	}
	if res := events.next(t, EventCleaned, signalTimeout).Purged; res.Jobs != 0 {
		t.Fatalf("second pass deleted %d jobs, want 0", res.Jobs)
	}
}

func TestPromoterPromotesDueJobs(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	runAt := time.Now().Add(time.Hour)
	j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: "p", JobType: "t", Params: "{}", RequestHash: "h", RunAt: &runAt})
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != jobq.StateScheduled {
		t.Fatalf("submitted status %s, want SCHEDULED", j.Status)
	}
	if _, err := st.DB().Exec("UPDATE job_queue SET run_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?", j.ID); err != nil {
		t.Fatal(err)
	}
	woken := make(chan struct{}, 10)
	events := &eventLog{}
	pr := newPromoter(promoterParams{
		Store: st, Interval: time.Hour, Batch: 10, WakeFunc: func() { woken <- struct{}{} },
		Retry: testRetrier(), Log: discardLog(), Events: events.emitter(),
	})
	startService(t, pr)
	if n := events.next(t, EventPromoted, signalTimeout).N; n != 1 {
		t.Fatalf("first pass promoted %d, want 1", n)
	}
	if s := jobStatus(t, st, j.ID); s != jobq.StateWaiting {
		t.Fatalf("status %s, want WAITING", s)
	}
	select {
	case <-woken: // the promotion woke the scanner (after the event: wait for it)
	case <-time.After(signalTimeout):
		t.Fatal("no wake-up after the promotion")
	}
	if n, p := len(woken), events.total(EventPromoted); n != 0 || p != 1 {
		t.Fatalf("%d more wake-ups, promoted %d; want 0, 1", n, p)
	}
}
