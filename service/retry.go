package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/store"
)

// retryDo runs fn under p. A transient database error that outlasts the
// retries comes back marked jobq.ErrUnavailable, which the transports map
// to HTTP 503 and gRPC Unavailable without knowing the driver.
func retryDo(ctx context.Context, p store.RetryPolicy, op string, fn func() error) error {
	err := p.Do(ctx, op, fn)
	if store.IsRetryable(err) && !errors.Is(err, jobq.ErrUnavailable) {
		err = fmt.Errorf("%w: %w", jobq.ErrUnavailable, err)
	}
	return err
}

// retryV is retryDo for an operation that returns a value.
func retryV[T any](ctx context.Context, p store.RetryPolicy, op string, fn func() (T, error)) (T, error) {
	var v T
	err := retryDo(ctx, p, op, func() error { var e error; v, e = fn(); return e })
	return v, err
}

// Cause names a transient database error's cause for logs ("deadlock",
// "read_only", "connection_lost", …; see store.Cause), so that transports
// can log it without importing the adapter.
func Cause(err error) string { return store.Cause(err) }
