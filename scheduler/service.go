package scheduler

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Every scheduler service (scanner, heartbeat, completer, rescuer, periodic
// planner, cleaner) has the same shape: built from its own params struct by
// newX, started with Start(ctx) error, stopped with Stop(), and observable
// by tests through its TestSignals.

// errAlreadyStarted is returned by a service's second Start.
var errAlreadyStarted = errors.New("scheduler: service already started")

// loopService runs one loop goroutine under a context that Stop cancels;
// Stop waits for the loop to return. A service embeds it.
type loopService struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs loop(ctx) on its own goroutine, ctx derived from parent.
func (b *loopService) start(parent context.Context, loop func(ctx context.Context)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done != nil {
		return errAlreadyStarted
	}
	ctx, cancel := context.WithCancel(parent)
	b.cancel, b.done = cancel, make(chan struct{})
	go func() {
		defer close(b.done)
		loop(ctx)
	}()
	return nil
}

// Stop cancels the loop's context and waits for it to return. It is safe to
// call more than once, and before Start.
func (b *loopService) Stop() {
	b.mu.Lock()
	cancel, done := b.cancel, b.done
	b.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	<-done
}

// runEvery calls pass every interval ± jitter (uniform, drawn afresh each
// time) until ctx ends: the loop of the periodic services.
func runEvery(ctx context.Context, interval, jitter time.Duration, pass func(ctx context.Context)) {
	for {
		t := time.NewTimer(jittered(interval, jitter))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pass(ctx)
	}
}

// testSignal carries one kind of event from a service to a test. The zero
// value (production) drops every event without blocking; a test calls init
// first and then waits on the events instead of polling the database.
type testSignal[T any] struct{ ch chan T }

// testSignalBuffer is how many unread events a test signal holds; later
// ones are dropped, so a test that stops reading never blocks a service.
const testSignalBuffer = 1000

func (s *testSignal[T]) init() { s.ch = make(chan T, testSignalBuffer) }

// enabled reports whether a test listens (to skip building an event).
func (s *testSignal[T]) enabled() bool { return s.ch != nil }

// signal sends v when the signal is initialised and has room.
func (s *testSignal[T]) signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}

// wait returns the next event, or fails the test after timeout.
func (s *testSignal[T]) wait(t interface {
	Helper()
	Fatalf(string, ...any)
}, timeout time.Duration) T {
	t.Helper()
	select {
	case v := <-s.ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("no test signal within %s", timeout)
		var zero T
		return zero
	}
}
