package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/storeerr"
)

// OutcomeRetryMaxBackoff caps one backoff between tries of an outcome write,
// so a write is retried within a second of the database accepting writes again.
const OutcomeRetryMaxBackoff = time.Second

// outcomeRefusalLimit bounds, in leases, how long an outcome write goes on
// being retried past its run's lease deadline while the database answers
// that it refuses writes (see outcomeWriter.write).
const outcomeRefusalLimit = 10

// outcomeWriter writes outcomes (success, failure, release, and the stale
// marking that goes with them; batched and transactional completion) with
// the retry rule of outcomeWriter.write.
type outcomeWriter struct {
	Runs  *runTable
	Lease time.Duration
	Retry dbRetrier
	Log   *slog.Logger
}

// write runs fn, an outcome write for the runs fences, and retries
// transient errors with capped backoff (DBRetry.Initial doubling up to
// OutcomeRetryMaxBackoff, full jitter) for as long as the runs hold their
// leases: until the latest of their lease deadlines minus the guard margin
// (leaseGuardMargin, Lease/5). The deadline is re-read before every try, so
// each renewal the heartbeat makes meanwhile moves it (a finished run's
// guard no longer gives it up: runTable.finish).
//
// Past that deadline the write is retried only while the server answers
// that it refuses writes (read-only, a Galera node not ready: storeerr.Cause
// "read_only" or "wsrep_not_ready"), for at most outcomeRefusalLimit
// leases: no rescue can commit on a server that refuses writes, and the
// write is fenced by attempt, so a late try either records the outcome or is
// refused as stale — never both. Any other error past the deadline ends the
// tries, and the rescuer returns the job.
//
// Each try gets a context ending completionWriteTimeout after the current
// deadline (or after now, if later), so a hung connection cannot hold the
// completer for ever.
func (w outcomeWriter) write(op string, fences []jobq.Fence, fn func(ctx context.Context) error) error {
	backoff := w.Retry.policy.Initial
	if backoff <= 0 {
		backoff = 10 * time.Millisecond
	}
	start, tries := time.Now(), 1
	for {
		deadline := w.Runs.outcomeDeadline(fences, leaseGuardMargin(w.Lease))
		ctx, cancel := context.WithDeadline(context.Background(), later(deadline, time.Now()).Add(completionWriteTimeout(w.Lease)))
		err := fn(ctx)
		cancel()
		w.Retry.report(op, err)
		if err == nil || !storeerr.IsRetryable(err) {
			return err
		}
		now := time.Now()
		if now.After(w.Runs.outcomeDeadline(fences, leaseGuardMargin(w.Lease))) &&
			!(refusesWrites(err) && now.Sub(start) < outcomeRefusalLimit*w.Lease) {
			return &pastLeaseDeadlineError{err: err, tries: tries, retried: now.Sub(start)}
		}
		tries++
		w.Retry.events.emit(Event{Kind: EventDBRetry, Op: op, Err: err})
		w.Log.Debug("retrying outcome write", "op", op, "runs", len(fences), "cause", storeerr.Cause(err), "err", err)
		time.Sleep(time.Duration(rand.Int64N(int64(backoff))) + 1)
		backoff = min(2*backoff, OutcomeRetryMaxBackoff)
	}
}

// pastLeaseDeadlineError is an outcome write given up because its runs'
// lease deadline passed while its transient errors were being retried (the
// database did not commit it in time), as opposed to one not retried at all
// (a permanent error, or retries disabled). It unwraps to the last error.
type pastLeaseDeadlineError struct {
	err     error
	tries   int
	retried time.Duration
}

func (e *pastLeaseDeadlineError) Error() string { return e.err.Error() }
func (e *pastLeaseDeadlineError) Unwrap() error { return e.err }

// outcomeFailureLog logs an outcome write that failed for good: "… failed
// past the lease deadline" (with its tries) only when it was retried until
// the runs' lease deadline passed, "… failed, not retried" otherwise.
func outcomeFailureLog(log *slog.Logger, what string, err error, attrs ...any) {
	attrs = append(attrs, "cause", storeerr.Cause(err), "err", err)
	var pd *pastLeaseDeadlineError
	if errors.As(err, &pd) {
		log.Error(what+" failed past the runs' lease deadline; the leases will expire and the jobs will be rescued",
			append(attrs, "tries", pd.tries, "retried_ms", pd.retried.Milliseconds())...)
		return
	}
	log.Error(what+" failed, not retried; the leases will expire and the jobs will be rescued", attrs...)
}

// refusesWrites reports whether err says the server is up but refuses
// writes: read-only or a Galera node that is not ready.
func refusesWrites(err error) bool {
	c := storeerr.Cause(err)
	return c == "read_only" || c == "wsrep_not_ready"
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
