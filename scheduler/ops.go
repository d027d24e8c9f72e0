package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/store"
)

// Defaults for OpsConfig.
const (
	OpsRefreshIntervalDefault = 30 * time.Second
	MisfireThresholdDefault   = time.Second
	CleanIntervalDefault      = time.Minute
	CleanBatchDefault         = 500
	CleanMaxPerPassDefault    = 10000
)

// OpsConfig configures the operations services of a replica: concurrency
// limits per job type, periodic (cron) schedules and retention. Pausing
// needs no configuration: the scan itself leaves paused types out.
type OpsConfig struct {
	// RefreshInterval is how often this replica re-reads the limited job
	// types and the periodic schedules (two queries). Changes made through
	// this replica's API apply at once (RefreshOps); other replicas pick them
	// up within one interval. Defaults to 30s, so an idle replica spends about
	// 0.07 queries/s on it.
	RefreshInterval time.Duration
	// MisfireThreshold is how late a scheduled instant may be enqueued and
	// still count as on time. Instants older than this when a replica fires
	// the schedule were missed (every replica was down or stuck): the
	// schedule's misfire policy decides whether one of them runs. Defaults to 1s.
	MisfireThreshold time.Duration
	// DisablePeriodic stops this replica from firing periodic schedules.
	DisablePeriodic bool
	// Retention turns the cleaner on: terminal jobs finished more than
	// Retention ago are deleted with their job_execution rows. 0 (the
	// default) keeps every job.
	Retention time.Duration
	// CleanInterval is how often the cleaner runs when Retention is set.
	// Defaults to 1m (±10% jitter).
	CleanInterval time.Duration
	// CleanBatch is the most jobs one delete transaction removes. Defaults to 500.
	CleanBatch int
	// CleanMaxPerPass caps the jobs one cleaner pass deletes; the rest wait
	// for the next pass. Defaults to 10000.
	CleanMaxPerPass int
	// PeriodicFiredFunc, if set, is called after this replica fired a
	// schedule (whether or not it inserted a job).
	PeriodicFiredFunc func(name string, res jobq.PeriodicFireResult)
	// CleanedFunc, if set, is called after each cleaner pass.
	CleanedFunc func(res jobq.PurgeResult)
}

// WithDefaults returns c with every zero field set to its default.
func (c OpsConfig) WithDefaults() OpsConfig {
	c.RefreshInterval = cmp.Or(c.RefreshInterval, OpsRefreshIntervalDefault)
	c.MisfireThreshold = cmp.Or(c.MisfireThreshold, MisfireThresholdDefault)
	c.CleanInterval = cmp.Or(c.CleanInterval, CleanIntervalDefault)
	c.CleanBatch = cmp.Or(c.CleanBatch, CleanBatchDefault)
	c.CleanMaxPerPass = cmp.Or(c.CleanMaxPerPass, CleanMaxPerPassDefault)
	return c
}

// Validate reports the invalid settings of a defaulted OpsConfig.
func (c OpsConfig) Validate() error {
	var errs []error
	if c.RefreshInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("ops refresh interval: must be at least 10ms, got %s", c.RefreshInterval))
	}
	if c.MisfireThreshold < 0 {
		errs = append(errs, fmt.Errorf("misfire threshold: must not be negative, got %s", c.MisfireThreshold))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("retention: must not be negative (0 keeps every job), got %s", c.Retention))
	}
	if c.CleanInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("clean interval: must be at least 10ms, got %s", c.CleanInterval))
	}
	if c.CleanBatch < 1 || c.CleanBatch > 10000 {
		errs = append(errs, fmt.Errorf("clean batch: must be in [1, 10000], got %d", c.CleanBatch))
	}
	if c.CleanMaxPerPass < 1 {
		errs = append(errs, fmt.Errorf("clean max per pass: must be positive, got %d", c.CleanMaxPerPass))
	}
	return errors.Join(errs...)
}

// OpsStore is what the operations services need beyond Store. *store.Store
// implements it, and so does faultstore.Store by delegation. A replica whose
// store lacks it runs no limited claim, no periodic schedules and no cleaner
// (and so never claims jobs of a limited type).
type OpsStore interface {
	TypeLimits(ctx context.Context) (map[string]int, error)
	TypeClaimable(ctx context.Context, jobType string) (bool, error)
	JobClaimLimited(ctx context.Context, jobType string, p jobq.ClaimParams) ([]jobq.ClaimedJob, error)
	PeriodicList(ctx context.Context) ([]jobq.Periodic, error)
	PeriodicFire(ctx context.Context, name string, plan jobq.PeriodicPlanFunc) (jobq.PeriodicFireResult, error)
	JobPurge(ctx context.Context, p jobq.PurgeParams) (jobq.PurgeResult, error)
}

var _ OpsStore = (*store.Store)(nil)

// opsRunner keeps this replica's view of the limited job types and periodic
// schedules, runs the limited claim for the scanner, fires schedules and
// runs the cleaner.
type opsRunner struct {
	s       *Scheduler
	st      OpsStore
	cfg     OpsConfig
	refresh chan struct{}

	mu       sync.Mutex
	limits   map[string]int
	periodic map[string]*periodicEntry
	// clockOffset is the database clock minus this replica's clock, as
	// measured by the last periodic fire.
	clockOffset time.Duration
}

// startOps starts the refresher (limits and schedules), the periodic firer
// and, when Retention is set, the cleaner, on the soft-stop context.
func (s *Scheduler) startOps() {
	st, ok := s.store.(OpsStore)
	if !ok {
		s.log.Warn("store does not implement scheduler.OpsStore: limited job types, periodic schedules and retention are off on this replica")
		return
	}
	o := &opsRunner{s: s, st: st, cfg: s.cfg.Ops, refresh: make(chan struct{}, 1),
		limits: map[string]int{}, periodic: map[string]*periodicEntry{}}
	s.ops = o
	o.reload(s.softCtx)
	s.services.Add(1)
	go func() { defer s.services.Done(); o.run(s.softCtx) }()
	if o.cfg.Retention > 0 {
		s.services.Add(1)
		go func() { defer s.services.Done(); o.cleanLoop(s.softCtx) }()
	}
}

// RefreshOps makes this replica re-read the limited job types and periodic
// schedules now instead of at its next RefreshInterval. It never blocks;
// the service calls it after every change made through this replica.
func (s *Scheduler) RefreshOps() {
	if s.ops == nil {
		return
	}
	select {
	case s.ops.refresh <- struct{}{}:
	default:
	}
}

// LimitedTypes returns this replica's current view of job type → max_running.
func (s *Scheduler) LimitedTypes() map[string]int {
	if s.ops == nil {
		return map[string]int{}
	}
	s.ops.mu.Lock()
	defer s.ops.mu.Unlock()
	out := make(map[string]int, len(s.ops.limits))
	for k, v := range s.ops.limits {
		out[k] = v
	}
	return out
}

func (o *opsRunner) run(ctx context.Context) {
	refresh := time.NewTimer(jittered(o.cfg.RefreshInterval, o.cfg.RefreshInterval/10))
	defer refresh.Stop()
	for {
		var fireC <-chan time.Time
		var fire *time.Timer
		if next, ok := o.nextFire(); ok {
			fire = time.NewTimer(max(time.Until(next), 0))
			fireC = fire.C
		}
		select {
		case <-ctx.Done():
		case <-refresh.C:
			o.reload(ctx)
			refresh.Reset(jittered(o.cfg.RefreshInterval, o.cfg.RefreshInterval/10))
		case <-o.refresh:
			o.reload(ctx)
		case <-fireC:
			o.fireDue(ctx)
		}
		if fire != nil {
			fire.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// reload re-reads the limited types and the periodic schedules.
func (o *opsRunner) reload(ctx context.Context) {
	s := o.s
	var limits map[string]int
	err := s.dbRetry(ctx, "ops.limits", 3, func() error {
		var e error
		limits, e = o.st.TypeLimits(ctx)
		return e
	})
	if err != nil {
		if ctx.Err() == nil {
			s.logDBFailure("reading job type limits failed; keeping the previous ones", err, "component", "ops")
		}
	} else {
		o.mu.Lock()
		o.limits = limits
		o.mu.Unlock()
	}
	if o.cfg.DisablePeriodic {
		return
	}
	var list []jobq.Periodic
	err = s.dbRetry(ctx, "ops.periodic", 3, func() error {
		var e error
		list, e = o.st.PeriodicList(ctx)
		return e
	})
	if err != nil {
		if ctx.Err() == nil {
			s.logDBFailure("reading periodic schedules failed; keeping the previous ones", err, "component", "ops")
		}
		return
	}
	o.setPeriodic(list)
}

// claimLimited runs the limited claim for each limited job type that the
// probe finds claimable (not paused, under its limit, with due work), taking
// at most the free worker slots, and dispatches what it claimed. It costs
// nothing when no type is limited, and one lock-free read per limited type
// otherwise.
func (o *opsRunner) claimLimited(ctx context.Context) {
	s := o.s
	o.mu.Lock()
	types := make([]string, 0, len(o.limits))
	for t := range o.limits {
		types = append(types, t)
	}
	o.mu.Unlock()
	slices.Sort(types)
	for _, typ := range types {
		free := len(s.free)
		if free == 0 || ctx.Err() != nil {
			return
		}
		var due bool
		err := s.dbRetry(ctx, "claim.limited.probe", claimMaxAttempts, func() error {
			var e error
			due, e = o.st.TypeClaimable(ctx, typ)
			return e
		})
		if err != nil || !due {
			if err != nil && ctx.Err() == nil {
				s.stats.claimErrors.Add(1)
				s.logDBFailure("limited claim probe failed", err, "component", "scanner", "job_type", typ)
			}
			continue
		}
		var jobs []jobq.ClaimedJob
		err = s.dbRetry(ctx, "claim.limited", claimMaxAttempts, func() error {
			var e error
			jobs, e = o.st.JobClaimLimited(ctx, typ, jobq.ClaimParams{Owner: s.cfg.Owner, Limit: min(free, s.cfg.BatchLimit), Lease: s.cfg.Lease})
			return e
		})
		if err != nil {
			if ctx.Err() == nil {
				s.stats.claimErrors.Add(1)
				s.logDBFailure("limited claim failed", err, "component", "scanner", "job_type", typ)
			}
			continue
		}
		s.stats.claimed.Add(int64(len(jobs)))
		if s.cfg.Hooks.ClaimedFunc != nil {
			s.cfg.Hooks.ClaimedFunc(jobs, 0)
		}
		for i := range jobs {
			s.dispatch(jobs[i])
		}
	}
}
