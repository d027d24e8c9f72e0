package scheduler

import (
	"sync"
	"time"

	"github.com/jobq/jobq"
)

// keyHandoff lets the completer take the next jobs of the concurrency keys
// its batches free (jobq.WithKeyHandoff): a keyed batch's completion makes
// them RUNNING under this replica in its own transaction, and they run
// here as if this replica had claimed them — the same EventClaimed, run
// table, heartbeat and run queue (dispatcher.dispatch) — without a claim
// of their own.
//
// Each batch reserves the worker slots of the jobs it may be handed
// (slots.reserve: at most one per keyed success of the batch, as a claim
// reserves its limit) before it is written, and only while the replica
// accepts work: once Stop began (close) no batch asks for a hand-off.
// A batch's reservation also holds the local handlers' WaitGroup, so Stop
// (which waits for every handler before it closes the completer) waits
// for a write that may hand jobs off, and those jobs are released like
// queued runs at shutdown.
//
// A write that failed may have committed (its answer lost): its hand-off
// is then unknown, so the failed try is recorded in lostClaims like a
// failed claim try, and the scanner's reconcile finds the handed jobs by
// owner (JobHeldBy). lostClaims.markDispatched makes the completer and
// that adoption dispatch each run at most once.
type keyHandoff struct {
	owner string
	lease time.Duration
	slots *slots
	lost  *lostClaims
	// handlers is the local executor's WaitGroup of running handlers.
	handlers *sync.WaitGroup
	events   emitter
	dispatch func(jobq.ClaimedJob)

	mu     sync.Mutex
	closed bool
}

// begin reserves up to n worker slots for the jobs a batch about to be
// written may be handed and returns the request to write it with (nil,
// nothing reserved: no room, the replica is stopping, or n is 0). Every
// non-nil request must be ended with end.
func (k *keyHandoff) begin(n int) *jobq.KeyHandoff {
	if k == nil || n == 0 {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	got := k.slots.reserve(n)
	if got == 0 {
		return nil
	}
	k.handlers.Add(1)
	return &jobq.KeyHandoff{Owner: k.owner, Lease: k.lease, Limit: got}
}

// tried records a try of h's write that failed after began: it may have
// committed, handing jobs off unheard of (lostClaims).
func (k *keyHandoff) tried(h *jobq.KeyHandoff, began time.Time) {
	if h != nil {
		k.lost.failed(began)
	}
}

// end dispatches the jobs h's committed write handed off (written: the
// write succeeded; otherwise they are unknown and left to the lost-claim
// reconcile) and hands back the slots no job took.
func (k *keyHandoff) end(h *jobq.KeyHandoff, written bool) {
	if h == nil {
		return
	}
	defer k.handlers.Done()
	var jobs []jobq.ClaimedJob
	if written {
		for _, cj := range h.Jobs {
			if !k.lost.markDispatched(cj.Fence(), 4*k.lease) {
				continue // adopted meanwhile by the lost-claim reconcile
			}
			cj.LeaseBase = h.Sent
			jobs = append(jobs, cj)
		}
	}
	if len(jobs) > 0 {
		k.events.emit(Event{Kind: EventClaimed, Jobs: jobs})
		for _, cj := range jobs {
			k.dispatch(cj)
		}
	}
	k.slots.unreserve(h.Limit - len(jobs))
}

// close stops asking for hand-offs: the replica is stopping.
func (k *keyHandoff) close() {
	if k == nil {
		return
	}
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
}

// keyedSuccesses counts the completions of batch that may free a key's
// slot in the batched keyed write: its successes of keyed jobs.
func keyedSuccesses(batch []jobq.Completion) int {
	n := 0
	for _, c := range batch {
		if c.Outcome == jobq.OutcomeSuccess && c.ConcurrencyKey != "" {
			n++
		}
	}
	return n
}
