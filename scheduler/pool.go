package scheduler

import "sync/atomic"

// slots is the worker pool's bookkeeping shared by the scanner (which
// claims at most the free slots and waits for them while draining) and the
// dispatcher (which takes a slot per run and frees it when the handler
// returns).
type slots struct {
	free chan struct{} // a token per free worker slot
	// freed gets a token (if it has none) each time a slot is freed: a
	// draining scan waits on it for a fuller batch (scanner.awaitSlots).
	freed chan struct{}
	// wake asks the scanner to scan now: local wake-up on submit, a periodic
	// fire, or a slot freed while more jobs wait.
	wake chan struct{}
	// moreWaiting is set when the last claim filled its batch (more may be
	// due) or found no free slot: a freed slot then wakes the scanner.
	moreWaiting atomic.Bool
}

func newSlots(workers int) *slots {
	s := &slots{free: make(chan struct{}, workers), freed: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
	for range workers {
		s.free <- struct{}{}
	}
	return s
}

// available returns the number of free slots.
func (s *slots) available() int { return len(s.free) }

// take takes a free slot; the scanner claimed at most the free slots, so
// one is always there.
func (s *slots) take() { <-s.free }

// release frees a slot and, while more jobs wait, wakes the scanner (an
// internal wake: drain works even when local wake-up on submit is off).
func (s *slots) release() {
	s.free <- struct{}{}
	select {
	case s.freed <- struct{}{}:
	default:
	}
	if s.moreWaiting.Load() {
		s.wakeUp()
	}
}

// wakeUp asks the scanner to scan now; it never blocks.
func (s *slots) wakeUp() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// workTracker counts handlers that have not handed their outcome on yet:
// the completer lingers for them (completer.linger). idle gets a token when
// a handler that completes on its own (TxHandler) leaves the count at 0, so
// a lingering completer need not wait it out.
type workTracker struct {
	n    atomic.Int64
	idle chan struct{}
}

func newWorkTracker() *workTracker { return &workTracker{idle: make(chan struct{}, 1)} }

func (w *workTracker) running() int64 { return w.n.Load() }

// drainIdle drops a stale idle token.
func (w *workTracker) drainIdle() {
	select {
	case <-w.idle:
	default:
	}
}

// signalIdle tells a lingering completer that no handler is running.
func (w *workTracker) signalIdle() {
	select {
	case w.idle <- struct{}{}:
	default:
	}
}
