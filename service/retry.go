package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/storeerr"
)

// apiRetryAttempts bounds the tries of one API call's database operation
// (the first included): a client waits for at most this many backoffs
// before it gets 503 unavailable and retries itself.
const apiRetryAttempts = 5

// retryDo runs fn under p. A transient database error that outlasts the
// retries comes back marked jobq.ErrUnavailable, which the transports map
// to HTTP 503 and gRPC Unavailable without knowing the driver.
func retryDo(ctx context.Context, p storeerr.RetryPolicy, op string, fn func() error) error {
	return unavailable(p.Do(ctx, op, fn))
}

// retryV2 is retryV for an operation that returns two values.
func retryV2[A, B any](ctx context.Context, p storeerr.RetryPolicy, op string, fn func() (A, B, error)) (A, B, error) {
	type pair struct {
		a A
		b B
	}
	r, err := retryV(ctx, p, op, func() (pair, error) { a, b, err := fn(); return pair{a, b}, err })
	return r.a, r.b, err
}

// unavailable marks a transient error as jobq.ErrUnavailable.
func unavailable(err error) error {
	if storeerr.IsRetryable(err) && !errors.Is(err, jobq.ErrUnavailable) {
		return fmt.Errorf("%w: %w", jobq.ErrUnavailable, err)
	}
	return err
}

// retryV is retryDo for an operation that returns a value.
func retryV[T any](ctx context.Context, p storeerr.RetryPolicy, op string, fn func() (T, error)) (T, error) {
	v, err := storeerr.DoV(ctx, p, op, fn)
	return v, unavailable(err)
}

// Cause names a transient database error's cause for logs ("deadlock",
// "read_only", "connection_lost", …; see storeerr.Cause), so that transports
// can log it without importing the adapter.
func Cause(err error) string { return storeerr.Cause(err) }
