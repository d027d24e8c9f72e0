package scheduler_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/metrics"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
)

// replicaLog records, per replica and on this process's clock, when each
// run was claimed, when its handler started and ended, and when a run was
// released unstarted: enough to tell when a replica held queued jobs and
// when a replica had free workers.
type replicaLog struct {
	mu       sync.Mutex
	claimed  map[string]map[jobq.Fence]time.Time // owner → fence → claim answered
	started  map[string]map[jobq.Fence]time.Time
	released map[string]map[jobq.Fence]time.Time
	given    map[string]map[jobq.Fence]time.Time // owner → fence → given back by the run queue
	spans    map[string][][2]time.Time           // owner → handler [start, end]
	running  map[string]int
}

func newReplicaLog() *replicaLog {
	return &replicaLog{claimed: map[string]map[jobq.Fence]time.Time{}, started: map[string]map[jobq.Fence]time.Time{},
		released: map[string]map[jobq.Fence]time.Time{}, given: map[string]map[jobq.Fence]time.Time{}, spans: map[string][][2]time.Time{}, running: map[string]int{}}
}

func put(m map[string]map[jobq.Fence]time.Time, owner string, f jobq.Fence, t time.Time) {
	if m[owner] == nil {
		m[owner] = map[jobq.Fence]time.Time{}
	}
	if _, ok := m[owner][f]; !ok {
		m[owner][f] = t
	}
}

// observer records owner's claims and releases from its events, calling
// claimedFunc (may be nil) with each claim's jobs.
func (l *replicaLog) observer(owner string, claimedFunc func(jobs []jobq.ClaimedJob)) scheduler.Observer {
	return scheduler.ObserverFunc(func(e scheduler.Event) {
		switch e.Kind {
		case scheduler.EventClaimed:
			now := time.Now()
			l.mu.Lock()
			for _, j := range e.Jobs {
				put(l.claimed, owner, j.Fence(), now)
			}
			l.mu.Unlock()
			if claimedFunc != nil {
				claimedFunc(e.Jobs)
			}
		case scheduler.EventGivenBack:
			l.mu.Lock()
			put(l.given, owner, e.Fence, time.Now())
			l.mu.Unlock()
		case scheduler.EventCompleted:
			if e.Completion.Outcome != jobq.OutcomeReleased {
				return
			}
			l.mu.Lock()
			put(l.released, owner, e.Completion.Fence, time.Now())
			l.mu.Unlock()
		}
	})
}

// wrap records the handler spans of h, by the job's owner.
func (l *replicaLog) wrap(h scheduler.Handler) scheduler.Handler {
	return scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		start := time.Now()
		l.mu.Lock()
		put(l.started, job.Owner, job.Fence(), start)
		l.mu.Unlock()
		err := h.Work(ctx, job)
		l.mu.Lock()
		l.spans[job.Owner] = append(l.spans[job.Owner], [2]time.Time{start, time.Now()})
		l.mu.Unlock()
		return err
	})
}

// registry returns the built-in types with their handlers wrapped by l.
func (l *replicaLog) registry() *scheduler.Registry {
	builtin := scheduler.NewRegistry()
	jobtypes.Register(builtin)
	reg := scheduler.NewRegistry()
	for _, typ := range []string{jobtypes.Noop, jobtypes.Sleep} {
		h, _ := builtin.Lookup(typ)
		reg.Register(typ, l.wrap(h))
	}
	return reg
}

// idleWhileHeld returns, over [from, to] sampled every step, the time
// during which one replica (holder) held a claimed job that had waited in
// its run queue longer than limit while the other (peer, started at
// peerFrom with peerWorkers workers) had a free worker, and the longest
// such wait seen for one job.
func (l *replicaLog) idleWhileHeld(holder, peer string, peerFrom time.Time, peerWorkers int, limit time.Duration, from, to time.Time, step time.Duration) (total, worst time.Duration, jobs int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	type span struct{ from, to time.Time }
	var held []span // holder's runs: [claimed+limit, started or released)
	for f, c := range l.claimed[holder] {
		end, ok := l.started[holder][f]
		if r, rok := l.released[holder][f]; rok && (!ok || r.Before(end)) {
			end, ok = r, true
		}
		if !ok {
			end = to
		}
		if end.Sub(c) > limit {
			held = append(held, span{c.Add(limit), end})
		}
	}
	busy := l.spans[peer]
	sort.Slice(held, func(i, j int) bool { return held[i].from.Before(held[j].from) })
	counted := map[int]bool{}
	for t := from; t.Before(to); t = t.Add(step) {
		if t.Before(peerFrom) {
			continue
		}
		running := 0
		for _, b := range busy {
			if !t.Before(b[0]) && t.Before(b[1]) {
				running++
			}
		}
		if running >= peerWorkers {
			continue
		}
		hit := false
		for i, h := range held {
			if !t.Before(h.from) && t.Before(h.to) {
				hit = true
				worst = max(worst, h.to.Sub(h.from)+limit)
				counted[i] = true
			}
		}
		if hit {
			total += step
		}
	}
	return total, worst, len(counted)
}

// longestHold returns the longest time a run of holder waited between its
// claim and its handler's start or its release, and how many runs waited
// longer than limit.
func (l *replicaLog) longestHold(holder string, limit time.Duration) (longest time.Duration, over int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for f, c := range l.claimed[holder] {
		end, ok := l.started[holder][f]
		if r, rok := l.released[holder][f]; rok && (!ok || r.Before(end)) {
			end, ok = r, true
		}
		if !ok {
			continue
		}
		longest = max(longest, end.Sub(c))
		if end.Sub(c) > limit {
			over++
		}
	}
	return longest, over
}

// hoardRun is one run of the scenario of the issue: replica A drains
// noops no-op jobs (priority 10), then claims the sleeps jobs of sleepMs
// each (priority 0) just after — its run queue then offers places by the
// short handlers that just returned; replica B starts as soon as A claimed
// the first sleep job.
type hoardRun struct {
	st              *store.Store
	log             *replicaLog
	a, b            *scheduler.Scheduler
	firstLong       time.Time // A claimed the first sleep job
	bStarted        time.Time
	lastLongDone    time.Time
	aOwner, bOwner  string
	bWorkers        int
	ranOnA, ranOnB  int64
	pollInterval    time.Duration
	statsA, statsB  scheduler.Stats
	sleeps, sleepMs int
}

func runHoard(t *testing.T, noops, sleeps, sleepMs, aWorkers, bWorkers int) *hoardRun {
	t.Helper()
	st := testdb.Store(t)
	h := &hoardRun{st: st, log: newReplicaLog(), aOwner: "hoard-a", bOwner: "hoard-b", bWorkers: bWorkers, sleeps: sleeps, sleepMs: sleepMs}
	for i := range noops {
		submitPriority(t, st, key("short", i), jobtypes.Noop, 10)
	}
	for i := range sleeps {
		if _, _, err := st.JobSubmit(context.Background(), jobq.SubmitParams{JobKey: key("long", i), JobType: jobtypes.Sleep,
			Params: fmt.Sprintf(`{"ms":%d}`, sleepMs), RequestHash: key("long", i), MaxRetry: 3}); err != nil {
			t.Fatal(err)
		}
	}
	reg := h.log.registry()
	longClaimed := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var longDone int
	allDone := make(chan struct{})
	onDone := scheduler.ObserverFunc(func(e scheduler.Event) {
		c := e.Completion
		if e.Kind != scheduler.EventCompleted || c.Outcome != jobq.OutcomeSuccess || !e.Applied {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		var typ string
		if err := st.DB().QueryRow("SELECT job_type FROM job_queue WHERE id = ?", c.ID).Scan(&typ); err != nil || typ != jobtypes.Sleep {
			return
		}
		longDone++
		if longDone == sleeps {
			h.lastLongDone = time.Now()
			close(allDone)
		}
	})
	// Every setting but the workers at its default (poll interval 1 s,
	// batch limit 500, run queue 500, lease 30 s).
	cfgA := scheduler.Config{Owner: h.aOwner, Workers: aWorkers, Logger: bufferedLogger(t)}
	cfgA.Observer = scheduler.Observers(h.log.observer(h.aOwner, func(jobs []jobq.ClaimedJob) {
		for _, j := range jobs {
			if j.JobType == jobtypes.Sleep {
				once.Do(func() { h.firstLong = time.Now(); close(longClaimed) })
			}
		}
	}), onDone)
	h.a = startScheduler(t, st, reg, cfgA)
	h.pollInterval = h.a.Config().PollInterval
	h.a.Wake()
	closed(t, longClaimed, slowWait, "replica A claiming the first long job")
	cfgB := scheduler.Config{Owner: h.bOwner, Workers: bWorkers, Logger: bufferedLogger(t)}
	cfgB.Observer = scheduler.Observers(h.log.observer(h.bOwner, nil), onDone)
	h.bStarted = time.Now()
	h.b = startScheduler(t, st, reg, cfgB)
	closed(t, allDone, time.Duration(sleeps*sleepMs)*time.Millisecond+slowWait, "every long job done")
	h.statsA, h.statsB = h.a.Stats(), h.b.Stats()
	for _, s := range []*scheduler.Scheduler{h.a, h.b} {
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	// Every run the run queue gave back is counted (Stats.GivenBack, from
	// its given_back event) and ends released, unstarted.
	h.log.mu.Lock()
	for owner, st := range map[string]scheduler.Stats{h.aOwner: h.a.Stats(), h.bOwner: h.b.Stats()} {
		if got := int64(len(h.log.given[owner])); got != st.GivenBack {
			t.Errorf("%s: %d given_back events, Stats.GivenBack %d; want equal", owner, got, st.GivenBack)
		}
		for f := range h.log.given[owner] {
			if _, ok := h.log.released[owner][f]; !ok {
				t.Errorf("%s: run %v given back without a RELEASED completion", owner, f)
			}
			if _, ok := h.log.started[owner][f]; ok {
				t.Errorf("%s: run %v given back after its handler started", owner, f)
			}
		}
	}
	h.log.mu.Unlock()
	h.ranOnA = scalar(t, st.DB(), `SELECT COUNT(*) FROM job_attempt e JOIN job_queue q ON q.id = e.job_id
		WHERE q.job_type = 'sleep' AND e.outcome = 'SUCCESS' AND e.owner = ?`, h.aOwner)
	h.ranOnB = scalar(t, st.DB(), `SELECT COUNT(*) FROM job_attempt e JOIN job_queue q ON q.id = e.job_id
		WHERE q.job_type = 'sleep' AND e.outcome = 'SUCCESS' AND e.owner = ?`, h.bOwner)
	if bad := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_queue WHERE status <> 'SUCCESS' OR retry_times <> 0"); bad != 0 {
		logOutcomes(t, st)
		t.Fatalf("%d jobs not SUCCESS with retry_times 0 (a give-back spends no retry)", bad)
	}
	return h
}

// A replica with 4 workers next to an idle peer with 50: after A drained
// 500 no-op jobs, 40 × 3 s sleep jobs finish within 2× the ideal 3 s,
// counted from A's claim of the first of them. A used to claim all 40 into
// its run queue (offered by the no-ops that had just returned) and run 32
// of them 3–27 s later while B idled: 29.7 s in the issue.
func TestRunQueueLongJobsGoToIdlePeer(t *testing.T) {
	t.Parallel()
	const ideal = 3 * time.Second
	h := runHoard(t, 500, 40, int(ideal/time.Millisecond), 4, 50)
	took := h.lastLongDone.Sub(h.firstLong)
	t.Logf("40 × 3 s jobs: done %.2f s after the first claim (ideal 3 s); ran on A %d, on B %d; A released %d unstarted",
		took.Seconds(), h.ranOnA, h.ranOnB, h.statsA.Released)
	if took > 2*ideal {
		t.Fatalf("40 × 3 s jobs took %.2f s from the first claim, want ≤ %s (2× the ideal); ran on A %d, on B %d",
			took.Seconds(), 2*ideal, h.ranOnA, h.ranOnB)
	}
}

// With default flags and 2 × 50 workers, no replica has a free worker while
// the other holds a claimed job that has waited in its run queue longer
// than one poll interval: after 1,000 no-op jobs, 200 × 2 s sleep jobs are
// claimed; the second replica starts as the first claims them. The first
// used to hold ~150 of them queued for seconds while the second idled (the
// issue: 11 s idle next to ~200 queued).
func TestNoReplicaIdlesWhileAnotherHoldsQueuedJobs(t *testing.T) {
	t.Parallel()
	h := runHoard(t, 1000, 200, 2000, 50, 50)
	poll := h.pollInterval
	step := 5 * time.Millisecond
	from, to := h.firstLong, h.lastLongDone
	idleAB, worstAB, jobsAB := h.log.idleWhileHeld(h.aOwner, h.bOwner, h.bStarted, h.bWorkers, poll, from, to, step)
	idleBA, worstBA, jobsBA := h.log.idleWhileHeld(h.bOwner, h.aOwner, time.Time{}, 50, poll, from, to, step)
	t.Logf("200 × 2 s jobs done %.2f s after the first claim; ran on A %d, on B %d; released unstarted by A %d, by B %d",
		to.Sub(from).Seconds(), h.ranOnA, h.ranOnB, h.statsA.Released, h.statsB.Released)
	t.Logf("B idle while A held a job queued > %s: %s (%d jobs, longest wait %s); A idle while B held one: %s (%d jobs, longest %s)",
		poll, idleAB, jobsAB, worstAB.Round(time.Millisecond), idleBA, jobsBA, worstBA.Round(time.Millisecond))
	holdA, overA := h.log.longestHold(h.aOwner, poll)
	holdB, overB := h.log.longestHold(h.bOwner, poll)
	t.Logf("longest wait between claim and start or release: A %s (%d runs > %s), B %s (%d runs)",
		holdA.Round(time.Millisecond), overA, poll, holdB.Round(time.Millisecond), overB)
	if idleAB > 0 || idleBA > 0 {
		t.Fatalf("a replica had free workers for %s while its peer held jobs queued longer than one poll (%s), want 0", idleAB+idleBA, poll)
	}
}

// jobq_pickup_latency_seconds counts to the handler's start, the time a job
// waited in the run queue included: one worker, 200 no-op jobs (priority
// 10) then 5 × 200 ms sleep jobs (priority 5), which a claim takes together
// and which then start one after another. The histogram's sum for sleep
// is at least the time they waited between their claim and their handler's
// start (0.2 + 0.4 + 0.6 + 0.8 s). It used to stop at the claim (started_at).
func TestPickupLatencyCountsRunQueueWait(t *testing.T) {
	t.Parallel()
	const sleeps = 5
	st := testdb.Store(t)
	for i := range 200 {
		submitPriority(t, st, key("short", i), jobtypes.Noop, 10)
	}
	for i := range sleeps {
		if _, _, err := st.JobSubmit(context.Background(), jobq.SubmitParams{JobKey: key("long", i), JobType: jobtypes.Sleep,
			Params: `{"ms":200}`, RequestHash: key("long", i), Priority: 5, MaxRetry: 3}); err != nil {
			t.Fatal(err)
		}
	}
	l := newReplicaLog()
	m := metrics.New(metrics.Options{BacklogInterval: -1})
	t.Cleanup(m.Close)
	// A poll interval of 10 s keeps the queued jobs (waiting ≤ 1 s) well
	// below the run-queue wait (2.5 s): none is given back.
	cfg := scheduler.Config{Owner: "pickup", Workers: 1, PollInterval: 10 * time.Second, Logger: bufferedLogger(t)}
	cfg.Observer = scheduler.Observers(m, l.observer("pickup", nil))
	s := startScheduler(t, st, l.registry(), cfg)
	s.Wake()
	waitSucceeded(t, 200+sleeps)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	var queued time.Duration
	l.mu.Lock()
	for f, c := range l.claimed["pickup"] {
		var typ string
		if err := st.DB().QueryRow("SELECT job_type FROM job_queue WHERE id = ?", f.ID).Scan(&typ); err != nil {
			t.Fatal(err)
		}
		if typ == jobtypes.Sleep {
			queued += l.started["pickup"][f].Sub(c)
		}
	}
	l.mu.Unlock()
	if queued < 500*time.Millisecond {
		t.Fatalf("the sleep jobs waited %s in all between claim and start, want ≥ 0.5 s (claimed together, run one by one)", queued)
	}
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count uint64
	var sum float64
	for _, f := range fams {
		if f.GetName() != "jobq_pickup_latency_seconds" {
			continue
		}
		for _, mm := range f.GetMetric() {
			for _, lp := range mm.GetLabel() {
				if lp.GetName() == "job_type" && lp.GetValue() == jobtypes.Sleep {
					count += mm.GetHistogram().GetSampleCount()
					sum += mm.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	t.Logf("sleep jobs: pickup histogram count %d sum %.3f s; waited %.3f s between claim and handler start in all", count, sum, queued.Seconds())
	if count != sleeps {
		t.Fatalf("pickup observations for sleep = %d, want %d", count, sleeps)
	}
	if want := 0.95 * queued.Seconds(); sum < want {
		t.Fatalf("pickup latency sum for sleep = %.3f s, want ≥ %.3f s (the run-queue wait measured to the handler's start)", sum, want)
	}
}
