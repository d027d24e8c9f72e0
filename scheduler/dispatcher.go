package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/storeerr"
)

// executor runs claimed runs: "run this claimed job" for the dispatcher,
// which routes every claimed run to the executor of its lane
// (executorFor). There are two: localExecutor, the in-process handler pool
// (the run queue, its worker goroutines and the Registry's handlers), and
// remoteExecutor, which hands runs to remote workers' fetches
// (docs/workers.md). It is unexported: the call-out executor (package
// callout) is a remote worker in the replica's process and reaches runs
// through Remote, as any worker does.
//
// execute receives one claimed run r: r.job is the claimed job, whose
// Fence (job id and attempt) is the fencing token every later write of the
// run carries; r.leaseDeadline is the local estimate of its first
// lease_until. A run this replica holds (a lane-0 claim) also has r.ctx,
// cancelled with a cause on lease loss (ErrLeaseLost), cancel request
// (ErrCancelRequested) and hard stop (ErrShutdown); it is in the run table,
// so the heartbeat renews its lease and the rescuer leaves it alone. A run
// a remote worker fetched (lane 1) has r.fetch, the fetch's answer; its
// worker's heartbeats renew its lease. execute must not wait for the work,
// and must end the run with exactly one completion through the
// dispatcher's outcome path: settle (then the completer and finishRun) for
// a run this replica holds, finishRun for a completion written on a
// worker's behalf (remoteExecutor.flushCompletions). Both paths write with
// the same fenced store calls and count the outcome the same way (one
// EventCompleted: Stats, the Observer, the metrics), and an unfinished run
// of either is rescued alike.
//
// stop starts nothing more: runs that did not start are released (WAITING,
// no retry spent) and waiting fetches answer at once.
type executor interface {
	execute(r *run)
	stop()
}

var (
	_ executor = (*localExecutor)(nil)
	_ executor = (*remoteExecutor)(nil)
)

// dispatcher hands claimed runs to their executors and takes their
// completions back: it puts a run this replica claimed into the run table
// (arming its lease guard, asking the heartbeat for an early renewal),
// routes every claimed run by lane (executorFor), and owns the outcome
// path — settle, outcome, completeTx, finishRun — that every run ends
// through, whichever executor ran it.
type dispatcher struct {
	cfg   Config
	store Store
	log   *slog.Logger
	// events hands the dispatcher's events (EventStarted, EventGivenBack,
	// EventCompleted, EventCompletionFailed) to the scheduler.
	events   emitter
	runs     *runTable
	slots    *slots
	work     *workTracker
	lost     *lostClaims
	outcomes outcomeWriter
	// reporter writes handlers' log lines and progress (nil when the store
	// cannot: the handlers' Log and Progress then do nothing).
	reporter runReporter
	// The services the dispatcher hands runs and outcomes to; set by
	// Scheduler.build once they exist.
	heartbeat *heartbeat
	completer *completer
	promoter  *promoter
	// hardCtx is the parent of runs' contexts (Scheduler.Start sets it).
	hardCtx context.Context
	// wakeFunc wakes the scanner and the waiting fetches (Scheduler.wakeAll).
	wakeFunc func()
	// spawnValidate is Job.Spawn's check (Scheduler.SetSpawnValidator).
	spawnValidate SpawnValidateFunc

	local *localExecutor
	// remote runs the remote job types on workers; nil without any.
	remote *remoteExecutor
}

// executorFor is the one place runs are routed: a lane-1 run (fetched by a
// remote worker; only the remote job types are submitted in lane 1) to the
// remote executor, every other run to the in-process handler pool.
func (d *dispatcher) executorFor(lane int8) executor {
	if lane == jobq.LaneRemote && d.remote != nil {
		return d.remote
	}
	return d.local
}

// dispatch hands a job this replica claimed (scanner, limited claim,
// adoption: lane 0) to its executor, through the run table. The job runs
// in a slot its claim reserved (slots.reserve) before it was sent, which
// settle frees.
func (d *dispatcher) dispatch(cj jobq.ClaimedJob) {
	d.lost.noteDispatch(cj.Fence(), 4*d.cfg.Lease)
	job := &Job{ClaimedJob: cj, Timeout: time.Duration(cj.TimeoutMs) * time.Millisecond, Owner: d.cfg.Owner, report: d.reporter,
		spawnValidate: d.spawnValidate}
	job.parents, _ = d.store.(parentReader)
	ctx, cancel := context.WithCancelCause(d.hardCtx)
	r := &run{job: job, ctx: ctx, cancel: cancel, leaseDeadline: firstLeaseDeadline(cj.LeaseBase, d.cfg.Lease)}
	guard := d.heartbeat.guardDelay(r.leaseDeadline)
	d.runs.add(r, guard, func() { d.heartbeat.guardFired(r) })
	d.heartbeat.renewSoon(guard)
	d.work.n.Add(1)
	d.executorFor(jobq.LaneLocal).execute(r)
}

// dispatchFetched hands a job a remote worker's fetch claimed (lane 1) to
// its executor, which adds it to the fetch's answer f. The worker holds its
// lease (owner 'worker:<id>'), so it is not in this replica's run table.
func (d *dispatcher) dispatchFetched(cj jobq.ClaimedJob, f *fetchAnswer) {
	job := &Job{ClaimedJob: cj, Timeout: time.Duration(cj.TimeoutMs) * time.Millisecond, Owner: f.owner}
	d.executorFor(jobq.LaneRemote).execute(&run{job: job, fetch: f, leaseDeadline: firstLeaseDeadline(cj.LeaseBase, d.cfg.Lease)})
}

// localExecutor is the in-process handler pool: the run queue hands each
// run to one of Workers goroutines, which runs its Registry handler under
// the run's context (and the job's timeout) and settles its outcome.
type localExecutor struct {
	d   *dispatcher
	reg *Registry
	// queue runs at most Workers handlers at once; a claimed job waits in
	// it, in claim order, while every worker is busy.
	queue    *runQueue
	handlers sync.WaitGroup // running handlers
}

func newLocalExecutor(d *dispatcher, reg *Registry) *localExecutor {
	x := &localExecutor{d: d, reg: reg, queue: newRunQueue(d.cfg.Workers, d.cfg.runQueueWait())}
	x.queue.runFunc, x.queue.dropFunc, x.queue.giveBackFunc = x.runQueued, x.dropQueued, x.giveBackQueued
	x.queue.writesBehindFunc = d.slots.writesBehind
	return x
}

// execute hands r to a worker, through the run queue when every worker is
// busy (runQueue: the best queued job starts first).
func (x *localExecutor) execute(r *run) {
	h, ok := x.reg.Lookup(r.job.JobType)
	x.handlers.Add(1)
	x.queue.push(&queuedRun{r: r, h: h, ok: ok, ctx: r.ctx})
}

// stop starts no handler any more: queued runs are released at once.
func (x *localExecutor) stop() { x.queue.stop() }

// runQueued runs a run the run queue handed to a worker after it waited
// queued (0 when a worker was free at once).
func (x *localExecutor) runQueued(q *queuedRun, queued time.Duration) {
	if q.ctx.Err() != nil { // its run ended as it was handed over
		x.dropQueued(q)
		return
	}
	x.runHandler(q.ctx, q.r, q.h, q.ok, queued)
}

// dropQueued settles a queued run that never started: the replica is
// stopping, or the run ended while it waited (lease lost, cancel requested).
func (x *localExecutor) dropQueued(q *queuedRun) {
	defer x.handlers.Done()
	x.d.settle(q.r, q.h, x.queuedOutcome(q.ctx, q.r.job))
}

// giveBackQueued releases a run that waited in the run queue longer than
// RunQueueWait: back to WAITING for any replica, without spending a retry.
func (x *localExecutor) giveBackQueued(q *queuedRun, waited time.Duration) {
	defer x.handlers.Done()
	x.d.events.emit(Event{Kind: EventGivenBack, Fence: q.r.job.Fence(), Duration: waited})
	x.d.log.Debug("run queue: giving back a job that waited too long for a worker", "component", "dispatcher",
		"job_id", q.r.job.ID, "attempt", q.r.job.Attempt, "waited_ms", waited.Milliseconds())
	q.r.givenBack = true
	x.d.settle(q.r, q.h, releaseUnstarted(q.r.job, "released: waited in the run queue longer than the run-queue wait; back to WAITING for any replica"))
}

// runHandler runs one handler and hands its outcome to the completer.
func (x *localExecutor) runHandler(ctx context.Context, r *run, h Handler, ok bool, queued time.Duration) {
	defer x.handlers.Done()
	job := r.job
	if !x.d.runs.startable(r, time.Now(), leaseGuardMargin(x.d.cfg.Lease)) {
		// Its lease is lost or about to run out (a claim whose answer came
		// back later than the lease less the guard's margin; a queued run no
		// renewal reached): the guard would cancel the handler at once, so it
		// never starts. The job goes back like a run released at shutdown.
		x.d.log.Warn("lease ran out before the handler started; releasing the job", "component", "dispatcher",
			"job_id", job.ID, "attempt", job.Attempt)
		x.d.settle(r, h, releaseUnstarted(job, "released: its lease ran out before the handler started"))
		return
	}
	x.d.events.emit(Event{Kind: EventStarted, Fence: job.Fence(), Job: job, Duration: queued})
	began := time.Now()
	var err error
	if !ok {
		err = fmt.Errorf("%w: %q", ErrNoHandler, job.JobType)
	} else {
		wctx := ctx
		if job.Timeout > 0 {
			var cancelT context.CancelFunc
			wctx, cancelT = context.WithTimeoutCause(ctx, job.Timeout, ErrJobTimeout)
			defer cancelT()
		}
		err = safeWork(wctx, h, job)
		if wctx.Err() != nil && errors.Is(context.Cause(wctx), ErrJobTimeout) {
			// A handler that ignores its deadline still failed the attempt.
			switch {
			case err == nil || errors.Is(err, ErrJobTimeout):
				err = fmt.Errorf("%w after %s", ErrJobTimeout, job.Timeout)
			default:
				err = fmt.Errorf("%w after %s: %w", ErrJobTimeout, job.Timeout, err)
			}
		}
	}
	r.ran = max(time.Since(began), time.Nanosecond)
	x.d.settle(r, h, x.d.outcome(ctx, job, err))
}

// queuedOutcome is the completion of a queued job that never started: at
// shutdown, or when its lease was lost while it waited, it is released to
// WAITING without spending a retry (fenced by its attempt: a run already
// rescued is refused as stale); a run whose cancel was requested ends as
// outcome says.
func (x *localExecutor) queuedOutcome(ctx context.Context, job *Job) jobq.Completion {
	switch cause := context.Cause(ctx); {
	case ctx.Err() == nil || errors.Is(cause, ErrShutdown):
		return releaseUnstarted(job, "released at shutdown: never started")
	case errors.Is(cause, ErrLeaseLost):
		return releaseUnstarted(job, "released: its lease was lost before the handler started")
	default:
		return x.d.outcome(ctx, job, cause)
	}
}

// releaseUnstarted is the completion of a run whose handler never started:
// the job goes back to WAITING without spending a retry, fenced by the
// run's attempt, and the attempt's one execution row says RELEASED.
func releaseUnstarted(job *Job, why string) jobq.Completion {
	return jobq.Completion{Fence: job.Fence(), JobType: job.JobType, Outcome: jobq.OutcomeReleased, Error: why, DueAt: job.RunAt,
		ConcurrencyKey: job.ConcurrencyKey}
}

// settle hands a run's completion on (to the completer, or the handler's
// transactional completion) and frees its slot.
func (d *dispatcher) settle(r *run, h Handler, c jobq.Completion) {
	job := r.job
	d.runs.finish(r)
	left := d.work.n.Add(-1)
	if c.Outcome == jobq.OutcomeSuccess {
		if txh, isTx := h.(TxHandler); isTx {
			if left == 0 { // no completion follows to end the completer's linger
				d.work.signalIdle()
			}
			d.completeTx(c, txh, job)
			d.slots.release(r.ran)
			return
		}
	}
	d.completer.submit(c)
	if r.givenBack {
		d.slots.giveBack()
		return
	}
	d.slots.release(r.ran)
}

// outcome turns a handler's return into a completion.
func (d *dispatcher) outcome(ctx context.Context, job *Job, err error) jobq.Completion {
	c := jobq.Completion{Fence: job.Fence(), JobType: job.JobType, DueAt: job.RunAt, HasChildren: job.HasChildren,
		ConcurrencyKey: job.ConcurrencyKey}
	cause := context.Cause(ctx)
	switch {
	case ctx.Err() != nil && errors.Is(cause, ErrCancelRequested):
		c.Outcome, c.Error = jobq.OutcomeCanceled, "cancel requested"
	case err == nil:
		c.Outcome, c.Output, c.Spawn = jobq.OutcomeSuccess, job.Output(), job.spawned()
	case ctx.Err() != nil && errors.Is(cause, ErrShutdown):
		c.Outcome, c.Error = jobq.OutcomeReleased, "released at shutdown: "+err.Error()
	default:
		c.Outcome, c.Error = jobq.OutcomeFailed, err.Error()
		if !errors.Is(err, ErrDiscard) && job.RetryTimes < job.MaxRetry {
			c.Retry = true
			c.Backoff = RetryBackoff(job.RetryTimes, d.cfg.RetryBackoffBase, d.cfg.RetryBackoffMax, d.cfg.RetryJitter)
		}
	}
	return c
}

// completeTx is transactional completion for a TxHandler: the fenced
// completion and WorkTx commit together. If WorkTx fails the attempt fails,
// unless the store marked its error transient (storeerr.IsRetryable: a
// deadlock, a lost connection in the handler's own SQL), which is retried
// like a failure of the completion itself.
func (d *dispatcher) completeTx(c jobq.Completion, h TxHandler, job *Job) {
	var applied bool
	var workErr error
	err := d.outcomes.write("complete.tx", []jobq.Fence{c.Fence}, func(ctx context.Context) error {
		var e, werr error
		applied, e = d.store.JobCompleteTx(ctx, c, func(ctx context.Context, tx jobq.Tx) error {
			werr = h.WorkTx(ctx, tx, job)
			return werr
		})
		workErr = nil
		if werr != nil && e != nil && !storeerr.IsRetryable(e) {
			workErr = werr
			return nil // not a database failure of the completion: fail the attempt below
		}
		return e
	})
	switch {
	case workErr != nil:
		d.completer.submit(d.outcome(context.Background(), job, fmt.Errorf("transactional completion: %w", workErr)))
	case err != nil:
		outcomeFailureLog(d.log, "transactional completion", err, "component", "completer", "job_id", job.ID, "attempt", job.Attempt)
		d.finishRun(c, false, err)
	default:
		d.finishRun(c, applied, nil)
	}
}

// safeWork calls h.Work, turning a panic into a failed attempt.
func safeWork(ctx context.Context, h Handler, job *Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v}
		}
	}()
	return h.Work(ctx, job)
}

// finishRun forgets a run once its completion committed (or was refused or
// could not be written) and counts the outcome.
func (d *dispatcher) finishRun(c jobq.Completion, applied bool, writeErr error) {
	if r := d.runs.remove(c.Fence); r != nil {
		r.guard.Stop()
		r.cancel(nil)
	}
	if writeErr != nil {
		d.events.emit(Event{Kind: EventCompletionFailed, Completion: c, Err: writeErr})
		return
	}
	if applied && (c.HasChildren || c.Spawn != nil || c.ConcurrencyKey != "") {
		// The completion settled workflow children or admitted its
		// concurrency key's next job: some may be runnable now, here and
		// for this replica's remote workers.
		d.wakeFunc()
	}
	switch {
	case !applied:
		d.log.Warn("stale completion refused: the run lost its lease", "component", "completer",
			"job_id", c.ID, "attempt", c.Attempt, "outcome", c.Outcome)
	case c.Retry && c.Backoff > 0:
		// The job is SCHEDULED until NOW(6)+Backoff, written just now.
		d.promoter.promoteAt(time.Now().Add(c.Backoff))
	}
	d.events.emit(Event{Kind: EventCompleted, Completion: c, Applied: applied})
}
