package client

import (
	"slices"
	"time"

	"github.com/jobq/jobq/apitype"
)

// The worker's run queue: fetched jobs waiting for a free slot, sized as
// the replica sizes its own (scheduler/pool.go) — as many places as the
// worker is expected to start within runQueueHorizon — so a draining
// worker of short jobs fetches many at once while one running long jobs
// fetches only its free slots. Queued jobs are held like running ones
// (their leases renewed by the heartbeats); a queue that stands still for
// RunQueueWait is given back.

// runQueueHorizon is how far ahead the run queue is sized: the jobs the
// worker is expected to start within it.
const runQueueHorizon = 100 * time.Millisecond

// maxFetchJobs is the most jobs one fetch asks for (max_jobs).
const maxFetchJobs = 1000

// recentRuns counts the handlers that returned over a sliding pair of
// runQueueHorizon buckets, and their run time (w.mu guards it).
type recentRuns struct {
	start           time.Time // start of the current bucket
	cur, prev       int
	curSum, prevSum time.Duration
}

func (r *recentRuns) rotate(now time.Time) {
	switch d := now.Sub(r.start); {
	case d < runQueueHorizon:
	case d < 2*runQueueHorizon:
		r.prev, r.cur, r.prevSum, r.curSum = r.cur, 0, r.curSum, 0
		r.start = r.start.Add(runQueueHorizon)
	default:
		r.prev, r.cur, r.prevSum, r.curSum = 0, 0, 0, 0
		r.start = now
	}
}

// add counts a handler that returned at now after running for ran.
func (r *recentRuns) add(now time.Time, ran time.Duration) {
	r.rotate(now)
	r.cur++
	r.curSum += ran
}

// places is how many queued jobs the slots are expected to start
// within runQueueHorizon: the handlers that returned in the last bucket
// (or the current one, if more), and no more than slots ×
// runQueueHorizon / their mean run time. Right after 4 slots finished four
// 3 s handlers it is 0, not 4.
func (r *recentRuns) places(now time.Time, slots int) int {
	r.rotate(now)
	n := max(r.prev, r.cur)
	if ran, sum := r.prev+r.cur, r.prevSum+r.curSum; ran > 0 && sum > 0 {
		mean := sum / time.Duration(ran)
		n = int(min(int64(n), int64(slots)*int64(runQueueHorizon)/int64(max(mean, 1))))
	}
	return n
}

// placesLocked is how many jobs the run queue may hold now (w.mu is held).
func (w *Worker) placesLocked(now time.Time) int {
	if w.cfg.RunQueue <= 0 {
		return 0
	}
	return min(w.cfg.RunQueue, w.recent.places(now, w.cfg.Concurrency))
}

// startQueuedLocked runs queued jobs in the free slots, in fetch order
// (w.mu is held). Queued jobs that lost their lease are dropped.
func (w *Worker) startQueuedLocked() {
	for len(w.queue) > 0 && w.running < w.cfg.Concurrency && !w.closing {
		hj := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		hj.inQueue = false
		w.moved = time.Now()
		if hj.lost {
			close(hj.done)
			w.log.Info("queued job lost its lease; not run", "job_id", hj.job.ID, "attempt", hj.job.Attempt)
			w.dropLocked(hj)
			continue
		}
		w.runLocked(hj)
	}
	if len(w.queue) == 0 {
		w.queue = nil // let the backing array go
	}
}

// unqueueLocked takes hj out of the run queue, if it is there (w.mu is
// held).
func (w *Worker) unqueueLocked(hj *heldJob) {
	if !hj.inQueue {
		return
	}
	hj.inQueue = false
	if i := slices.Index(w.queue, hj); i >= 0 {
		w.queue = slices.Delete(w.queue, i, i+1)
	}
}

// sweepLoop gives the run queue back when it stood still for RunQueueWait,
// checking every RunQueueWait/4 while it holds jobs, until stop is closed.
func (w *Worker) sweepLoop(stop <-chan struct{}) {
	every := max(w.cfg.RunQueueWait/4, time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		w.mu.Lock()
		n := len(w.queue)
		w.mu.Unlock()
		if n == 0 {
			select {
			case <-stop:
				return
			case <-w.qWake:
			}
			continue
		}
		t.Reset(every)
		select {
		case <-stop:
			return
		case <-t.C:
		}
		w.sweep(time.Now())
	}
}

// sweep releases every queued job when no queued job started for
// RunQueueWait: the slots are taken by long jobs, and any other worker may
// run these now.
func (w *Worker) sweep(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 || now.Sub(w.moved) <= w.cfg.RunQueueWait {
		return
	}
	w.log.Info("run queue stood still; giving its jobs back", "jobs", len(w.queue), "waited", now.Sub(w.moved).Round(time.Millisecond))
	// The replica's words for its own run queue's give-back: the same
	// release by design, and told apart from others by it.
	w.releaseQueuedLocked("released: waited in the run queue longer than the run-queue wait; back to WAITING for any worker")
}

// releaseQueued stops starting queued jobs and releases them (Run's
// context ended).
func (w *Worker) releaseQueued() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closing = true
	w.releaseQueuedLocked("worker shutting down")
}

func (w *Worker) releaseQueuedLocked(why string) {
	q := w.queue
	w.queue = nil
	for _, hj := range q {
		hj.inQueue = false
		close(hj.done)
		if hj.lost {
			w.dropLocked(hj)
			continue
		}
		w.queueLocked(hj, apitype.CompleteRequest{TaskToken: hj.job.token, Outcome: outcomeRelease, Error: why})
	}
}
