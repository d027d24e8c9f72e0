package scheduler

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// runQueueHorizon is how far ahead the run queue claims: at most as many
// jobs as this replica is expected to start within runQueueHorizon — the
// jobs it finished in the last runQueueHorizon, and no more than its workers
// start in that time at the mean duration of those handlers — so a replica
// whose handlers return quickly claims in batches sized by the backlog,
// while one running long handlers claims no more than its free workers. A
// claim can still take long jobs right after short ones (their duration is
// not known before they run): the run queue gives back what waited longer
// than RunQueueWait (runQueue.sweepOnce).
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
	// unwritten counts the completions handed to the completer and not
	// yet written. Beyond unwrittenAllowed (Config.CompleteBatch: one full
	// batch being written while the next claim runs) each one holds a run-
	// queue place, so a replica whose completions fall behind claims no
	// faster than they are written: its claims follow the completion rate.
	// (Without it a replica kept claiming while up to Workers +
	// CompleteBatch completions waited and CompleteFlushers batches were
	// being written: at 8 replicas of 2,000-job claims most of a 60,000-job
	// backlog was RUNNING and unwritten at once, and the drain stalled.)
	unwritten        atomic.Int64
	unwrittenAllowed int
}

func newSlots(workers, runQueue, unwrittenAllowed int) *slots {
	s := &slots{free: make(chan struct{}, workers+runQueue), workers: workers, queueMax: runQueue, unwrittenAllowed: unwrittenAllowed,
		freed: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
	for range workers + runQueue {
		s.free <- struct{}{}
	}
	return s
}

// available returns how many jobs a claim may take now: the free workers,
// plus as many run-queue places as this replica is expected to start within
// runQueueHorizon (recentCount.places; at most RunQueue), less the slots
// reserved or held.
func (s *slots) available() int {
	free := len(s.free)
	if s.queueMax == 0 {
		return free
	}
	held := cap(s.free) - free
	places := min(s.queueMax, s.recent.places(time.Now(), s.workers))
	places -= max(0, int(s.unwritten.Load())-s.unwrittenAllowed)
	allowed := s.workers + max(0, places)
	return max(0, min(free, allowed-held))
}

// writesBehind reports whether more completions wait unwritten than one
// batch (unwrittenAllowed): the completer is behind.
func (s *slots) writesBehind() bool { return int(s.unwritten.Load()) > s.unwrittenAllowed }

// written counts n completions written (or given up on) by the completer:
// the places they held are free again (slots.unwritten). Like release it
// wakes a draining scan. A nil s does nothing.
func (s *slots) written(n int) {
	if s == nil || n == 0 {
		return
	}
	if s.unwritten.Add(-int64(n)) < int64(s.unwrittenAllowed) && s.queueMax > 0 {
		select {
		case s.freed <- struct{}{}:
		default:
		}
		if s.moreWaiting.Load() {
			s.wakeUp()
		}
	}
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

// giveBack frees the slot of a run the run queue gave back unstarted. Like
// unreserve it is not a finished job for the run queue, and it does not wake
// the scanner: the job is for any replica, not for this one at once.
func (s *slots) giveBack() { s.unreserve(1) }

// release frees a slot whose run ended (ran is how long its handler ran; 0
// when it never started) and, while more jobs wait, wakes the scanner (an
// internal wake: drain works even when local wake-up on submit is off).
func (s *slots) release(ran time.Duration) {
	if s.queueMax > 0 {
		s.recent.add(time.Now(), ran)
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

// recentCount counts finished runs over a sliding pair of runQueueHorizon
// buckets, and the handler time of those that ran.
type recentCount struct {
	mu        sync.Mutex
	start     time.Time // start of the current bucket
	cur, prev int
	// curRan and prevRan count the runs whose handler ran, curSum and
	// prevSum add up their handler time.
	curRan, prevRan int
	curSum, prevSum time.Duration
}

func (r *recentCount) rotate(now time.Time) {
	switch d := now.Sub(r.start); {
	case d < runQueueHorizon:
	case d < 2*runQueueHorizon:
		r.prev, r.cur, r.start = r.cur, 0, r.start.Add(runQueueHorizon)
		r.prevRan, r.curRan, r.prevSum, r.curSum = r.curRan, 0, r.curSum, 0
	default:
		r.prev, r.cur, r.start = 0, 0, now
		r.prevRan, r.curRan, r.prevSum, r.curSum = 0, 0, 0, 0
	}
}

// add counts a finished run whose handler ran for ran (0: never started).
func (r *recentCount) add(now time.Time, ran time.Duration) {
	r.mu.Lock()
	r.rotate(now)
	r.cur++
	if ran > 0 {
		r.curRan++
		r.curSum += ran
	}
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

// places is how many queued runs workers are expected to start within
// runQueueHorizon: workers × runQueueHorizon / the mean handler time of the
// runs counted (the k-th queued run starts after about k × mean / workers
// while every worker is busy), or, when none of them ran (all released
// unstarted), their count. Right after 4 workers finished four 3 s
// handlers it is 0, not 4; right after short handlers it is what the
// workers can start, not what they happened to finish. (It used to be at
// most the count: a replica finishing a claim of n jobs per claim round
// trip longer than runQueueHorizon was offered fewer places than n, so its
// claims shrank to a few more than its workers under a backlog — the more
// replicas shared the backlog, the smaller each one's claims.) Nothing
// counted: 0.
func (r *recentCount) places(now time.Time, workers int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rotate(now)
	n := max(r.prev, r.cur)
	if ran, sum := r.prevRan+r.curRan, r.prevSum+r.curSum; ran > 0 {
		mean := max(sum/time.Duration(ran), 1)
		n = int(min(int64(math.MaxInt32), int64(workers)*int64(runQueueHorizon)/int64(mean)))
	}
	return n
}
