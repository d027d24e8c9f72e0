package scheduler

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
)

// scannerParams configures the scanner.
type scannerParams struct {
	Claimer *claimer
	// Limited claims the limited job types first, once per scan (nil: none).
	Limited *limitedClaimer
	Slots   *slots
	// DispatchFunc hands one claimed job to a worker (it takes a slot).
	DispatchFunc func(jobq.ClaimedJob)
	// Lost are the claim tries that failed after they may have committed;
	// AdoptFunc takes on the runs they left (Scheduler.adoptLost).
	Lost         *lostClaims
	AdoptFunc    func(ctx context.Context, since time.Time) (int, error)
	PollInterval time.Duration
	PollJitter   time.Duration
	BatchLimit   int
	Workers      int
	DrainWait    time.Duration // ≤ 0: off
	DisableDrain bool
	Log          *slog.Logger
	Scans        *atomic.Int64 // Stats.Scans
	ClaimErrors  *atomic.Int64 // Stats.ClaimErrors
	ScanFunc     func(d time.Duration, batch int)
}

// scannerSignals are the scanner's test signals.
type scannerSignals struct {
	scanned testSignal[int] // a scan ended; the jobs it dispatched
}

// scanner fires every PollInterval ± PollJitter, on wake-up, and again
// while batches come back full and worker slots are free (drain): once as
// many slots are free as the last claim took, or after at most DrainWait.
type scanner struct {
	loopService
	p           scannerParams
	testSignals scannerSignals
}

func newScanner(p scannerParams) *scanner { return &scanner{p: p} }

// Start scans until ctx ends or Stop (the soft stop: no claim after it).
func (sc *scanner) Start(ctx context.Context) error { return sc.start(ctx, sc.run) }

func (sc *scanner) run(ctx context.Context) {
	p := sc.p
	timer := time.NewTimer(jittered(p.PollInterval, p.PollJitter))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-p.Slots.wake:
		}
		sc.testSignals.scanned.signal(sc.scan(ctx))
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(jittered(p.PollInterval, p.PollJitter))
	}
}

// scan claims until a batch comes back short, slots run out or drain is off,
// and returns the jobs it dispatched. While draining it first waits (at most
// DrainWait) for as many free slots as the last claim took (awaitSlots).
// Limited job types are claimed first, once per scan (ops.go); the ordinary
// claim leaves them out.
func (sc *scanner) scan(ctx context.Context) (dispatched int) {
	p := sc.p
	defer func() { dispatched += p.Lost.reconcile(ctx, p.AdoptFunc) }()
	dispatched += p.Lost.reconcile(ctx, p.AdoptFunc)
	if p.Limited != nil {
		dispatched += p.Limited.claim(ctx)
	}
	for ctx.Err() == nil {
		if sc.p.Claimer.lastFull && !p.DisableDrain {
			sc.awaitSlots(ctx, p.Claimer.lastSize)
			if ctx.Err() != nil {
				return dispatched
			}
		}
		free := p.Slots.available()
		if free == 0 {
			p.Slots.moreWaiting.Store(true) // a finishing worker will wake us
			if p.Slots.available() == 0 {
				return dispatched
			}
			continue // a slot freed before the flag was set: its wake-up was not sent
		}
		n := min(free, p.BatchLimit)
		start := time.Now()
		jobs, err := p.Claimer.claim(ctx, n)
		p.Scans.Add(1)
		if p.ScanFunc != nil {
			p.ScanFunc(time.Since(start), len(jobs))
		}
		if err != nil {
			if ctx.Err() == nil {
				p.ClaimErrors.Add(1)
				logDBFailure(p.Log, "claim failed; the queue is not known to be empty, the next scan retries", err, "component", "scanner")
			}
			return dispatched
		}
		for i := range jobs {
			p.DispatchFunc(jobs[i])
		}
		dispatched += len(jobs)
		full := len(jobs) == n
		p.Slots.moreWaiting.Store(full)
		if !full || p.DisableDrain {
			return dispatched
		}
	}
	return dispatched
}

// awaitSlots waits until as many worker slots are free as the last claim
// took (capped at min(Workers, BatchLimit)), at most DrainWait (a negative
// DrainWait returns at once). It is called only when the last claim filled
// its batch — the queue is long — so waiting costs no job more than
// DrainWait of pickup latency and saves claim transactions: handlers of a
// claimed batch return one by one, and claiming at each free slot would take
// batches of a few jobs at the price of a full claim each. Waiting for the
// last claim's size, not for every slot, keeps slots held by long-running
// handlers out of it: with 45 of 50 slots busy for good, claims of 5 go on
// at the pace their handlers return. Only a claimed batch mixing short and
// long handlers makes a claim wait the whole DrainWait.
func (sc *scanner) awaitSlots(ctx context.Context, lastSize int) {
	p := sc.p
	want := min(lastSize, p.Workers, p.BatchLimit)
	if p.DrainWait <= 0 || p.Slots.available() >= want {
		return
	}
	t := time.NewTimer(p.DrainWait)
	defer t.Stop()
	for p.Slots.available() < want {
		select {
		case <-p.Slots.freed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
