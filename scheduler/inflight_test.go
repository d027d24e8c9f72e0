package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
)

// overlapStore is the real store with each SKIP LOCKED claim after the
// first (a scan's first claim goes alone: lanes start once it came back
// full) held until a second claim is running too (or holdMax passed), so a
// scanner that keeps two claims in flight is seen to; it records the most
// claims that were ever running at once.
type overlapStore struct {
	claimStore
	holdMax time.Duration
	mu      sync.Mutex
	running int
	maxSeen int
	sent    int
	arrived chan struct{} // closed when a second claim is running
	once    sync.Once
}

func (o *overlapStore) JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	o.mu.Lock()
	o.running++
	o.sent++
	first := o.sent == 1
	o.maxSeen = max(o.maxSeen, o.running)
	if o.running >= 2 {
		o.once.Do(func() { close(o.arrived) })
	}
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.running--
		o.mu.Unlock()
	}()
	if !first {
		select {
		case <-o.arrived:
		case <-time.After(o.holdMax):
		}
	}
	return o.claimStore.JobClaimSkipLocked(ctx, p)
}

func (o *overlapStore) most() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.maxSeen
}

// scanWithLanes drains a backlog of n jobs in claims of batch with
// 1+lanes claims in flight and returns the dispatched ids, the most claims
// that ran at once, the claims sent and the slots left available.
func scanWithLanes(t *testing.T, n, batch, lanes, workers int, holdMax time.Duration) (got []uint64, want []uint64, most int, claims int64, free int) {
	t.Helper()
	st := testdb.Store(t)
	for i := range n {
		want = append(want, submitJob(t, st, fmt.Sprintf("inflight-%d", i)).ID)
	}
	ov := &overlapStore{claimStore: st, holdMax: holdMax, arrived: make(chan struct{})}
	params := claimerParams{Store: ov, Strategy: StrategySkipLocked, Owner: "inflight", Lease: time.Minute,
		Retry: testRetrier()}
	var extra []*claimer
	for range lanes {
		extra = append(extra, newClaimer(params))
	}
	slots := newSlots(workers, 0, 0)
	var mu sync.Mutex
	events := &eventLog{}
	sc := newScanner(scannerParams{
		Claimer: newClaimer(params), Lanes: extra, Slots: slots,
		DispatchFunc: func(cj jobq.ClaimedJob) { mu.Lock(); got = append(got, cj.ID); mu.Unlock() },
		PollInterval: time.Hour, BatchLimit: batch, Workers: workers, DrainWait: -1, Log: discardLog(),
		Events: events.emitter(), Lost: &lostClaims{},
	})
	startService(t, sc)
	slots.wakeUp() // the poll interval is an hour: only the wake-up scans
	if d := events.next(t, EventScanDone, signalTimeout).N; d != n {
		t.Fatalf("scan dispatched %d jobs, want %d", d, n)
	}
	slices.Sort(got)
	return got, want, ov.most(), int64(events.count(EventScanned)), slots.available()
}

// A draining scan with one lane keeps two claims in flight, each claiming
// into its own slot reservation; without lanes (ClaimsInFlight 1, or the
// cas strategy) it never has two. Either way every job is dispatched
// exactly once and the slots of claims that came back short are handed
// back.
func TestScanClaimsInFlightWhileDraining(t *testing.T) {
	t.Parallel()
	const batch, workers = 5, 100
	for _, tc := range []struct {
		name       string
		n, lanes   int
		hold       time.Duration
		most       int
		minC, maxC int64
	}{
		// 23 jobs in claims of 5: the first claim alone, then two at a
		// time; the lane that sees the end of the queue stops, the other
		// stops at its own short or empty claim.
		{name: "one lane", n: 23, lanes: 1, hold: 5 * time.Second, most: 2, minC: 5, maxC: 7},
		{name: "no lanes", n: 12, lanes: 0, hold: 100 * time.Millisecond, most: 1, minC: 3, maxC: 3}, // 5 + 5 + 2
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, want, most, claims, free := scanWithLanes(t, tc.n, batch, tc.lanes, workers, tc.hold)
			if !slices.Equal(got, want) {
				t.Fatalf("dispatched %v, want each of %v once", got, want)
			}
			if most != tc.most {
				t.Fatalf("at most %d claims ran at once, want %d", most, tc.most)
			}
			if claims < tc.minC || claims > tc.maxC {
				t.Fatalf("claims sent = %d, want %d–%d", claims, tc.minC, tc.maxC)
			}
			if free != workers-tc.n {
				t.Fatalf("slots available = %d, want %d (every unused reservation handed back)", free, workers-tc.n)
			}
		})
	}
}

// Two claims never reserve more slots between them than there are: with
// 8 slots and claims of 5, the first reserves 5 and the second the 3 left.
func TestSlotReservationsNeverOverlap(t *testing.T) {
	t.Parallel()
	s := newSlots(8, 0, 0)
	a := s.reserve(5)
	b := s.reserve(5)
	if a != 5 || b != 3 || s.available() != 0 {
		t.Fatalf("reserved %d and %d, %d left; want 5, 3, 0", a, b, s.available())
	}
	if n := s.reserveAtLeast(1, 5); n != 0 {
		t.Fatalf("reserveAtLeast with no slot free took %d, want 0", n)
	}
	s.unreserve(2)
	if n := s.reserveAtLeast(3, 5); n != 0 {
		t.Fatalf("reserveAtLeast(3) with 2 free took %d, want 0", n)
	}
	if n := s.reserveAtLeast(2, 5); n != 2 {
		t.Fatalf("reserveAtLeast(2) with 2 free took %d, want 2", n)
	}
	// Concurrent reservations of 1 from 100 goroutines on 8 freed slots:
	// exactly 8 succeed.
	s.unreserve(8)
	var won atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() { won.Add(int64(s.reserve(1))) })
	}
	wg.Wait()
	if won.Load() != 8 {
		t.Fatalf("100 concurrent reservations of 1 on 8 slots took %d, want 8", won.Load())
	}
}
