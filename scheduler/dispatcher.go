package scheduler

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/store"
)

// dispatch hands a claimed job to a worker. The scanner claimed at most the
// free slots, so a slot is always available.
func (s *Scheduler) dispatch(cj jobq.ClaimedJob) {
	s.slots.take()
	job := &Job{
		ID: cj.ID, JobKey: cj.JobKey, JobType: cj.JobType, Params: cj.Params, Priority: cj.Priority,
		RetryTimes: cj.RetryTimes, MaxRetry: cj.MaxRetry, Attempt: cj.Attempt, RunAt: cj.RunAt,
		StartedAt: cj.StartedAt, CreateTime: cj.CreateTime,
		Timeout: time.Duration(cj.TimeoutMs) * time.Millisecond, Owner: s.cfg.Owner,
	}
	ctx, cancel := context.WithCancelCause(s.hardCtx)
	r := &run{job: job, cancel: cancel, leaseDeadline: firstLeaseDeadline(s.cfg.Lease)}
	s.runs.add(r, s.heartbeat.guardDelay(r.leaseDeadline), func() { s.heartbeat.guardFired(r) })
	h, ok := s.reg.Lookup(job.JobType)
	s.handlers.Add(1)
	s.work.n.Add(1)
	go s.runHandler(ctx, r, h, ok)
}

// runHandler runs one handler and hands its outcome to the completer.
func (s *Scheduler) runHandler(ctx context.Context, r *run, h Handler, ok bool) {
	defer s.handlers.Done()
	job := r.job
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
	c := s.outcome(ctx, job, err)
	s.runs.finish(r)
	left := s.work.n.Add(-1)
	if c.Outcome == jobq.OutcomeSuccess {
		if txh, isTx := h.(TxHandler); isTx {
			if left == 0 { // no completion follows to end the completer's linger
				s.work.signalIdle()
			}
			s.completeTx(c, txh, job)
			s.slots.release()
			return
		}
	}
	s.completer.submit(c)
	s.slots.release()
}

// outcome turns a handler's return into a completion.
func (s *Scheduler) outcome(ctx context.Context, job *Job, err error) jobq.Completion {
	c := jobq.Completion{Fence: job.Fence(), Unfenced: s.cfg.Sabotage.NoFencing}
	cause := context.Cause(ctx)
	switch {
	case ctx.Err() != nil && errors.Is(cause, ErrCancelRequested):
		c.Outcome, c.Error = jobq.OutcomeCanceled, "cancel requested"
	case err == nil:
		c.Outcome = jobq.OutcomeSuccess
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
// completion and WorkTx commit together. If WorkTx fails the attempt fails.
func (s *Scheduler) completeTx(c jobq.Completion, h TxHandler, job *Job) {
	var applied bool
	var workErr error
	err := s.outcomes.write("complete.tx", []jobq.Fence{c.Fence}, func(ctx context.Context) error {
		var e error
		workErr = nil
		applied, e = s.store.JobCompleteTx(ctx, c, func(ctx context.Context, tx *sql.Tx) error {
			if werr := h.WorkTx(ctx, tx, job); werr != nil {
				if store.IsRetryable(werr) {
					return werr
				}
				workErr = werr
				return werr
			}
			return nil
		})
		if workErr != nil {
			return nil // not a database failure of the completion: fail the attempt below
		}
		return e
	})
	switch {
	case workErr != nil:
		s.completer.submit(s.outcome(context.Background(), job, fmt.Errorf("transactional completion: %w", workErr)))
	case err != nil:
		s.log.Error("transactional completion failed past the run's lease deadline; the lease will expire and the job will be rescued",
			"component", "completer", "job_id", job.ID, "attempt", job.Attempt, "cause", store.Cause(err), "err", err)
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
		if s.cfg.Hooks.CompletionFailedFunc != nil {
			s.cfg.Hooks.CompletionFailedFunc(c, writeErr)
		}
		return
	}
	s.stats.completed.Add(1)
	switch {
	case !applied:
		s.stats.stale.Add(1)
		s.log.Warn("stale completion refused: the run lost its lease", "component", "completer",
			"job_id", c.ID, "attempt", c.Attempt, "outcome", c.Outcome)
	case c.Outcome == jobq.OutcomeSuccess:
		s.stats.succeeded.Add(1)
	case c.Outcome == jobq.OutcomeReleased:
		s.stats.released.Add(1)
	default:
		s.stats.failed.Add(1)
		if c.Retry {
			s.stats.retried.Add(1)
			if c.Backoff > 0 {
				// The job is SCHEDULED until NOW(6)+Backoff, written just now.
				s.promoter.promoteAt(time.Now().Add(c.Backoff))
			}
		}
	}
	if s.cfg.Hooks.CompletedFunc != nil {
		s.cfg.Hooks.CompletedFunc(c, applied)
	}
}
