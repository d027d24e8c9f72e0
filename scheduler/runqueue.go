package scheduler

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// queuedRun is a claimed run waiting in the run queue for a worker.
type queuedRun struct {
	r        *run
	h        Handler
	ok       bool // h was found in the registry
	ctx      context.Context
	enqueued time.Time
	index    int         // in the heap; -1 once out of it
	stopCtx  func() bool // stops the context.AfterFunc that drops the run when its context ends
	seq      uint64      // push order: breaks ties of equal keys (a job claimed twice)
}

// runHeap orders queued runs as the claim does: priority high to low, then
// due time (run_at), then id — so the handler that starts next is always
// the best queued run, whatever order the claims answered in.
type runHeap []*queuedRun

func (h runHeap) Len() int { return len(h) }

func (h runHeap) Less(i, j int) bool { return runBefore(h[i], h[j]) }

func runBefore(a, b *queuedRun) bool {
	x, y := a.r.job, b.r.job
	switch {
	case x.Priority != y.Priority:
		return x.Priority > y.Priority
	case !x.RunAt.Equal(y.RunAt):
		return x.RunAt.Before(y.RunAt)
	case x.ID != y.ID:
		return x.ID < y.ID
	}
	return a.seq < b.seq
}

func (h runHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *runHeap) Push(x any) {
	q := x.(*queuedRun)
	q.index = len(*h)
	*h = append(*h, q)
}

func (h *runHeap) Pop() any {
	old := *h
	n := len(old)
	q := old[n-1]
	old[n-1] = nil
	q.index = -1
	*h = old[:n-1]
	return q
}

// runQueue hands claimed runs to at most Workers handlers at once, in
// strict claim order (runHeap) at the handler's start: a run starts at once
// when a worker is free, else it waits in the heap and the next worker to
// free takes the best queued run. (Each queued run used to wait for a worker
// in its own goroutine, and the Go scheduler woke them in no particular
// order: jobs of one claim started out of priority order.)
//
// A run that waits longer than wait while no worker took a queued run for
// as long — the queue is stuck behind handlers that do not return soon — is
// given back (giveBackFunc: released to WAITING without spending a retry),
// with every queued run ranked after it, so a replica never holds claimed
// jobs it cannot start soon while a peer might run them; the runs ranked
// before it stay and start first. A queue that moves (workers keep taking
// runs, as under a backlog of short jobs on a loaded machine) gives nothing
// back: its runs start soon.
type runQueue struct {
	mu      sync.Mutex
	heap    runHeap
	idle    int       // free workers
	stopped bool      // Stop began: nothing starts any more
	taken   time.Time // when a worker last took a queued run
	seq     uint64
	// sweep is armed (sweepArmed) while the heap is not empty.
	sweep      *time.Timer
	sweepArmed bool

	wait time.Duration // Config.RunQueueWait
	// writesBehindFunc reports whether this replica's completions are
	// behind (slots.writesBehind; nil: never): a queue that stands while
	// they are waits on the database, not on long handlers, and gives
	// nothing back — a give-back would add a write for every job, and a
	// peer claims from the same database. (At 8 replicas of 2,000-job
	// claims a slow write round gave back a third of the jobs, 3.5 rows
	// written per job, and the drain fell to 79 jobs/s.)
	writesBehindFunc func() bool
	runFunc          func(q *queuedRun, queued time.Duration)
	dropFunc         func(q *queuedRun)                       // the run's context ended while it waited
	giveBackFunc     func(q *queuedRun, waited time.Duration) // it waited longer than wait
}

func newRunQueue(workers int, wait time.Duration) *runQueue {
	return &runQueue{idle: workers, wait: wait}
}

// push queues q (or starts it at once on a free worker).
func (rq *runQueue) push(q *queuedRun) {
	rq.mu.Lock()
	if rq.stopped {
		rq.mu.Unlock()
		rq.dropFunc(q)
		return
	}
	rq.seq++
	q.seq, q.enqueued = rq.seq, time.Now()
	if rq.idle > 0 && len(rq.heap) == 0 {
		rq.idle--
		rq.mu.Unlock()
		go rq.work(q)
		return
	}
	heap.Push(&rq.heap, q)
	q.stopCtx = context.AfterFunc(q.ctx, func() { rq.cancelled(q) })
	rq.armSweep()
	var next *queuedRun
	if rq.idle > 0 { // not reached while the heap was empty above; kept for safety
		rq.idle--
		next = heap.Pop(&rq.heap).(*queuedRun)
	}
	rq.mu.Unlock()
	if next != nil {
		go rq.work(next)
	}
}

// work runs q and then, on the same goroutine, the best queued run while
// there is one; the worker is freed when the heap is empty.
func (rq *runQueue) work(q *queuedRun) {
	for q != nil {
		if q.stopCtx != nil {
			q.stopCtx()
		}
		rq.runFunc(q, time.Since(q.enqueued))
		q = rq.next()
	}
}

// next pops the best queued run for a worker that just freed, or frees the
// worker (nil) when none waits or the queue stopped.
func (rq *runQueue) next() *queuedRun {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	if rq.stopped || len(rq.heap) == 0 {
		rq.idle++
		return nil
	}
	rq.taken = time.Now()
	return heap.Pop(&rq.heap).(*queuedRun)
}

// cancelled drops q when its context ended while it waited (lease lost,
// cancel requested, hard stop).
func (rq *runQueue) cancelled(q *queuedRun) {
	rq.mu.Lock()
	if q.index < 0 {
		rq.mu.Unlock()
		return
	}
	heap.Remove(&rq.heap, q.index)
	rq.mu.Unlock()
	rq.dropFunc(q)
}

// stop starts nothing more and drops every queued run (released at
// shutdown: they never started).
func (rq *runQueue) stop() {
	rq.mu.Lock()
	rq.stopped = true
	if rq.sweep != nil {
		rq.sweep.Stop()
	}
	out := rq.takeAll(func(*queuedRun) bool { return true })
	rq.mu.Unlock()
	for _, q := range out {
		rq.dropFunc(q)
	}
}

// takeAll removes and returns the queued runs keep selects, in start order.
// The caller holds rq.mu.
func (rq *runQueue) takeAll(keep func(*queuedRun) bool) []*queuedRun {
	var out, rest []*queuedRun
	for len(rq.heap) > 0 {
		q := heap.Pop(&rq.heap).(*queuedRun)
		if keep(q) {
			out = append(out, q)
		} else {
			rest = append(rest, q)
		}
	}
	for _, q := range rest {
		heap.Push(&rq.heap, q)
	}
	for _, q := range out {
		if q.stopCtx != nil {
			q.stopCtx()
		}
	}
	return out
}

// sweepEvery is how often a non-empty run queue looks for runs that waited
// longer than wait: a quarter of it, so none waits more than 1.25 × wait.
func (rq *runQueue) sweepEvery() time.Duration { return max(rq.wait/4, time.Millisecond) }

// armSweep arms the sweep timer if it is not armed. The caller holds rq.mu.
func (rq *runQueue) armSweep() {
	if rq.wait <= 0 || rq.stopped || rq.sweepArmed {
		return
	}
	rq.sweepArmed = true
	rq.sweep = time.AfterFunc(rq.sweepEvery(), rq.sweepOnce)
}

// sweepOnce gives back, when no worker took a queued run within wait, the
// runs that waited longer than wait: the best-ranked of them and every run
// ranked after it. It re-arms itself while runs wait.
func (rq *runQueue) sweepOnce() {
	now := time.Now()
	rq.mu.Lock()
	rq.sweepArmed = false
	var first *queuedRun
	for _, q := range rq.heap {
		if now.Sub(rq.taken) <= rq.wait || (rq.writesBehindFunc != nil && rq.writesBehindFunc()) {
			break // the queue moves, or it waits on its completions' writes
		}
		if now.Sub(q.enqueued) > rq.wait && (first == nil || runBefore(q, first)) {
			first = q
		}
	}
	var out []*queuedRun
	if first != nil {
		out = rq.takeAll(func(q *queuedRun) bool { return !runBefore(q, first) })
	}
	if len(rq.heap) > 0 {
		rq.armSweep()
	}
	rq.mu.Unlock()
	for _, q := range out {
		rq.giveBackFunc(q, now.Sub(q.enqueued))
	}
}

// len returns the number of queued runs and how long the oldest has waited.
func (rq *runQueue) len() (n int, oldest time.Duration) {
	now := time.Now()
	rq.mu.Lock()
	defer rq.mu.Unlock()
	for _, q := range rq.heap {
		oldest = max(oldest, now.Sub(q.enqueued))
	}
	return len(rq.heap), oldest
}
