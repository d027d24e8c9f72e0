package jobq

import (
	"context"
	"errors"
	"fmt"
)

var (
	// ErrNotFound is returned when no job has the requested id or key.
	ErrNotFound = errors.New("jobq: not found")
	// ErrKeyConflict is returned by Submit when job_key already names a job
	// whose request differs from this one (HTTP 409).
	ErrKeyConflict = errors.New("jobq: job_key already used with a different request")
	// ErrInvalidState is returned when a cancel or retry does not apply to the
	// job's current status (for example retrying a SUCCESS job).
	ErrInvalidState = errors.New("jobq: invalid state for this operation")
	// ErrStaleAttempt is returned when a completion's attempt no longer owns
	// the job (it was rescued, and perhaps re-claimed): nothing was written.
	ErrStaleAttempt = errors.New("jobq: stale attempt")
	// ErrUnavailable is returned when the database cannot serve the request
	// now but may soon: it refuses writes (read-only, a demoted primary), a
	// cluster node is not ready, or the connection was lost. Transports map
	// it to HTTP 503 and gRPC Unavailable; the caller should retry.
	ErrUnavailable = errors.New("jobq: database unavailable")
	// ErrSkipLockedUnsupported is returned when the skiplocked claim
	// strategy is requested on a server without SELECT … FOR UPDATE SKIP
	// LOCKED (MySQL < 8.0.1, MariaDB < 10.6).
	ErrSkipLockedUnsupported = errors.New("jobq: server does not support SKIP LOCKED")
	// ErrLogFull is returned when appending log lines would take an
	// attempt's log past MaxLogBytes: nothing was appended.
	ErrLogFull = errors.New("jobq: the attempt's log would pass its limit")
	// ErrRunGone is returned by a log or progress write when the run no
	// longer holds its job (fenced by attempt): nothing was written.
	ErrRunGone = errors.New("jobq: the run no longer holds its job")
)

// UnblockTooWideError is returned by a batch completion
// (store.Store.JobCompleteMany) whose context carries an unblock limit
// (WithUnblockLimit) when two or more of the batch's successes would
// unblock more workflow children between them than that limit allows in
// one transaction: nothing was written. Widths holds each of the batch's
// parents' number of children (parents without children are absent), for
// the caller to split the batch by.
type UnblockTooWideError struct {
	Widths map[uint64]int
	Limit  int
}

func (e *UnblockTooWideError) Error() string {
	total := 0
	for _, w := range e.Widths {
		total += w
	}
	return fmt.Sprintf("jobq: the batch would unblock %d children in one transaction (limit %d)", total, e.Limit)
}

type unblockLimitKey struct{}

// WithUnblockLimit returns ctx carrying the most workflow children a batch
// completion written with it may unblock in one transaction (n ≤ 0: no
// limit); a wider batch of several parents fails with an
// *UnblockTooWideError and writes nothing. It travels in the context so
// that a store decorator which calls the store's JobCompleteMany passes it
// on, and one that writes completions its own way ignores it.
func WithUnblockLimit(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, unblockLimitKey{}, n)
}

// UnblockLimit returns the limit WithUnblockLimit set on ctx (0: none).
func UnblockLimit(ctx context.Context) int {
	n, _ := ctx.Value(unblockLimitKey{}).(int)
	return n
}
