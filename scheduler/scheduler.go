// Package scheduler is jobq's scheduling core: a jittered scanner with
// local wake-up and drain mode, pluggable claim strategies (skiplocked, cas),
// a dispatcher handing claimed runs to their executors (a bounded
// in-process worker pool, remote workers), a heartbeat renewing all
// in-flight leases in one statement, a batching completer whose writes are
// fenced by attempt, and a rescuer returning expired leases, plus the
// operations services (limited claim, periodic planner, cleaner). Each
// service is its own type with a params struct and Start/Stop (service.go);
// the in-flight runs live in a runTable, the lease-derived timings are named
// in timing.go and the retry budgets in retry.go. The design is in
// docs/architecture.md.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
)

// Scheduler is one replica's scheduling loop: it builds the services
// (scanner, heartbeat, completer, rescuer, periodic planner, cleaner) from
// its Config, wires them to the worker pool and the run table, and starts
// and stops them in order. Create with New, run with Start, stop with Stop.
type Scheduler struct {
	cfg   Config
	store Store
	reg   *Registry
	log   *slog.Logger
	retry dbRetrier
	// outcomes writes completions with the outcome retry rule (outcome.go).
	outcomes outcomeWriter
	stats    stats

	slots *slots       // claim capacity (workers + run queue), wake-up
	work  *workTracker // handlers that have not handed their outcome on
	runs  *runTable    // in-flight runs
	lost  *lostClaims  // claim tries whose answer was lost (the scanner's)
	// disp hands claimed runs to the executors (the in-process handler
	// pool, remote workers) and writes their outcomes (dispatcher.go).
	disp *dispatcher

	hardCancel context.CancelCauseFunc // cancels the runs' contexts (work)

	scanner   *scanner
	rescuer   *rescuer
	promoter  *promoter
	heartbeat *heartbeat
	completer *completer
	// cleaner is nil without Retention.
	limited *limitedClaimer
	planner *periodicPlanner
	cleaner *cleaner

	started    atomic.Bool
	stopOnce   sync.Once
	stoppedErr error
}

// New returns a Scheduler over st with the handlers in reg. cfg gets
// WithDefaults; a Strategy left empty becomes skiplocked when skipLockedOK,
// else cas. A handler that needs the database holds its own handle.
func New(st Store, reg *Registry, cfg Config, skipLockedOK bool) (*Scheduler, error) {
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
		return nil, fmt.Errorf("strategy skiplocked: %w; use --strategy cas", jobq.ErrSkipLockedUnsupported)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	if reg == nil {
		reg = NewRegistry()
	}
	for _, t := range cfg.RemoteTypes {
		if _, ok := reg.Lookup(t); ok {
			return nil, fmt.Errorf("job type %q: declared remote and has an in-process handler; a job type is run by one or the other", t)
		}
	}
	s := &Scheduler{
		cfg: cfg, store: st, reg: reg,
		log:   cfg.Logger.With("component", "scheduler", "owner", cfg.Owner),
		slots: newSlots(cfg.Workers, cfg.runQueue(), cfg.CompleteBatch), work: newWorkTracker(), runs: newRunTable(),
	}
	s.retry = dbRetrier{policy: cfg.DBRetry, log: s.log, events: s.emit}
	s.lost = &lostClaims{}
	s.outcomes = outcomeWriter{Runs: s.runs, Lease: cfg.Lease, Retry: s.retry, Log: s.log}
	s.disp = &dispatcher{cfg: cfg, store: st, log: s.log, events: s.emit, runs: s.runs, slots: s.slots, work: s.work,
		lost: s.lost, outcomes: s.outcomes}
	s.disp.reporter, _ = st.(runReporter)
	s.disp.local = newLocalExecutor(s.disp, reg)
	if len(cfg.RemoteTypes) > 0 {
		rs, ok := st.(RemoteStore)
		if !ok {
			return nil, errors.New("remote job types: the store does not serve remote workers")
		}
		s.disp.remote = newRemoteExecutor(rs, cfg, s.retry, s.log, s.emit)
		s.disp.remote.d = s.disp
	}
	s.build()
	if s.disp.remote != nil {
		s.disp.remote.capped = s.limited.capped
	}
	s.disp.heartbeat, s.disp.completer, s.disp.promoter, s.disp.wakeFunc = s.heartbeat, s.completer, s.promoter, s.wakeAll
	return s, nil
}

// build creates the services from the configuration.
func (s *Scheduler) build() {
	cfg := s.cfg
	s.heartbeat = newHeartbeat(heartbeatParams{
		Store: s.store, Runs: s.runs, Owner: cfg.Owner, Lease: cfg.Lease, Interval: cfg.HeartbeatInterval,
		Retry: s.retry, Log: s.log,
		Events: s.emit,
	})
	// The completions' queue holds every run the slots let this replica
	// hold and one batch more, so a handler does not wait to hand its
	// outcome on while the completer writes: claims wait instead
	// (slots.unwritten). With Workers + CompleteBatch, the workers blocked
	// behind a slow write, the run queue stood still, and after
	// RunQueueWait it gave its jobs back to be claimed again (3.7 rows
	// written per job at 2 replicas of 2,000-job claims, against 3).
	s.completer = newCompleter(completerParams{
		Store: s.store, Batch: cfg.CompleteBatch, Linger: cfg.CompleteLinger,
		QueueSize: cfg.Workers + cfg.runQueue() + cfg.CompleteBatch, Work: s.work, FinishFunc: s.disp.finishRun, Writer: s.outcomes, Flushers: cfg.CompleteFlushers, Slots: s.slots, Log: s.log,
	})
	s.rescuer = newRescuer(rescuerParams{
		Store: s.store, Runs: s.runs, Interval: cfg.RescueInterval, Batch: cfg.RescueBatch, Retry: s.retry, Log: s.log,
		Events: s.emit,
	})
	s.promoter = newPromoter(promoterParams{
		Store: s.store, Interval: cfg.PromoteInterval, Batch: cfg.PromoteBatch, WakeFunc: s.wakeAll,
		Retry: s.retry, Log: s.log, Events: s.emit,
	})
	s.limited = newLimitedClaimer(limitedClaimerParams{
		Store: s.store, Slots: s.slots, DispatchFunc: s.disp.dispatch, WakeFunc: s.wakeAll, Owner: cfg.Owner, Lease: cfg.Lease,
		BatchLimit: cfg.BatchLimit, Retry: s.retry, Log: s.log,
		Events: s.emit, Lost: s.lost,
	})
	s.planner = newPeriodicPlanner(periodicPlannerParams{
		Store: s.store, RefreshInterval: cfg.Ops.RefreshInterval, MisfireThreshold: cfg.Ops.MisfireThreshold,
		Disabled: cfg.Ops.DisablePeriodic, RefreshFunc: s.limited.reload, WakeFunc: s.wakeAll,
		Events: s.emit, Retry: s.retry, Log: s.log,
	})
	if cfg.Ops.Retention > 0 {
		s.cleaner = newCleaner(cleanerParams{
			Store: s.store, Retention: cfg.Ops.Retention, Interval: cfg.Ops.CleanInterval, Batch: cfg.Ops.CleanBatch,
			MaxPerPass: cfg.Ops.CleanMaxPerPass, Events: s.emit, Retry: s.retry, Log: s.log,
		})
	}
	claims := claimerParams{
		Store: s.store, Strategy: cfg.Strategy, Owner: cfg.Owner, Lease: cfg.Lease,
		Slots: cfg.claimSlots(), Retry: s.retry,
		Events: s.emit, Lost: s.lost, BatchLimit: cfg.BatchLimit, MinClaim: min(cfg.Workers, cfg.BatchLimit),
		ScheduledFunc: s.promoter.observe,
	}
	var lanes []*claimer
	for range cfg.claimsInFlight() - 1 {
		lanes = append(lanes, newClaimer(claims))
	}
	s.scanner = newScanner(scannerParams{
		Claimer: newClaimer(claims), Lanes: lanes,
		Limited: s.limited, Slots: s.slots, DispatchFunc: s.disp.dispatch, Lost: s.lost, AdoptFunc: s.adoptLost,
		PollInterval: cfg.PollInterval, PollJitter: cfg.PollJitter, BatchLimit: cfg.BatchLimit, Workers: cfg.Workers + cfg.runQueue(),
		DrainWait: cfg.DrainWait, Log: s.log,
		Events: s.emit,
	})
}

// Config returns the effective configuration (defaults applied).
func (s *Scheduler) Config() Config { return s.cfg }

// Registry returns the handler registry.
func (s *Scheduler) Registry() *Registry { return s.reg }

// softServices are the services that stop on the soft stop (no claim, no
// rescue, no fire after it), in start order; absent ones are skipped.
func (s *Scheduler) softServices() []interface {
	Start(context.Context) error
	Stop()
} {
	var out []interface {
		Start(context.Context) error
		Stop()
	}
	// The planner first: its first refresh reads the limits the scan uses.
	out = append(out, s.planner)
	if s.cleaner != nil {
		out = append(out, s.cleaner)
	}
	return append(out, s.scanner, s.promoter, s.rescuer)
}

// Start launches the services and returns at once. Cancelling ctx is a
// hard stop: handlers' contexts are cancelled. Use Stop for a graceful
// shutdown.
func (s *Scheduler) Start(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("scheduler: already started")
	}
	s.disp.hardCtx, s.hardCancel = context.WithCancelCause(context.WithoutCancel(ctx))
	context.AfterFunc(ctx, func() { s.hardCancel(ErrShutdown) })
	// The completer and heartbeat outlive the soft stop; Stop ends them.
	if err := errors.Join(s.completer.Start(ctx), s.heartbeat.Start(ctx)); err != nil {
		return err
	}
	for _, svc := range s.softServices() {
		if err := svc.Start(ctx); err != nil {
			return err
		}
	}
	s.log.Info("scheduler started", "strategy", s.cfg.Strategy, "workers", s.cfg.Workers,
		"batch_limit", s.cfg.BatchLimit, "run_queue", s.cfg.runQueue(), "claims_in_flight", s.cfg.claimsInFlight(), "claim_slots", s.cfg.claimSlots(), "poll_interval", s.cfg.PollInterval, "poll_jitter", s.cfg.PollJitter,
		"lease", s.cfg.Lease, "types", s.reg.Types(), "remote_types", s.cfg.RemoteTypes)
	return nil
}

// Wake asks the scanner to scan now (local wake-up on submit). It never blocks.
func (s *Scheduler) Wake() { s.wakeAll() }

// wakeAll wakes the scanner and every waiting fetch of a remote worker.
func (s *Scheduler) wakeAll() {
	s.slots.wakeUp()
	if s.disp.remote != nil {
		s.disp.remote.wake.fire()
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
		s.EndFetches()
		for _, svc := range s.softServices() {
			svc.Stop()
		}
		s.limited.stop()
		s.disp.local.stop() // queued jobs never start: released at once
		done := make(chan struct{})
		go func() { s.disp.local.handlers.Wait(); close(done) }()
		t := time.NewTimer(s.cfg.ShutdownTimeout)
		select {
		case <-done:
		case <-t.C:
			s.log.Warn("shutdown timeout: cancelling in-flight handlers", "in_flight", s.InFlight())
			s.hardCancel(ErrShutdown)
			select {
			case <-done:
			case <-time.After(shutdownCancelWait(s.cfg.Lease)):
				s.stoppedErr = errors.New("scheduler: handlers ignored cancellation; their leases will expire and be rescued")
			}
		}
		t.Stop()
		if s.stoppedErr == nil {
			// Every handler returned, so nothing can submit to the completer any more.
			s.completer.Stop()
		}
		s.heartbeat.Stop()
		s.hardCancel(ErrShutdown)
		s.log.Info("scheduler stopped", "claimed", s.stats.claimed.Load(), "completed", s.stats.completed.Load())
	})
	return s.stoppedErr
}

// EndFetches ends remote workers' waiting fetches (they answer with the
// jobs they have, none) and makes new ones answer at once: the replica is
// stopping. Stop calls it too.
func (s *Scheduler) EndFetches() {
	if s.disp.remote != nil {
		s.disp.remote.stop()
	}
}

// InFlight returns the number of runs this replica holds (handlers running
// or completions not yet committed).
func (s *Scheduler) InFlight() int { return s.runs.len() }

// FreeSlots returns the number of idle workers.
func (s *Scheduler) FreeSlots() int { return s.slots.available() }

// Queued returns how many claimed runs wait in this replica's run queue for
// a worker, and how long the oldest of them has waited.
func (s *Scheduler) Queued() (n int, oldest time.Duration) { return s.disp.local.queue.len() }

// Stats is a snapshot of a replica's counters since Start, counted from
// its events (Event) before Config.Observer sees them.
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
	Released       int64 // runs handed back without spending a retry: at shutdown, or never started
	// GivenBack is runs the run queue released unstarted because they waited
	// longer than RunQueueWait for a worker (also counted in Released).
	GivenBack int64
	// Adopted is runs whose claim committed although its answer was lost,
	// found by JobHeldBy and dispatched.
	Adopted   int64
	DBRetries int64 // database operations retried
	// HeartbeatFails is heartbeats that failed after retries, or that left
	// runs with a running handler unrenewed because another transaction
	// held their row; each is logged as a WARN.
	HeartbeatFails int64
	// HeartbeatStalls is heartbeats that began later than scheduled by
	// more than Lease/5: the process was not run in time.
	HeartbeatStalls int64
	Scans           int64
	Promoted        int64 // SCHEDULED jobs this replica's promoter made WAITING
}

// Stats returns a snapshot of the counters.
func (s *Scheduler) Stats() Stats {
	return Stats{
		Claimed: s.stats.claimed.Load(), ClaimConflicts: s.stats.claimConflicts.Load(),
		ClaimErrors: s.stats.claimErrors.Load(), Completed: s.stats.completed.Load(),
		Succeeded: s.stats.succeeded.Load(), Failed: s.stats.failed.Load(), Retried: s.stats.retried.Load(),
		Stale: s.stats.stale.Load(), Rescued: s.stats.rescued.Load(), LeaseLost: s.stats.leaseLost.Load(),
		Released: s.stats.released.Load(), GivenBack: s.stats.givenBack.Load(), Adopted: s.stats.adopted.Load(), DBRetries: s.stats.dbRetries.Load(),
		HeartbeatFails: s.stats.heartbeatFails.Load(), HeartbeatStalls: s.stats.heartbeatStalls.Load(), Scans: s.stats.scans.Load(),
		Promoted: s.stats.promoted.Load(),
	}
}
