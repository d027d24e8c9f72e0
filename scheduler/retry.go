package scheduler

import (
	"context"
	"log/slog"

	"github.com/jobq/jobq/storeerr"
)

// Attempt budgets of the scheduler's database operations (the first try
// included). Every transient error (storeerr.IsRetryable) is retried with the
// DBRetry backoff until the budget or the operation's context runs out.
const (
	// retryUntilDone retries until the context ends: lease renewals (until
	// the latest run's guard would fire), rescue, retention and periodic
	// fires, whose work is not redone by a later tick if given up. Outcome
	// writes have their own rule (outcomeWriter.write).
	retryUntilDone = 0
	// claimMaxAttempts bounds one claim: after that the scan gives up, logs
	// the error and counts it (Stats.ClaimErrors), and the next tick tries
	// again — so an outage shows in logs and metrics instead of hiding in an
	// endless retry loop.
	claimMaxAttempts = 5
	// refreshMaxAttempts bounds one read of the limits and schedules: the
	// next refresh retries and the previous view stays meanwhile.
	refreshMaxAttempts = 3
)

// dbRetrier runs database operations with the DBRetry policy, reporting
// every retry (EventDBRetry) and every error (EventDBError).
type dbRetrier struct {
	policy storeerr.RetryPolicy
	log    *slog.Logger
	events emitter // nil: a service tested alone
}

// withRetry runs fn under r with at most attempts tries (retryUntilDone:
// until ctx ends).
func withRetry(ctx context.Context, r dbRetrier, op string, attempts int, fn func() error) error {
	return r.policyFor(attempts).Do(ctx, op, func() error {
		err := fn()
		r.report(op, err)
		return err
	})
}

// policyFor is the DBRetry policy with at most attempts tries, counting
// and logging each retry.
func (r dbRetrier) policyFor(attempts int) storeerr.RetryPolicy {
	p := r.policy
	if attempts > 0 {
		p.MaxAttempts = attempts
	}
	p.OnRetryFunc = func(op string, err error) {
		r.events.emit(Event{Kind: EventDBRetry, Op: op, Err: err})
		r.log.Debug("retrying database operation", "op", op, "cause", storeerr.Cause(err), "err", err)
	}
	return p
}

// report emits a database error (EventDBError).
func (r dbRetrier) report(op string, err error) {
	if err != nil {
		r.events.emit(Event{Kind: EventDBError, Op: op, Err: err})
	}
}

// withRetryV is withRetry for an operation that returns a value.
func withRetryV[T any](ctx context.Context, r dbRetrier, op string, attempts int, fn func() (T, error)) (T, error) {
	return storeerr.DoV(ctx, r.policyFor(attempts), op, func() (T, error) {
		v, err := fn()
		r.report(op, err)
		return v, err
	})
}

// logDBFailure logs a database operation that failed after its retries: at
// WARN, with the cause named, when the error is transient (a deadlock or
// Galera certification conflict, a read-only or not-ready server, a lost
// connection: the next pass retries it), at ERROR otherwise.
func logDBFailure(log *slog.Logger, msg string, err error, args ...any) {
	if storeerr.IsRetryable(err) {
		log.Warn(msg, append(args, "cause", storeerr.Cause(err), "err", err)...)
		return
	}
	log.Error(msg, append(args, "err", err)...)
}
