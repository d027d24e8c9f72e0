package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jobq/jobq"
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

// OpsStore is the part of Store the operations services use: the limited
// claim, the periodic planner and the cleaner.
type OpsStore interface {
	TypeLimits(ctx context.Context) (map[string]int, error)
	TypeProbe(ctx context.Context, jobType string) (jobq.TypeProbe, error)
	JobClaimLimited(ctx context.Context, jobType string, p jobq.ClaimParams) ([]jobq.ClaimedJob, error)
	PeriodicList(ctx context.Context) ([]jobq.Periodic, error)
	PeriodicFire(ctx context.Context, name string, plan jobq.PeriodicPlanFunc) (jobq.PeriodicFireResult, error)
	PeriodicReleaseQueued(ctx context.Context) (released []string, err error)
	JobPurge(ctx context.Context, p jobq.PurgeParams) (jobq.PurgeResult, error)
}

// limitedStore is what the limited claim needs from the store.
type limitedStore interface {
	TypeLimits(ctx context.Context) (map[string]int, error)
	TypeProbe(ctx context.Context, jobType string) (jobq.TypeProbe, error)
	JobClaimLimited(ctx context.Context, jobType string, p jobq.ClaimParams) ([]jobq.ClaimedJob, error)
}

// limitedClaimerParams configures the limited claim.
type limitedClaimerParams struct {
	Store        limitedStore
	Slots        *slots
	DispatchFunc func(jobq.ClaimedJob)
	// WakeFunc wakes the scanner (and remote fetches) when a rate window
	// that held due work back opens.
	WakeFunc   func()
	Owner      string
	Lease      time.Duration
	BatchLimit int
	Retry      dbRetrier
	Log        *slog.Logger
	Events     emitter     // EventClaimed, EventClaimFailed, EventRateHeld
	Lost       *lostClaims // failed tries, for the scanner to reconcile
}

// limitedClaimer keeps this replica's view of the limited job types
// (re-read by reload on each ops refresh) and claims them for the scanner.
// When a rate window holds due work back it arms one timer for the earliest
// instant a window opens, and wakes the scanner then: held-back jobs are
// taken as soon as their window allows, without a scan in between.
type limitedClaimer struct {
	p      limitedClaimerParams
	mu     sync.Mutex
	limits map[string]int
	wakeAt time.Time // when the armed wake fires; zero: none armed
	timer  *time.Timer
}

func newLimitedClaimer(p limitedClaimerParams) *limitedClaimer {
	return &limitedClaimer{p: p, limits: map[string]int{}}
}

// RefreshOps makes this replica re-read the limited job types and periodic
// schedules now instead of at its next RefreshInterval. It never blocks;
// the service calls it after every change made through this replica.
func (s *Scheduler) RefreshOps() { s.planner.refreshNow() }

// LimitedTypes returns this replica's current view of job type → max_running.
func (s *Scheduler) LimitedTypes() map[string]int { return s.limited.snapshot() }

// capped reports whether jobType has a concurrency limit (max_running > 0)
// in this replica's view.
func (l *limitedClaimer) capped(jobType string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limits[jobType] > 0
}

func (l *limitedClaimer) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.limits)
}

// reload re-reads the limited types; on failure the previous view stays.
func (l *limitedClaimer) reload(ctx context.Context) {
	p := l.p
	limits, err := withRetryV(ctx, p.Retry, "ops.limits", refreshMaxAttempts, func() (map[string]int, error) {
		return p.Store.TypeLimits(ctx)
	})
	if err != nil {
		if ctx.Err() == nil {
			logDBFailure(p.Log, "reading job type limits failed; keeping the previous ones", err, "component", "ops")
		}
		return
	}
	l.mu.Lock()
	l.limits = limits
	l.mu.Unlock()
}

// claim runs the limited claim for each limited job type that the probe
// finds claimable (not paused, under its limits, with due work), taking at
// most the slots it reserved (slots.reserve), dispatches what it claimed and returns how
// many; full reports that a claim took every slot it reserved (more may be
// due: a freed slot should wake the scanner). It costs nothing when no
// type is limited, and one lock-free read per limited type otherwise (two
// for a rate-limited type after a claim, to learn whether its window — or
// its keys' windows — now hold the rest back and when the first opens).
func (l *limitedClaimer) claim(ctx context.Context) (dispatched int, full bool) {
	p := l.p
	l.mu.Lock()
	types := slices.Sorted(maps.Keys(l.limits))
	l.mu.Unlock()
	for _, typ := range types {
		if ctx.Err() != nil || p.Slots.available() == 0 {
			return dispatched, full
		}
		claimable, rated := l.probe(ctx, typ)
		if !claimable {
			continue
		}
		n := p.Slots.reserve(p.BatchLimit)
		if n == 0 {
			return dispatched, full
		}
		jobs, err := withRetryV(ctx, p.Retry, "claim.limited", claimMaxAttempts, func() ([]jobq.ClaimedJob, error) {
			return p.Lost.try(func() ([]jobq.ClaimedJob, error) {
				return p.Store.JobClaimLimited(ctx, typ, jobq.ClaimParams{Owner: p.Owner, Limit: n, Lease: p.Lease})
			})
		})
		if err != nil {
			p.Slots.unreserve(n)
			if ctx.Err() == nil {
				p.Events.emit(Event{Kind: EventClaimFailed, Err: err})
				logDBFailure(p.Log, "limited claim failed", err, "component", "scanner", "job_type", typ)
			}
			continue
		}
		p.Events.emit(Event{Kind: EventClaimed, Jobs: jobs})
		for i := range jobs {
			p.DispatchFunc(jobs[i])
		}
		p.Slots.unreserve(n - len(jobs))
		dispatched += len(jobs)
		full = full || len(jobs) == n
		if rated {
			// A window the claim filled arms the wake; so does a per-key
			// claim that took nothing because it held every job it met
			// (their keys' windows were full).
			l.probe(ctx, typ)
		}
	}
	return dispatched, full
}

// probe reports whether typ is claimable now and whether it has a rate
// limit. A type whose due work waits for its rate window arms the wake for
// when the window opens.
func (l *limitedClaimer) probe(ctx context.Context, typ string) (claimable, rated bool) {
	p := l.p
	pr, err := withRetryV(ctx, p.Retry, "claim.limited.probe", claimMaxAttempts, func() (jobq.TypeProbe, error) {
		return p.Store.TypeProbe(ctx, typ)
	})
	if err != nil {
		if ctx.Err() == nil {
			p.Events.emit(Event{Kind: EventClaimFailed, Err: err})
			logDBFailure(p.Log, "limited claim probe failed", err, "component", "scanner", "job_type", typ)
		}
		return false, false
	}
	if pr.RateHeld {
		p.Events.emit(Event{Kind: EventRateHeld, Name: typ, Duration: pr.OpensIn})
		l.wakeIn(pr.OpensIn)
	}
	return pr.Claimable, pr.RateLimited
}

// wakeIn arms the wake for d from now, unless one is armed to fire sooner.
// A window counted on the database clock opens d after the probe's NOW(6),
// which was read before its answer arrived: d from now is never early.
func (l *limitedClaimer) wakeIn(d time.Duration) {
	at := time.Now().Add(d)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.wakeAt.IsZero() && !at.Before(l.wakeAt) {
		return
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.wakeAt = at
	l.timer = time.AfterFunc(d, func() {
		l.mu.Lock()
		l.wakeAt = time.Time{}
		l.mu.Unlock()
		if l.p.WakeFunc != nil {
			l.p.WakeFunc()
		}
	})
}

// stop disarms the wake.
func (l *limitedClaimer) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.wakeAt = time.Time{}
}
