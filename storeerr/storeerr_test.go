package storeerr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/storeerr"
)

// Classification reads the mark an adapter put on an error: the first
// mark in the chain decides, an unmarked error is permanent (but for
// jobq.ErrUnavailable itself), a context's end is permanent.
func TestClassifyByMark(t *testing.T) {
	driverErr := errors.New("driver says deadlock")
	conflict := storeerr.Mark(driverErr, storeerr.KindConflict, "deadlock")
	down := storeerr.Mark(errors.New("connection reset"), storeerr.KindUnavailable, "")
	for _, c := range []struct {
		name  string
		err   error
		kind  storeerr.Kind
		cause string
	}{
		{"nil", nil, storeerr.KindNone, ""},
		{"unmarked", driverErr, storeerr.KindPermanent, ""},
		{"conflict", fmt.Errorf("claim: %w", conflict), storeerr.KindConflict, "deadlock"},
		{"unavailable without a cause", down, storeerr.KindUnavailable, "connection_lost"},
		{"ErrUnavailable unmarked", fmt.Errorf("x: %w", jobq.ErrUnavailable), storeerr.KindUnavailable, "connection_lost"},
		{"re-marked permanent (the outer mark decides)", storeerr.Mark(conflict, storeerr.KindPermanent, "deadlock"), storeerr.KindPermanent, "deadlock"},
		{"context canceled", storeerr.Mark(context.Canceled, storeerr.KindConflict, ""), storeerr.KindPermanent, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := storeerr.Classify(c.err); got != c.kind {
				t.Fatalf("Classify = %s, want %s", got, c.kind)
			}
			if got := storeerr.Cause(c.err); got != c.cause {
				t.Fatalf("Cause = %q, want %q", got, c.cause)
			}
		})
	}
	if !errors.Is(conflict, driverErr) || conflict.Error() != driverErr.Error() {
		t.Fatalf("a mark hides the driver's error: %v", conflict)
	}
	if errors.Is(conflict, jobq.ErrUnavailable) || !errors.Is(down, jobq.ErrUnavailable) {
		t.Fatal("only an unavailable mark is jobq.ErrUnavailable")
	}
	if storeerr.Mark(nil, storeerr.KindConflict, "") != nil {
		t.Fatal("Mark(nil) is not nil")
	}
}

// RetryPolicy retries marked transient errors up to MaxAttempts and
// returns a permanent one at once, with the value of the last try.
func TestRetryPolicy(t *testing.T) {
	p := storeerr.RetryPolicy{Initial: time.Microsecond, Max: time.Microsecond, MaxAttempts: 3}
	var retried []string
	p.OnRetryFunc = func(op string, err error) { retried = append(retried, op) }
	tries := 0
	conflict := storeerr.Mark(errors.New("deadlock"), storeerr.KindConflict, "deadlock")
	v, err := storeerr.DoV(context.Background(), p, "op", func() (int, error) { tries++; return tries, conflict })
	if !errors.Is(err, conflict) || v != 3 || tries != 3 || len(retried) != 2 {
		t.Fatalf("transient: v=%d tries=%d retried=%v err=%v; want 3 tries, 2 retries, the error", v, tries, retried, err)
	}
	tries = 0
	perm := errors.New("no such table")
	if err := p.Do(context.Background(), "op", func() error { tries++; return perm }); err != perm || tries != 1 {
		t.Fatalf("permanent: tries=%d err=%v; want 1 try", tries, err)
	}
	tries = 0
	if err := p.Do(context.Background(), "op", func() error {
		tries++
		if tries < 2 {
			return conflict
		}
		return nil
	}); err != nil || tries != 2 {
		t.Fatalf("transient then success: tries=%d err=%v; want 2 tries, nil", tries, err)
	}
}
