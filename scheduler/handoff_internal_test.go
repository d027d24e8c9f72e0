package scheduler

import (
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// The hand-off asks for no more jobs than the worker slots it can reserve,
// none once the replica is stopping, and hands back the slots no job took;
// a job the lost-claim adoption dispatched first is not dispatched again.
func TestKeyHandoffGate(t *testing.T) {
	var handlers sync.WaitGroup
	var dispatched []uint64
	sl := newSlots(2, 0, 10)
	k := &keyHandoff{owner: "r1", lease: time.Minute, slots: sl, lost: &lostClaims{}, handlers: &handlers,
		dispatch: func(cj jobq.ClaimedJob) { dispatched = append(dispatched, cj.ID) }}
	if h := k.begin(0); h != nil {
		t.Fatalf("begin(0) = %+v, want nil", h)
	}
	h := k.begin(5)
	if h == nil || h.Limit != 2 || h.Owner != "r1" || sl.available() != 0 {
		t.Fatalf("begin(5) with 2 free slots = %+v (%d left), want limit 2, none left", h, sl.available())
	}
	if h2 := k.begin(1); h2 != nil {
		t.Fatalf("begin with no free slot = %+v, want nil", h2)
	}
	// Job 2 was adopted by the lost-claim reconcile before the write's
	// answer came back: only job 1 is dispatched here.
	k.lost.markDispatched(jobq.Fence{ID: 2, Attempt: 1}, time.Minute)
	h.Jobs = []jobq.ClaimedJob{{ID: 1, Attempt: 1}, {ID: 2, Attempt: 1}}
	k.end(h, true)
	if len(dispatched) != 1 || dispatched[0] != 1 || sl.available() != 1 {
		t.Fatalf("dispatched %v with %d slots free, want [1] and 1 free", dispatched, sl.available())
	}
	// A failed write's jobs are unknown: nothing is dispatched, every slot
	// comes back.
	h = k.begin(1)
	h.Jobs = []jobq.ClaimedJob{{ID: 3, Attempt: 1}}
	k.tried(h, time.Now())
	k.end(h, false)
	if len(dispatched) != 1 || sl.available() != 1 || k.lost.since.IsZero() {
		t.Fatalf("after a failed write: dispatched %v, %d free, lost since %v; want [1], 1, a failed try recorded",
			dispatched, sl.available(), k.lost.since)
	}
	k.close()
	if h := k.begin(1); h != nil {
		t.Fatalf("begin after close = %+v, want nil", h)
	}
	handlers.Wait() // every begin was ended
}
