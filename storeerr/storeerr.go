// Package storeerr is the driver-neutral vocabulary of database errors and
// their retry: a store adapter classifies each error of its driver once
// (Kind, Cause) and returns it marked (*Error), and the scheduler and the
// service retry, log and count by that mark without linking any driver.
// The MySQL adapter's classification is store.Classify; a decorator may
// re-mark an error (the testbed does, to switch retries off).
//
// It imports only the standard library and the root vocabulary.
package storeerr

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jobq/jobq"
)

// Kind is how jobq treats a database error.
type Kind int

const (
	// KindNone is a nil error.
	KindNone Kind = iota
	// KindPermanent errors are not retried: a bad statement, a constraint,
	// a missing table, a context's own end, and every error no adapter
	// marked as transient.
	KindPermanent
	// KindConflict errors are transient conflicts between transactions: a
	// deadlock or a Galera certification conflict, a lock wait timeout, a
	// statement killed. Retry at once, with backoff.
	KindConflict
	// KindUnavailable errors mean the server cannot serve writes now but may
	// soon: read-only, a cluster node not ready, shutting down, a connection
	// killed or lost, no connection to be had. A marked error of this kind
	// satisfies errors.Is(err, jobq.ErrUnavailable); the API answers 503
	// unavailable / gRPC Unavailable.
	KindUnavailable
)

// String names the kind for logs and metrics.
func (k Kind) String() string {
	switch k {
	case KindNone:
		return "none"
	case KindConflict:
		return "conflict"
	case KindUnavailable:
		return "unavailable"
	}
	return "permanent"
}

// Error is a database error as the adapter that returned it classified it.
// Its text is the driver error's; errors.As still reaches the driver error,
// and errors.Is(err, jobq.ErrUnavailable) holds for KindUnavailable.
type Error struct {
	// Kind is the error's class.
	Kind Kind
	// Cause names a transient error's cause for logs and the
	// jobq_db_retries_total metric: "deadlock", "lock_wait_timeout",
	// "read_only", "wsrep_not_ready", "shutdown", "connection_lost",
	// "replication_refused", "query_killed", "too_many_connections"; ""
	// when the adapter has no name for it.
	Cause string
	// Err is the driver's error.
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the driver's error, and jobq.ErrUnavailable for
// KindUnavailable.
func (e *Error) Unwrap() []error {
	if e.Kind == KindUnavailable {
		return []error{e.Err, jobq.ErrUnavailable}
	}
	return []error{e.Err}
}

// Mark returns err marked with kind and cause; nil for a nil err.
func Mark(err error, kind Kind, cause string) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: kind, Cause: cause, Err: err}
}

// Classify returns err's Kind from its mark: the first *Error in its chain
// decides. A context's own cancellation or deadline is permanent (the
// caller gave up); an unmarked jobq.ErrUnavailable is unavailable; every
// other unmarked error is permanent.
func Classify(err error) Kind {
	if err == nil {
		return KindNone
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return KindPermanent
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if errors.Is(err, jobq.ErrUnavailable) {
		return KindUnavailable
	}
	return KindPermanent
}

// IsRetryable reports whether err is transient (KindConflict or
// KindUnavailable). Such operations are safe to retry because every write
// jobq makes is fenced or idempotent.
func IsRetryable(err error) bool {
	k := Classify(err)
	return k == KindConflict || k == KindUnavailable
}

// Cause names a transient error's cause (see Error.Cause): the mark's
// cause, "connection_lost" for an unavailable error without one, "" for
// other errors.
func Cause(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Cause != "" {
		return e.Cause
	}
	if Classify(err) == KindUnavailable {
		return "connection_lost"
	}
	return ""
}

// RetryPolicy retries transient database errors (IsRetryable) with capped
// exponential backoff and full jitter.
type RetryPolicy struct {
	// Initial is the first backoff. Defaults to 10ms.
	Initial time.Duration
	// Max caps one backoff. Defaults to 2s.
	Max time.Duration
	// MaxAttempts bounds tries; 0 means retry until ctx is done.
	MaxAttempts int
	// OnRetryFunc, if set, is called before each backoff with the error.
	OnRetryFunc func(op string, err error)
}

// Do runs fn until it succeeds, returns a non-retryable error, the policy
// gives up or ctx is done. op names the operation in OnRetryFunc.
func (p RetryPolicy) Do(ctx context.Context, op string, fn func() error) error {
	initial := p.Initial
	if initial <= 0 {
		initial = 10 * time.Millisecond
	}
	maxB := p.Max
	if maxB <= 0 {
		maxB = 2 * time.Second
	}
	backoff := initial
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !IsRetryable(err) {
			return err
		}
		if p.MaxAttempts > 0 && attempt >= p.MaxAttempts {
			return err
		}
		if p.OnRetryFunc != nil {
			p.OnRetryFunc(op, err)
		}
		sleep := time.Duration(rand.Int64N(int64(backoff)) + 1)
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(backoff*2, maxB)
	}
}

// DoV is Do for an operation that returns a value: it returns the value and
// error of fn's last try. It is the one place a retried closure captures a
// result, so callers write func() (T, error) { return st.X(ctx, …) }.
func DoV[T any](ctx context.Context, p RetryPolicy, op string, fn func() (T, error)) (T, error) {
	var v T
	err := p.Do(ctx, op, func() error { var e error; v, e = fn(); return e })
	return v, err
}
