package scheduler

import (
	"context"
	"time"
)

// scanner fires every PollInterval ± PollJitter, on local wake-up, and again
// while batches come back full and worker slots are free (drain): once as
// many slots are free as the last claim took, or after at most DrainWait.
type scanner struct {
	s       *Scheduler
	claimer *claimer
}

func newScanner(s *Scheduler) *scanner { return &scanner{s: s, claimer: newClaimer(s)} }

func (sc *scanner) run(ctx context.Context) {
	s := sc.s
	timer := time.NewTimer(jittered(s.cfg.PollInterval, s.cfg.PollJitter))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.wake:
		}
		sc.scan(ctx)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(jittered(s.cfg.PollInterval, s.cfg.PollJitter))
	}
}

// scan claims until a batch comes back short, slots run out or drain is off.
// While draining it first waits (at most DrainWait) for as many free slots
// as the last claim took (awaitSlots).
// Limited job types are claimed first, once per scan (ops.go); the ordinary
// claim leaves them out.
func (sc *scanner) scan(ctx context.Context) {
	s := sc.s
	if s.ops != nil {
		s.ops.claimLimited(ctx)
	}
	for ctx.Err() == nil {
		if sc.claimer.lastFull && !s.cfg.DisableDrain {
			sc.awaitSlots(ctx, sc.claimer.lastSize)
			if ctx.Err() != nil {
				return
			}
		}
		free := len(s.free)
		if free == 0 {
			s.moreWaiting.Store(true) // a finishing worker will wake us
			if len(s.free) == 0 {
				return
			}
			continue // a slot freed before the flag was set: its wake-up was not sent
		}
		n := min(free, s.cfg.BatchLimit)
		start := time.Now()
		jobs, err := sc.claimer.claim(ctx, n)
		s.stats.scans.Add(1)
		if s.cfg.Hooks.ScanFunc != nil {
			s.cfg.Hooks.ScanFunc(time.Since(start), len(jobs))
		}
		if err != nil {
			if ctx.Err() == nil {
				s.stats.claimErrors.Add(1)
				s.logDBFailure("claim failed; the queue is not known to be empty, the next scan retries", err, "component", "scanner")
			}
			return
		}
		for i := range jobs {
			s.dispatch(jobs[i])
		}
		full := len(jobs) == n
		s.moreWaiting.Store(full)
		if !full || s.cfg.DisableDrain {
			return
		}
	}
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
	s := sc.s
	want := min(lastSize, s.cfg.Workers, s.cfg.BatchLimit)
	if s.cfg.DrainWait <= 0 || len(s.free) >= want {
		return
	}
	t := time.NewTimer(s.cfg.DrainWait)
	defer t.Stop()
	for len(s.free) < want {
		select {
		case <-s.slotFreed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
