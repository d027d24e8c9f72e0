package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/jobq/jobq"
)

// promoter moves SCHEDULED jobs whose run_at has come on the database clock
// to WAITING, where the scan finds them. Every replica runs one. Each pass
// first reads the earliest SCHEDULED run_at and the database clock in one
// index-only statement (JobScheduledNext); only when something is due does
// it promote, PromoteBatch rows per statement, and wake the scanner. It then
// sleeps until the earliest run_at (measured against the database clock it
// just read) or PromoteInterval ± PromoteInterval/5, whichever comes first,
// and is woken earlier by a local submit or retry due sooner (promoteAt).
// Promotions from several replicas at once are safe: the UPDATE is
// conditioned on status='SCHEDULED', so each job is promoted once.
type promoter struct {
	s    *Scheduler
	poke chan struct{}

	mu   sync.Mutex
	hint time.Time // earliest local instant a local submit or retry is due; zero: none
}

func newPromoter(s *Scheduler) *promoter {
	return &promoter{s: s, poke: make(chan struct{}, 1)}
}

// promoteAt asks for a pass at local time t unless one is planned earlier.
// It never blocks.
func (p *promoter) promoteAt(t time.Time) {
	p.mu.Lock()
	if p.hint.IsZero() || t.Before(p.hint) {
		p.hint = t
	}
	p.mu.Unlock()
	select {
	case p.poke <- struct{}{}:
	default:
	}
}

func (p *promoter) takeHint() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.hint
	p.hint = time.Time{}
	return h
}

func (p *promoter) run(ctx context.Context) {
	next := time.Now() // a first pass at once: jobs may have come due while no replica ran
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.poke:
			h := p.takeHint()
			if h.IsZero() || !h.Before(next) {
				continue
			}
			next = h
			resetTimer(timer, time.Until(next))
			continue
		case <-timer.C:
		}
		next = p.pass(ctx)
		resetTimer(timer, time.Until(next))
	}
}

// pass promotes every due SCHEDULED job and returns the local time of the
// next pass.
func (p *promoter) pass(ctx context.Context) time.Time {
	s := p.s
	idle := func() time.Time {
		return time.Now().Add(jittered(s.cfg.PromoteInterval, s.cfg.PromoteInterval/5))
	}
	for ctx.Err() == nil {
		var sn jobq.ScheduledNext
		err := s.dbRetry(ctx, "promote.next", 0, func() error {
			var e error
			sn, e = s.store.JobScheduledNext(ctx)
			return e
		})
		received := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("promoter probe failed", "component", "promoter", "err", err)
			}
			return idle()
		}
		if sn.Next.IsZero() {
			return idle()
		}
		if wait := sn.Next.Sub(sn.DBNow); wait > 0 {
			// The database clock, not ours, says when the job is due.
			at := received.Add(wait)
			if later := idle(); later.Before(at) {
				return later
			}
			return at
		}
		total, err := p.promoteDue(ctx)
		if total > 0 {
			s.stats.promoted.Add(int64(total))
			select { // promoted jobs are due: scan at once
			case s.wake <- struct{}{}:
			default:
			}
			if s.cfg.Hooks.PromotedFunc != nil {
				s.cfg.Hooks.PromotedFunc(total)
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("promotion failed", "component", "promoter", "promoted", total, "err", err)
			}
			return idle()
		}
	}
	return idle()
}

// promoteDue promotes due jobs PromoteBatch at a time until a batch comes
// back short.
func (p *promoter) promoteDue(ctx context.Context) (int, error) {
	s := p.s
	total := 0
	for ctx.Err() == nil {
		var n int
		err := s.dbRetry(ctx, "promote", 0, func() error {
			var e error
			n, e = s.store.JobPromoteDue(ctx, s.cfg.PromoteBatch)
			return e
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < s.cfg.PromoteBatch {
			break
		}
	}
	return total, nil
}

// resetTimer stops t, drains a pending fire and arms it for d.
func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(max(d, 0))
}

// WakeAt tells the promoter that a job this replica just scheduled is due
// at runAt on the database clock, read as dbNow at about the same moment
// (a submit passes the job's RunAt and CreateTime), so the promoter passes
// then instead of at its next PromoteInterval. It never blocks; without a
// running promoter it does nothing.
func (s *Scheduler) WakeAt(runAt, dbNow time.Time) {
	if p := s.promoter; p != nil {
		p.promoteAt(time.Now().Add(runAt.Sub(dbNow)))
	}
}

// PromoteNow runs one promoter pass at once and returns how many jobs it
// promoted (tests and operators).
func (s *Scheduler) PromoteNow(ctx context.Context) (int, error) {
	n, err := newPromoter(s).promoteDue(ctx)
	if n > 0 {
		s.stats.promoted.Add(int64(n))
		s.Wake()
	}
	return n, err
}
