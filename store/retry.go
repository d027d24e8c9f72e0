package store

import (
	"context"
	"math/rand/v2"
	"time"
)

// RetryPolicy retries transient database errors (IsRetryable) with capped
// exponential backoff and full jitter.
type RetryPolicy struct {
	// Initial is the first backoff. Defaults to 10ms.
	Initial time.Duration
	// Max caps one backoff. Defaults to 2s.
	Max time.Duration
	// MaxAttempts bounds tries; 0 means retry until ctx is done.
	MaxAttempts int
	// Disabled turns retries off (sabotage switch for the chaos testbed).
	Disabled bool
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
		if err == nil || p.Disabled || !IsRetryable(err) {
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
