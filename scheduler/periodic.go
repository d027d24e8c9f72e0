package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cronplan"
)

// periodicStore is what the periodic planner needs from the store.
type periodicStore interface {
	PeriodicList(ctx context.Context) ([]jobq.Periodic, error)
	PeriodicFire(ctx context.Context, name string, plan jobq.PeriodicPlanFunc) (jobq.PeriodicFireResult, error)
	PeriodicReleaseQueued(ctx context.Context) (released []string, err error)
}

// ReleaseInterval is how often the periodic planner looks for a parked
// queue_one run whose previous run ended, while a queue_one schedule
// exists (±10% jitter): the most a parked run waits after the run before
// it ended, plus one scan.
const ReleaseInterval = time.Second

// periodicPlannerParams configures the periodic planner.
type periodicPlannerParams struct {
	Store            periodicStore
	RefreshInterval  time.Duration // OpsConfig.RefreshInterval (±10% jitter)
	MisfireThreshold time.Duration
	// Disabled stops this replica from firing schedules; the refresh (and
	// RefreshFunc) still runs.
	Disabled bool
	// RefreshFunc, if set, runs on every refresh before the schedules are
	// re-read: the limited claim re-reads its job type limits there, so one
	// timer serves both.
	RefreshFunc func(ctx context.Context)
	// WakeFunc asks the scanner to scan now (the fired jobs are due).
	WakeFunc func()
	Events   emitter // EventPeriodicFired, EventOpsRefreshed
	Retry    dbRetrier
	Log      *slog.Logger
}

// periodicEntry is one schedule as this replica knows it.
type periodicEntry struct {
	name      string
	nextLocal time.Time // when to fire, on this replica's clock
	queueOne  bool      // overlap policy queue_one, or a parked run left by it
}

// periodicPlanner fires periodic schedules: each when the database clock
// reaches its cursor (NextRunAt), the instants to enqueue planned by
// cronplan under the schedule's row lock, so replicas never enqueue an
// instant twice. It re-reads the schedules every RefreshInterval and on
// refreshNow.
type periodicPlanner struct {
	loopService
	p       periodicPlannerParams
	refresh chan struct{}

	mu       sync.Mutex
	periodic map[string]*periodicEntry
	// clockOffset is the database clock minus this replica's clock, as
	// measured by the last periodic fire.
	clockOffset time.Duration
}

func newPeriodicPlanner(p periodicPlannerParams) *periodicPlanner {
	return &periodicPlanner{p: p, refresh: make(chan struct{}, 1), periodic: map[string]*periodicEntry{}}
}

// Start refreshes once (so the first scan knows the limits) and then runs
// the planner until ctx ends or Stop.
func (pl *periodicPlanner) Start(ctx context.Context) error {
	pl.reload(ctx)
	return pl.start(ctx, pl.run)
}

// refreshNow makes the planner re-read at once; it never blocks.
func (pl *periodicPlanner) refreshNow() {
	select {
	case pl.refresh <- struct{}{}:
	default:
	}
}

func (pl *periodicPlanner) run(ctx context.Context) {
	interval := pl.p.RefreshInterval
	refresh := time.NewTimer(jittered(interval, interval/10))
	defer refresh.Stop()
	release := time.NewTimer(jittered(ReleaseInterval, ReleaseInterval/10))
	defer release.Stop()
	for {
		var fireC <-chan time.Time
		var fire *time.Timer
		if next, ok := pl.nextFire(); ok {
			fire = time.NewTimer(max(time.Until(next), 0))
			fireC = fire.C
		}
		select {
		case <-ctx.Done():
		case <-release.C:
			if pl.hasQueueOne() {
				pl.releaseQueued(ctx)
			}
			release.Reset(jittered(ReleaseInterval, ReleaseInterval/10))
		case <-refresh.C:
			pl.reload(ctx)
			refresh.Reset(jittered(interval, interval/10))
		case <-pl.refresh:
			pl.reload(ctx)
		case <-fireC:
			pl.fireDue(ctx)
		}
		if fire != nil {
			fire.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// reload runs RefreshFunc and re-reads the periodic schedules.
func (pl *periodicPlanner) reload(ctx context.Context) {
	p := pl.p
	if p.RefreshFunc != nil {
		p.RefreshFunc(ctx)
	}
	if p.Disabled {
		p.Events.emit(Event{Kind: EventOpsRefreshed})
		return
	}
	list, err := withRetryV(ctx, p.Retry, "ops.periodic", refreshMaxAttempts, func() ([]jobq.Periodic, error) {
		return p.Store.PeriodicList(ctx)
	})
	if err != nil {
		if ctx.Err() == nil {
			logDBFailure(p.Log, "reading periodic schedules failed; keeping the previous ones", err, "component", "ops")
		}
		return
	}
	pl.setPeriodic(list)
	p.Events.emit(Event{Kind: EventOpsRefreshed, N: len(list)})
}

// setPeriodic replaces the known schedules with list; each fires when the
// database clock reaches its cursor (NextRunAt), per the last measured offset.
func (pl *periodicPlanner) setPeriodic(list []jobq.Periodic) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	m := make(map[string]*periodicEntry, len(list))
	for _, p := range list {
		m[p.Name] = &periodicEntry{name: p.Name, nextLocal: p.NextRunAt.Add(-pl.clockOffset), queueOne: p.Overlap == jobq.OverlapQueueOne || p.QueuedJobID != 0}
	}
	pl.periodic = m
}

// hasQueueOne reports whether a known schedule has overlap queue_one or a
// parked run (its policy changed since it was parked).
func (pl *periodicPlanner) hasQueueOne() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, e := range pl.periodic {
		if e.queueOne {
			return true
		}
	}
	return false
}

// releaseQueued makes the parked queue_one runs whose previous run ended
// WAITING (store.PeriodicReleaseQueued) and wakes the scanner for them.
func (pl *periodicPlanner) releaseQueued(ctx context.Context) {
	p := pl.p
	released, err := withRetryV(ctx, p.Retry, "periodic.release", refreshMaxAttempts, func() ([]string, error) {
		return p.Store.PeriodicReleaseQueued(ctx)
	})
	if err != nil {
		if ctx.Err() == nil {
			logDBFailure(p.Log, "releasing parked periodic runs failed; retrying in one second", err, "component", "periodic")
		}
		return
	}
	if len(released) > 0 {
		p.WakeFunc()
	}
	for _, name := range released {
		p.Events.emit(Event{Kind: EventPeriodicReleased, Name: name})
	}
}

// nextFire returns the earliest fire time of the known schedules.
func (pl *periodicPlanner) nextFire() (time.Time, bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	var next time.Time
	for _, e := range pl.periodic {
		if next.IsZero() || e.nextLocal.Before(next) {
			next = e.nextLocal
		}
	}
	return next, !next.IsZero()
}

// fireDue fires every schedule whose time has come.
func (pl *periodicPlanner) fireDue(ctx context.Context) {
	now := time.Now()
	pl.mu.Lock()
	var due []string
	for name, e := range pl.periodic {
		if !e.nextLocal.After(now) {
			due = append(due, name)
		}
	}
	pl.mu.Unlock()
	for _, name := range due {
		if ctx.Err() != nil {
			return
		}
		pl.fire(ctx, name)
	}
}

// fire fires one schedule and sets its next fire time from the database
// clock: Next − DBNow from now.
func (pl *periodicPlanner) fire(ctx context.Context, name string) {
	p := pl.p
	var mf PeriodicMisfire
	plan := func(sp jobq.Periodic, now time.Time) jobq.PeriodicPlan {
		sched, err := cronplan.Parse(sp.Cron)
		if err != nil {
			return jobq.PeriodicPlan{Next: sp.NextRunAt} // left untouched; reported below
		}
		mf = PeriodicMisfire{Policy: sp.Misfire}
		if n, first, last := cronplan.Missed(sched, p.MisfireThreshold, sp.NextRunAt, now); n > 0 {
			mf.Missed, mf.Skipped, mf.From, mf.To = n, n, first, last
			if sp.Misfire == jobq.MisfireOnce {
				mf.Skipped = n - 1
			}
		}
		return cronplan.PlanFire(sched, sp.Misfire, p.MisfireThreshold, sp.NextRunAt, now)
	}
	res, err := withRetryV(ctx, p.Retry, "periodic.fire", retryUntilDone, func() (jobq.PeriodicFireResult, error) {
		return p.Store.PeriodicFire(ctx, name, plan)
	})
	if !pl.afterFire(ctx, name, res, err, time.Now()) {
		return
	}
	if len(res.Inserted) > 0 {
		p.Log.Debug("periodic jobs enqueued", "component", "periodic", "name", name, "instants", fmt.Sprint(res.Inserted))
		p.WakeFunc() // the jobs are due now: scan at once
	}
	p.Events.emit(Event{Kind: EventPeriodicFired, Name: name, Fire: res, Misfire: mf})
}

// afterFire sets the schedule's next fire time after a fire that returned
// at received; false when the fire failed or the schedule is gone.
func (pl *periodicPlanner) afterFire(ctx context.Context, name string, res jobq.PeriodicFireResult, err error, received time.Time) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	e := pl.periodic[name]
	switch {
	case e == nil:
		return false
	case errors.Is(err, jobq.ErrNotFound):
		delete(pl.periodic, name)
		return false
	case err != nil:
		if ctx.Err() == nil {
			logDBFailure(pl.p.Log, "periodic fire failed; retrying in one second", err, "component", "periodic", "name", name)
		}
		e.nextLocal = received.Add(time.Second)
		return false
	}
	pl.clockOffset = res.DBNow.Sub(received)
	if !res.Next.After(res.DBNow) {
		pl.p.Log.Error("periodic schedule has an invalid cron expression; fix it with /v1/periodic",
			"component", "periodic", "name", name)
		e.nextLocal = received.Add(pl.p.RefreshInterval)
	} else {
		e.nextLocal = received.Add(res.Next.Sub(res.DBNow))
	}
	return true
}
