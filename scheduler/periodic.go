package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cronplan"
)

// periodicEntry is one schedule as this replica knows it.
type periodicEntry struct {
	name      string
	nextLocal time.Time // when to fire, on this replica's clock
}

// setPeriodic replaces the known schedules with list; each fires when the
// database clock reaches its cursor (NextRunAt), per the last measured offset.
func (o *opsRunner) setPeriodic(list []jobq.Periodic) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := make(map[string]*periodicEntry, len(list))
	for _, p := range list {
		m[p.Name] = &periodicEntry{name: p.Name, nextLocal: p.NextRunAt.Add(-o.clockOffset)}
	}
	o.periodic = m
}

// nextFire returns the earliest fire time of the known schedules.
func (o *opsRunner) nextFire() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var next time.Time
	for _, e := range o.periodic {
		if next.IsZero() || e.nextLocal.Before(next) {
			next = e.nextLocal
		}
	}
	return next, !next.IsZero()
}

// fireDue fires every schedule whose time has come.
func (o *opsRunner) fireDue(ctx context.Context) {
	now := time.Now()
	o.mu.Lock()
	var due []string
	for name, e := range o.periodic {
		if !e.nextLocal.After(now) {
			due = append(due, name)
		}
	}
	o.mu.Unlock()
	for _, name := range due {
		if ctx.Err() != nil {
			return
		}
		o.fire(ctx, name)
	}
}

// fire fires one schedule and sets its next fire time from the database
// clock: Next − DBNow from now.
func (o *opsRunner) fire(ctx context.Context, name string) {
	s := o.s
	plan := func(p jobq.Periodic, now time.Time) ([]time.Time, time.Time) {
		sched, err := cronplan.Parse(p.Cron)
		if err != nil {
			return nil, p.NextRunAt // left untouched; reported below
		}
		return cronplan.Plan(sched, p.Misfire, o.cfg.MisfireThreshold, p.NextRunAt, now)
	}
	var res jobq.PeriodicFireResult
	err := s.dbRetry(ctx, "periodic.fire", 0, func() error {
		var e error
		res, e = o.st.PeriodicFire(ctx, name, plan)
		return e
	})
	if !o.afterFire(name, res, err, time.Now()) {
		return
	}
	if len(res.Inserted) > 0 {
		s.log.Debug("periodic jobs enqueued", "component", "periodic", "name", name, "instants", fmt.Sprint(res.Inserted))
		select { // the jobs are due now: scan at once
		case s.wake <- struct{}{}:
		default:
		}
	}
	if o.cfg.PeriodicFiredFunc != nil {
		o.cfg.PeriodicFiredFunc(name, res)
	}
}

// afterFire sets the schedule's next fire time after a fire that returned
// at received; false when the fire failed or the schedule is gone.
func (o *opsRunner) afterFire(name string, res jobq.PeriodicFireResult, err error, received time.Time) bool {
	s := o.s
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.periodic[name]
	switch {
	case e == nil:
		return false
	case errors.Is(err, jobq.ErrNotFound):
		delete(o.periodic, name)
		return false
	case err != nil:
		if s.softCtx.Err() == nil {
			s.logDBFailure("periodic fire failed; retrying in one second", err, "component", "periodic", "name", name)
		}
		e.nextLocal = received.Add(time.Second)
		return false
	}
	o.clockOffset = res.DBNow.Sub(received)
	if !res.Next.After(res.DBNow) {
		s.log.Error("periodic schedule has an invalid cron expression; fix it with /v1/periodic",
			"component", "periodic", "name", name)
		e.nextLocal = received.Add(o.cfg.RefreshInterval)
	} else {
		e.nextLocal = received.Add(res.Next.Sub(res.DBNow))
	}
	return true
}
