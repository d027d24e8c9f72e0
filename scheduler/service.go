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
// through the events it emits (its params' Events, see event.go).

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
