// Package scheduler is jobq's scheduling core: a jittered scanner with
// local wake-up and drain mode, pluggable claim strategies (skiplocked, cas),
// a bounded worker pool, a heartbeat renewing all in-flight leases in one
// statement, a batching completer whose writes are fenced by attempt, and a
// rescuer returning expired leases. See DESIGN.md §2.
package scheduler

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/store"
)

// Scheduler is one replica's scheduling loop. Create with New, run with
// Start, stop with Stop.
type Scheduler struct {
	cfg   Config
	store Store
	reg   *Registry
	db    *sql.DB
	log   *slog.Logger

	wake chan struct{}
	free chan struct{} // worker slots: a token per free slot
	// slotFreed gets a token (if it has none) each time a slot is freed:
	// a draining scan waits on it for a fuller batch (scanner.awaitSlots).
	slotFreed chan struct{}
	// working counts handlers that have not handed their outcome on yet:
	// the completer lingers for them (completer.linger). workingIdle gets a
	// token when a handler that completes on its own (TxHandler) leaves
	// working at 0, so a lingering completer need not wait it out.
	working     atomic.Int64
	workingIdle chan struct{}

	mu   sync.Mutex
	runs map[jobq.Fence]*run

	moreWaiting atomic.Bool // the last claim filled its batch: more may be due
	stats       stats

	softCtx    context.Context // claiming (scanner, rescuer)
	softCancel context.CancelFunc
	hardCtx    context.Context // work (handlers)
	hardCancel context.CancelCauseFunc

	handlers   sync.WaitGroup // running handlers
	services   sync.WaitGroup // scanner, rescuer
	completer  *completer
	heartbeat  *heartbeat
	promoter   *promoter  // nil until Start
	ops        *opsRunner // limited claim, periodic schedules, cleaner (ops.go); nil without OpsStore
	started    atomic.Bool
	stopOnce   sync.Once
	stoppedErr error
}

type run struct {
	job           *Job
	cancel        context.CancelCauseFunc
	leaseDeadline time.Time // local monotonic estimate of lease_until
	lost          bool
	// guard cancels the handler leaseGuardMargin before leaseDeadline unless
	// a renewal moves the deadline first (see heartbeat.guardFired).
	guard *time.Timer
}

// New returns a Scheduler over st with the handlers in reg. db, if non-nil,
// is handed to handlers as Job.DB. cfg gets WithDefaults; a Strategy left
// empty becomes skiplocked when skipLockedOK, else cas.
func New(st Store, db *sql.DB, reg *Registry, cfg Config, skipLockedOK bool) (*Scheduler, error) {
	cfg = cfg.WithDefaults()
	if cfg.Strategy == "" {
		cfg.Strategy = StrategyCAS
		if skipLockedOK {
			cfg.Strategy = StrategySkipLocked
		} else {
			cfg.Logger.Warn("scheduler: server lacks SKIP LOCKED (needs MySQL ≥ 8.0.1 or MariaDB ≥ 10.6); using the cas claim strategy")
		}
	}
	if cfg.Strategy == StrategySkipLocked && !skipLockedOK {
		return nil, fmt.Errorf("strategy skiplocked: %w; use --strategy cas", store.ErrSkipLockedUnsupported)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	if reg == nil {
		reg = NewRegistry()
	}
	s := &Scheduler{
		cfg: cfg, store: st, reg: reg, db: db,
		log:         cfg.Logger.With("component", "scheduler", "owner", cfg.Owner),
		wake:        make(chan struct{}, 1),
		free:        make(chan struct{}, cfg.Workers),
		slotFreed:   make(chan struct{}, 1),
		workingIdle: make(chan struct{}, 1),
		runs:        map[jobq.Fence]*run{},
	}
	for range cfg.Workers {
		s.free <- struct{}{}
	}
	return s, nil
}

// Config returns the effective configuration (defaults applied).
func (s *Scheduler) Config() Config { return s.cfg }

// Registry returns the handler registry.
func (s *Scheduler) Registry() *Registry { return s.reg }

// Start launches the scanner, promoter, rescuer, heartbeat and completer and returns
// at once. Cancelling ctx is a hard stop: handlers' contexts are cancelled.
// Use Stop for a graceful shutdown.
func (s *Scheduler) Start(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("scheduler: already started")
	}
	s.hardCtx, s.hardCancel = context.WithCancelCause(context.WithoutCancel(ctx))
	s.softCtx, s.softCancel = context.WithCancel(ctx)
	context.AfterFunc(ctx, func() { s.hardCancel(ErrShutdown) })
	s.startOps() // before the scanner, which reads s.ops

	s.completer = newCompleter(s)
	s.heartbeat = newHeartbeat(s)
	go s.completer.run()
	go s.heartbeat.run()
	s.promoter = newPromoter(s)
	s.services.Add(2)
	go func() { defer s.services.Done(); newScanner(s).run(s.softCtx) }()
	go func() { defer s.services.Done(); s.promoter.run(s.softCtx) }()
	if !s.cfg.Sabotage.NoRescuer {
		s.services.Add(1)
		go func() { defer s.services.Done(); newRescuer(s).run(s.softCtx) }()
	}
	s.log.Info("scheduler started", "strategy", s.cfg.Strategy, "workers", s.cfg.Workers,
		"batch_limit", s.cfg.BatchLimit, "poll_interval", s.cfg.PollInterval, "poll_jitter", s.cfg.PollJitter,
		"lease", s.cfg.Lease, "types", s.reg.Types())
	return nil
}

// Wake asks the scanner to scan now (local wake-up on submit). It never blocks.
func (s *Scheduler) Wake() {
	if s.cfg.DisableWakeup {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Stop shuts down gracefully: it stops claiming, lets in-flight handlers
// finish for up to ShutdownTimeout while heartbeats go on, then cancels the
// rest (their jobs are released to WAITING without spending a retry),
// flushes completions and stops the heartbeat. Stop is idempotent.
func (s *Scheduler) Stop() error {
	if !s.started.Load() {
		return nil
	}
	s.stopOnce.Do(func() {
		s.softCancel()
		s.services.Wait()
		done := make(chan struct{})
		go func() { s.handlers.Wait(); close(done) }()
		t := time.NewTimer(s.cfg.ShutdownTimeout)
		select {
		case <-done:
		case <-t.C:
			s.log.Warn("shutdown timeout: cancelling in-flight handlers", "in_flight", s.InFlight())
			s.hardCancel(ErrShutdown)
			select {
			case <-done:
			case <-time.After(s.cfg.Lease):
				s.stoppedErr = errors.New("scheduler: handlers ignored cancellation; their leases will expire and be rescued")
			}
		}
		t.Stop()
		if s.stoppedErr == nil {
			// Every handler returned, so nothing can submit to the completer any more.
			s.completer.close()
		}
		s.heartbeat.stop()
		s.hardCancel(ErrShutdown)
		s.log.Info("scheduler stopped", "claimed", s.stats.claimed.Load(), "completed", s.stats.completed.Load())
	})
	return s.stoppedErr
}

// InFlight returns the number of runs this replica holds (handlers running
// or completions not yet committed).
func (s *Scheduler) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runs)
}

// FreeSlots returns the number of idle workers.
func (s *Scheduler) FreeSlots() int { return len(s.free) }

// dbRetry runs fn with the DB retry policy, reporting every error.
func (s *Scheduler) dbRetry(ctx context.Context, op string, maxAttempts int, fn func() error) error {
	p := s.cfg.DBRetry
	if maxAttempts > 0 {
		p.MaxAttempts = maxAttempts
	}
	p.OnRetryFunc = func(op string, err error) {
		s.stats.dbRetries.Add(1)
		s.log.Debug("retrying database operation", "op", op, "cause", store.Cause(err), "err", err)
	}
	err := p.Do(ctx, op, func() error {
		err := fn()
		if err != nil && s.cfg.Hooks.DBErrorFunc != nil {
			s.cfg.Hooks.DBErrorFunc(op, err)
		}
		return err
	})
	return err
}

// logDBFailure logs a database operation that failed after its retries: at
// WARN, with the cause named, when the error is transient (a deadlock or
// Galera certification conflict, a read-only or not-ready server, a lost
// connection: the next pass retries it), at ERROR otherwise.
func (s *Scheduler) logDBFailure(msg string, err error, args ...any) {
	if store.IsRetryable(err) {
		s.log.Warn(msg, append(args, "cause", store.Cause(err), "err", err)...)
		return
	}
	s.log.Error(msg, append(args, "err", err)...)
}

// Stats is a snapshot of a replica's counters since Start.
type Stats struct {
	Claimed        int64 // runs claimed
	ClaimConflicts int64 // cas rows another replica won
	ClaimErrors    int64 // claim attempts that failed after retries
	Completed      int64 // completions committed (any outcome)
	Succeeded      int64
	Failed         int64 // attempts that failed (retried or final)
	Retried        int64 // failed attempts re-queued with backoff
	Stale          int64 // completions refused because the run lost its lease
	Rescued        int64 // expired leases returned by this replica's rescuer
	LeaseLost      int64 // handlers cancelled because their run lost its lease
	Released       int64 // runs handed back at shutdown
	DBRetries      int64 // database operations retried
	HeartbeatFails int64 // heartbeats that failed after retries
	Scans          int64
	Promoted       int64 // SCHEDULED jobs this replica's promoter made WAITING
}

type stats struct {
	claimed, claimConflicts, claimErrors, completed, succeeded, failed, retried,
	stale, rescued, leaseLost, released, dbRetries, heartbeatFails, scans, promoted atomic.Int64
}

// Stats returns a snapshot of the counters.
func (s *Scheduler) Stats() Stats {
	return Stats{
		Claimed: s.stats.claimed.Load(), ClaimConflicts: s.stats.claimConflicts.Load(),
		ClaimErrors: s.stats.claimErrors.Load(), Completed: s.stats.completed.Load(),
		Succeeded: s.stats.succeeded.Load(), Failed: s.stats.failed.Load(), Retried: s.stats.retried.Load(),
		Stale: s.stats.stale.Load(), Rescued: s.stats.rescued.Load(), LeaseLost: s.stats.leaseLost.Load(),
		Released: s.stats.released.Load(), DBRetries: s.stats.dbRetries.Load(),
		HeartbeatFails: s.stats.heartbeatFails.Load(), Scans: s.stats.scans.Load(),
		Promoted: s.stats.promoted.Load(),
	}
}
