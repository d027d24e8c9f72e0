package scheduler

import (
	"sync"
	"sync/atomic"
	"time"
)

// runQueueHorizon is how far ahead the run queue claims: at most as many
// jobs as this replica finished in the last runQueueHorizon, so a replica
// whose handlers return quickly claims in batches sized by the backlog,
// while one running long handlers claims no more than its free workers
// (no job waits locally behind a long handler while another replica idles).
const runQueueHorizon = 100 * time.Millisecond

// slots is the worker pool's bookkeeping shared by the claims (which
// reserve the slots of the jobs they may take before they claim, and wait
// for them while draining) and the dispatcher (which runs a claimed job in
// a reserved slot and frees it when the handler returns). Every method is
// safe for concurrent use: a draining replica keeps up to ClaimsInFlight
// claims running at once, each on its own reservation.
type slots struct {
	free chan struct{} // a token per unreserved slot: Workers + RunQueue in all
	// workers and queueMax are Config.Workers and the effective RunQueue.
	workers, queueMax int
	recent            recentCount // slots released within runQueueHorizon
	// reserveMu makes a reservation's look at available() and its taking
	// of tokens one step, so concurrent claims never reserve more than the
	// run queue allows between them.
	reserveMu sync.Mutex
	// freed gets a token (if it has none) each time a slot is freed: a
	// draining scan waits on it for a fuller batch (scanner.reserveDrain).
	freed chan struct{}
	// wake asks the scanner to scan now: local wake-up on submit, a periodic
	// fire, or a slot freed while more jobs wait.
	wake chan struct{}
	// moreWaiting is set when the last claim filled its batch (more may be
	// due) or found no free slot: a freed slot then wakes the scanner.
	moreWaiting atomic.Bool
}

func newSlots(workers, runQueue int) *slots {
	s := &slots{free: make(chan struct{}, workers+runQueue), workers: workers, queueMax: runQueue,
		freed: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
	for range workers + runQueue {
		s.free <- struct{}{}
	}
	return s
}

// available returns how many jobs a claim may take now: the free workers,
// plus as many run-queue places as jobs finished within runQueueHorizon
// (at most RunQueue), less the slots reserved or held.
func (s *slots) available() int {
	free := len(s.free)
	if s.queueMax == 0 {
		return free
	}
	held := cap(s.free) - free
	allowed := s.workers + min(s.queueMax, s.recent.count(time.Now()))
	return max(0, min(free, allowed-held))
}

// reserve takes up to n of the available slots for a claim about to run
// and returns how many it took (0..n, never blocking). The claim dispatches
// at most that many jobs, each into one of the reserved slots, and hands
// the rest back with unreserve.
func (s *slots) reserve(n int) int { return s.reserveAtLeast(0, n) }

// reserveAtLeast is reserve(limit) when at least want slots are available,
// and reserves nothing (0) otherwise; the look and the taking are one step.
func (s *slots) reserveAtLeast(want, limit int) int {
	s.reserveMu.Lock()
	defer s.reserveMu.Unlock()
	n := s.available()
	if n < want {
		return 0
	}
	n = min(n, limit)
	for i := range n {
		select {
		case <-s.free:
		default: // not reached: available() counts only free tokens, and only reservations take them
			return i
		}
	}
	return n
}

// unreserve hands back n reserved slots that no job took (a claim that came
// back short or failed). Unlike release it does not count as a finished job
// for the run queue.
func (s *slots) unreserve(n int) {
	for range n {
		s.free <- struct{}{}
	}
	if n > 0 {
		select {
		case s.freed <- struct{}{}:
		default:
		}
	}
}

// release frees a slot and, while more jobs wait, wakes the scanner (an
// internal wake: drain works even when local wake-up on submit is off).
func (s *slots) release() {
	if s.queueMax > 0 {
		s.recent.add(time.Now())
	}
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

// recentCount counts events over a sliding pair of runQueueHorizon buckets.
type recentCount struct {
	mu        sync.Mutex
	start     time.Time // start of the current bucket
	cur, prev int
}

func (r *recentCount) rotate(now time.Time) {
	switch d := now.Sub(r.start); {
	case d < runQueueHorizon:
	case d < 2*runQueueHorizon:
		r.prev, r.cur, r.start = r.cur, 0, r.start.Add(runQueueHorizon)
	default:
		r.prev, r.cur, r.start = 0, 0, now
	}
}

func (r *recentCount) add(now time.Time) {
	r.mu.Lock()
	r.rotate(now)
	r.cur++
	r.mu.Unlock()
}

// count returns the events of the last full bucket or of the current one,
// whichever is larger.
func (r *recentCount) count(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rotate(now)
	return max(r.prev, r.cur)
}
