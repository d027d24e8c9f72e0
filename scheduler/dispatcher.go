package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/storeerr"
)

// dispatch hands a claimed job to a worker, through the run queue when
// every worker is busy (runQueue: the best queued job starts first). The
// job runs in a slot its claim reserved (slots.reserve) before it was sent,
// which settle frees.
func (s *Scheduler) dispatch(cj jobq.ClaimedJob) {
	s.lost.noteDispatch(cj.Fence(), 4*s.cfg.Lease)
	job := &Job{ClaimedJob: cj, Timeout: time.Duration(cj.TimeoutMs) * time.Millisecond, Owner: s.cfg.Owner, report: s.reporter,
		spawnValidate: s.spawnValidate}
	job.parents, _ = s.store.(parentReader)
	ctx, cancel := context.WithCancelCause(s.hardCtx)
	r := &run{job: job, cancel: cancel, leaseDeadline: firstLeaseDeadline(cj.LeaseBase, s.cfg.Lease)}
	guard := s.heartbeat.guardDelay(r.leaseDeadline)
	s.runs.add(r, guard, func() { s.heartbeat.guardFired(r) })
	s.heartbeat.renewSoon(guard)
	h, ok := s.reg.Lookup(job.JobType)
	s.handlers.Add(1)
	s.work.n.Add(1)
	s.queue.push(&queuedRun{r: r, h: h, ok: ok, ctx: ctx})
}

// runQueued runs a run the run queue handed to a worker after it waited
// queued (0 when a worker was free at once).
func (s *Scheduler) runQueued(q *queuedRun, queued time.Duration) {
	if q.ctx.Err() != nil { // its run ended as it was handed over
		s.dropQueued(q)
		return
	}
	s.runHandler(q.ctx, q.r, q.h, q.ok, queued)
}

// dropQueued settles a queued run that never started: the replica is
// stopping, or the run ended while it waited (lease lost, cancel requested).
func (s *Scheduler) dropQueued(q *queuedRun) {
	defer s.handlers.Done()
	s.settle(q.r, q.h, s.queuedOutcome(q.ctx, q.r.job))
}

// giveBackQueued releases a run that waited in the run queue longer than
// RunQueueWait: back to WAITING for any replica, without spending a retry.
func (s *Scheduler) giveBackQueued(q *queuedRun, waited time.Duration) {
	defer s.handlers.Done()
	s.emit(Event{Kind: EventGivenBack, Fence: q.r.job.Fence(), Duration: waited})
	s.log.Debug("run queue: giving back a job that waited too long for a worker", "component", "dispatcher",
		"job_id", q.r.job.ID, "attempt", q.r.job.Attempt, "waited_ms", waited.Milliseconds())
	q.r.givenBack = true
	s.settle(q.r, q.h, releaseUnstarted(q.r.job, "released: waited in the run queue longer than the run-queue wait; back to WAITING for any replica"))
}

// runHandler runs one handler and hands its outcome to the completer.
func (s *Scheduler) runHandler(ctx context.Context, r *run, h Handler, ok bool, queued time.Duration) {
	defer s.handlers.Done()
	job := r.job
	if !s.runs.startable(r, time.Now(), leaseGuardMargin(s.cfg.Lease)) {
		// Its lease is lost or about to run out (a claim whose answer came
		// back later than the lease less the guard's margin; a queued run no
		// renewal reached): the guard would cancel the handler at once, so it
		// never starts. The job goes back like a run released at shutdown.
		s.log.Warn("lease ran out before the handler started; releasing the job", "component", "dispatcher",
			"job_id", job.ID, "attempt", job.Attempt)
		s.settle(r, h, releaseUnstarted(job, "released: its lease ran out before the handler started"))
		return
	}
	s.emit(Event{Kind: EventStarted, Fence: job.Fence(), Job: job, Duration: queued})
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
	s.settle(r, h, s.outcome(ctx, job, err))
}

// queuedOutcome is the completion of a queued job that never started: at
// shutdown, or when its lease was lost while it waited, it is released to
// WAITING without spending a retry (fenced by its attempt: a run already
// rescued is refused as stale); a run whose cancel was requested ends as
// outcome says.
func (s *Scheduler) queuedOutcome(ctx context.Context, job *Job) jobq.Completion {
	switch cause := context.Cause(ctx); {
	case ctx.Err() == nil || errors.Is(cause, ErrShutdown):
		return releaseUnstarted(job, "released at shutdown: never started")
	case errors.Is(cause, ErrLeaseLost):
		return releaseUnstarted(job, "released: its lease was lost before the handler started")
	default:
		return s.outcome(ctx, job, cause)
	}
}

// releaseUnstarted is the completion of a run whose handler never started:
// the job goes back to WAITING without spending a retry, fenced by the
// run's attempt, and the attempt's one execution row says RELEASED.
func releaseUnstarted(job *Job, why string) jobq.Completion {
	return jobq.Completion{Fence: job.Fence(), Outcome: jobq.OutcomeReleased, Error: why, DueAt: job.RunAt}
}

// settle hands a run's completion on (to the completer, or the handler's
// transactional completion) and frees its slot.
func (s *Scheduler) settle(r *run, h Handler, c jobq.Completion) {
	job := r.job
	s.runs.finish(r)
	left := s.work.n.Add(-1)
	if c.Outcome == jobq.OutcomeSuccess {
		if txh, isTx := h.(TxHandler); isTx {
			if left == 0 { // no completion follows to end the completer's linger
				s.work.signalIdle()
			}
			s.completeTx(c, txh, job)
			s.slots.release(r.ran)
			return
		}
	}
	s.completer.submit(c)
	if r.givenBack {
		s.slots.giveBack()
		return
	}
	s.slots.release(r.ran)
}

// outcome turns a handler's return into a completion.
func (s *Scheduler) outcome(ctx context.Context, job *Job, err error) jobq.Completion {
	c := jobq.Completion{Fence: job.Fence(), JobType: job.JobType, DueAt: job.RunAt, HasChildren: job.HasChildren}
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
			c.Backoff = RetryBackoff(job.RetryTimes, s.cfg.RetryBackoffBase, s.cfg.RetryBackoffMax, s.cfg.RetryJitter)
		}
	}
	return c
}

// completeTx is transactional completion for a TxHandler: the fenced
// completion and WorkTx commit together. If WorkTx fails the attempt fails,
// unless the store marked its error transient (storeerr.IsRetryable: a
// deadlock, a lost connection in the handler's own SQL), which is retried
// like a failure of the completion itself.
func (s *Scheduler) completeTx(c jobq.Completion, h TxHandler, job *Job) {
	var applied bool
	var workErr error
	err := s.outcomes.write("complete.tx", []jobq.Fence{c.Fence}, func(ctx context.Context) error {
		var e, werr error
		applied, e = s.store.JobCompleteTx(ctx, c, func(ctx context.Context, tx jobq.Tx) error {
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
		s.completer.submit(s.outcome(context.Background(), job, fmt.Errorf("transactional completion: %w", workErr)))
	case err != nil:
		outcomeFailureLog(s.log, "transactional completion", err, "component", "completer", "job_id", job.ID, "attempt", job.Attempt)
		s.finishRun(c, false, err)
	default:
		s.finishRun(c, applied, nil)
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
func (s *Scheduler) finishRun(c jobq.Completion, applied bool, writeErr error) {
	if r := s.runs.remove(c.Fence); r != nil {
		r.guard.Stop()
		r.cancel(nil)
	}
	if writeErr != nil {
		s.emit(Event{Kind: EventCompletionFailed, Completion: c, Err: writeErr})
		return
	}
	if applied && (c.HasChildren || c.Spawn != nil) {
		// The completion settled workflow children: some may be runnable
		// now, here and for this replica's remote workers.
		s.wakeAll()
	}
	switch {
	case !applied:
		s.log.Warn("stale completion refused: the run lost its lease", "component", "completer",
			"job_id", c.ID, "attempt", c.Attempt, "outcome", c.Outcome)
	case c.Retry && c.Backoff > 0:
		// The job is SCHEDULED until NOW(6)+Backoff, written just now.
		s.promoter.promoteAt(time.Now().Add(c.Backoff))
	}
	s.emit(Event{Kind: EventCompleted, Completion: c, Applied: applied})
}
