package scheduler

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
)

// scannerParams configures the scanner.
type scannerParams struct {
	Claimer *claimer
	// Lanes are the claimers of the further claims a draining scan keeps in
	// flight (Config.ClaimsInFlight - 1 of them; none: one at a time).
	Lanes []*claimer
	// Limited claims the limited job types first, once per scan (nil: none).
	Limited *limitedClaimer
	Slots   *slots
	// DispatchFunc hands one claimed job to a worker, in a slot the claim
	// reserved.
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
	Log          *slog.Logger
	Events       emitter // EventScanned, EventScanDone, EventClaimFailed
}

// scanner fires every PollInterval ± PollJitter, on wake-up, and again
// while batches come back full and worker slots are free (drain): once as
// many slots are free as the last claim took, or after at most DrainWait.
type scanner struct {
	loopService
	p scannerParams
}

// newScanner returns a scanner of p; a claimer without a BatchLimit of its
// own (claimerParams.BatchLimit 0) gets p.BatchLimit.
func newScanner(p scannerParams) *scanner {
	for _, c := range append([]*claimer{p.Claimer}, p.Lanes...) {
		if c != nil && c.p.BatchLimit <= 0 {
			c.p.BatchLimit = p.BatchLimit
		}
	}
	return &scanner{p: p}
}

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
		sc.p.Events.emit(Event{Kind: EventScanDone, N: sc.scan(ctx)})
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
// DrainWait) for as many free slots as the last claim took (reserveDrain).
// Limited job types are claimed first, once per scan (ops.go); the ordinary
// claim leaves them out. When the first claim fills its batch (the queue is
// long) and drain is on, the scan keeps up to 1+len(Lanes) claims in flight:
// each lane claims into its own slot reservation, so a replica is not held
// to one claim round trip at a time. The scan returns once every lane has
// stopped.
func (sc *scanner) scan(ctx context.Context) (dispatched int) {
	p := sc.p
	defer func() { dispatched += p.Lost.reconcile(ctx, p.AdoptFunc) }()
	dispatched += p.Lost.reconcile(ctx, p.AdoptFunc)
	limitedFull := false
	if p.Limited != nil {
		var n int
		n, limitedFull = p.Limited.claim(ctx)
		dispatched += n
	}
	n, more := sc.claimOnce(ctx, p.Claimer)
	dispatched += n
	if limitedFull {
		// A limited claim that filled its slots may have left due jobs: a
		// freed slot wakes the scanner for them, whatever the ordinary claim
		// found.
		p.Slots.moreWaiting.Store(true)
	}
	if !more {
		return dispatched
	}
	if len(p.Lanes) == 0 {
		return dispatched + sc.drain(ctx, p.Claimer)
	}
	var wg sync.WaitGroup
	var laneJobs atomic.Int64
	for _, lane := range p.Lanes {
		lane.startDrainLike(p.Claimer)
		wg.Go(func() { laneJobs.Add(int64(sc.drain(ctx, lane))) })
	}
	dispatched += sc.drain(ctx, p.Claimer)
	wg.Wait()
	return dispatched + int(laneJobs.Load())
}

// drain claims with c until claimOnce says stop; it returns the jobs it
// dispatched.
func (sc *scanner) drain(ctx context.Context, c *claimer) (dispatched int) {
	for ctx.Err() == nil {
		n, more := sc.claimOnce(ctx, c)
		dispatched += n
		if !more {
			return dispatched
		}
	}
	return dispatched
}

// claimOnce runs one claim with c into a fresh slot reservation and
// dispatches what it took; more is false when the scan should stop
// claiming with c: the claim came back short or failed, no slot is free,
// drain is off, or ctx ended.
func (sc *scanner) claimOnce(ctx context.Context, c *claimer) (dispatched int, more bool) {
	p := sc.p
	for ctx.Err() == nil {
		var n int
		if c.lastFull {
			n = sc.reserveDrain(ctx, c)
			if ctx.Err() != nil {
				p.Slots.unreserve(n)
				return 0, false
			}
		} else {
			n = p.Slots.reserve(sc.claimLimit(c))
		}
		if n == 0 {
			p.Slots.moreWaiting.Store(true) // a finishing worker will wake us
			if p.Slots.available() == 0 {
				return 0, false
			}
			continue // a slot freed before the flag was set: its wake-up was not sent
		}
		start := time.Now()
		jobs, err := c.claim(ctx, n)
		p.Events.emit(Event{Kind: EventScanned, Duration: time.Since(start), N: len(jobs)})
		if err != nil {
			p.Slots.unreserve(n)
			if ctx.Err() == nil {
				p.Events.emit(Event{Kind: EventClaimFailed, Err: err})
				logDBFailure(p.Log, "claim failed; the queue is not known to be empty, the next scan retries", err, "component", "scanner")
			}
			return 0, false
		}
		for i := range jobs {
			p.DispatchFunc(jobs[i])
		}
		p.Slots.unreserve(n - len(jobs))
		full := len(jobs) == n
		p.Slots.moreWaiting.Store(full)
		return len(jobs), full
	}
	return 0, false
}

// claimLimit is the most jobs the next claim of c asks for (claimer.limit,
// nextClaimLimit): twice what its last claim took, at least MinClaim, at
// most BatchLimit — so a claim follows the backlog, doubling while claims
// come back full and falling back to a few more than the last one took when
// they do not — and, after a full claim, never less than the limit before
// it or than the due jobs its probe saw. A claim sent with LIMIT 2,000
// whatever the backlog cost pickup latency: after a drain's churn, 200
// jobs/s picked up at p50 106 ms against 16 ms at the old defaults' ~70
// (`jobq bench --ci`, 2026-12-03). A MinClaim of 0 sends every claim with
// BatchLimit.
func (sc *scanner) claimLimit(c *claimer) int { return c.limit() }

// reserveDrain reserves the slots of a draining claim: it waits until as
// many slots are available as the last claim took (capped at min(Workers,
// BatchLimit)), at most DrainWait (a negative DrainWait does not wait), and
// reserves up to BatchLimit of them; after the wait it takes what is there
// (possibly none). It is called only when the last claim filled its batch —
// the queue is long — so waiting costs no job more than DrainWait of pickup
// latency and saves claim transactions: handlers of a claimed batch return
// one by one, and claiming at each free slot would take batches of a few
// jobs at the price of a full claim each. Waiting for the last claim's
// size, not for every slot, keeps slots held by long-running handlers out
// of it: with 45 of 50 slots busy for good, claims of 5 go on at the pace
// their handlers return. Only a claimed batch mixing short and long
// handlers makes a claim wait the whole DrainWait. The check and the
// reservation are one step (slots.reserveAtLeast), so of two lanes waiting
// for the same freed slots one takes them and the other waits on.
func (sc *scanner) reserveDrain(ctx context.Context, c *claimer) int {
	lastSize := c.lastSize
	p := sc.p
	want := min(lastSize, p.Workers, p.BatchLimit)
	limit := c.limit()
	if p.DrainWait <= 0 {
		return p.Slots.reserve(limit)
	}
	if n := p.Slots.reserveAtLeast(want, limit); n > 0 {
		return n
	}
	t := time.NewTimer(p.DrainWait)
	defer t.Stop()
	for {
		select {
		case <-p.Slots.freed:
			if n := p.Slots.reserveAtLeast(want, limit); n > 0 {
				return n
			}
		case <-t.C:
			return p.Slots.reserve(limit)
		case <-ctx.Done():
			return 0
		}
	}
}
