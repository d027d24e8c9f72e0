package scheduler

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jobq/jobq"
)

// promoterStore is what the promoter needs from the store.
type promoterStore interface {
	JobScheduledNext(ctx context.Context) (jobq.ScheduledNext, error)
	JobPromoteDue(ctx context.Context, limit int) (int, error)
}

// promoterParams configures the promoter.
type promoterParams struct {
	Store    promoterStore
	Interval time.Duration // Config.PromoteInterval (±20% jitter)
	Batch    int           // Config.PromoteBatch
	// WakeFunc asks the scanner to scan now (the promoted jobs are due).
	WakeFunc func()
	Retry    dbRetrier
	Log      *slog.Logger
	Events   emitter // EventPromoted
}

// promoter moves SCHEDULED jobs whose run_at has come on the database clock
// to WAITING, where the scan finds them. Every replica runs one. Each pass
// first reads the earliest SCHEDULED run_at and the database clock in one
// index-only statement (JobScheduledNext); only when something is due does
// it promote, Batch rows per statement, and wake the scanner. It then
// sleeps until the earliest run_at (measured against the database clock it
// just read) or Interval ± Interval/5, whichever comes first, and is woken
// earlier by a local submit or retry due sooner (promoteAt).
// Promotions from several replicas at once are safe: the UPDATE is
// conditioned on status='SCHEDULED', so each job is promoted once.
type promoter struct {
	loopService
	p    promoterParams
	poke chan struct{}

	mu       sync.Mutex
	hint     time.Time // earliest local instant a local submit or retry is due; zero: none
	observed time.Time // next pass planned from an idle scan's probe (observe); zero: none
}

func newPromoter(p promoterParams) *promoter {
	return &promoter{p: p, poke: make(chan struct{}, 1)}
}

// Start runs the promoter until ctx ends or Stop; the first pass is at once
// (jobs may have come due while no replica ran).
func (pr *promoter) Start(ctx context.Context) error { return pr.start(ctx, pr.run) }

// promoteAt asks for a pass at local time t unless one is planned earlier.
// It never blocks.
func (pr *promoter) promoteAt(t time.Time) {
	pr.mu.Lock()
	if pr.hint.IsZero() || t.Before(pr.hint) {
		pr.hint = t
	}
	pr.mu.Unlock()
	select {
	case pr.poke <- struct{}{}:
	default:
	}
}

func (pr *promoter) takeHint() (hint, observed time.Time) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	h, o := pr.hint, pr.observed
	pr.hint, pr.observed = time.Time{}, time.Time{}
	return h, o
}

// observe takes what an idle scan's probe read (JobIdleProbe: the earliest
// SCHEDULED run_at and the database clock, answered at local time
// received) as this promoter's own probe: the next pass is planned from it
// exactly as pass plans it after a probe that found nothing due — at the
// earliest run_at or Interval ± Interval/5 after received — and a job
// already due makes the pass run at once. An idle replica scans about once
// a second, so its promoter's own probe never comes due. It never blocks.
func (pr *promoter) observe(sn jobq.ScheduledNext, received time.Time) {
	at := received.Add(jittered(pr.p.Interval, pr.p.Interval/5))
	if !sn.Next.IsZero() {
		if due := received.Add(sn.Next.Sub(sn.DBNow)); due.Before(at) {
			at = due
		}
	}
	pr.mu.Lock()
	pr.observed = at
	pr.mu.Unlock()
	select {
	case pr.poke <- struct{}{}:
	default:
	}
}

func (pr *promoter) run(ctx context.Context) {
	next := time.Now()
	// pending is the earliest hint taken since the last pass: a probe's
	// answer may have been read before the submit or retry that hinted
	// committed, so it replaces the plan but never drops a hint; the next
	// pass (whose own probe reads after the hint's commit) serves it.
	var pending time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pr.poke:
			h, o := pr.takeHint()
			if !h.IsZero() && (pending.IsZero() || h.Before(pending)) {
				pending = h
			}
			if !o.IsZero() {
				// A fresh probe's answer replaces the plan, later or not.
				next = o
			}
			if !pending.IsZero() && pending.Before(next) {
				next = pending
			}
			resetTimer(timer, time.Until(next))
			continue
		case <-timer.C:
		}
		pending = time.Time{}
		next, _ = pr.pass(ctx)
		resetTimer(timer, time.Until(next))
	}
}

// pass promotes every due SCHEDULED job and returns the local time of the
// next pass and how many jobs it promoted.
func (pr *promoter) pass(ctx context.Context) (next time.Time, promoted int) {
	p := pr.p
	idle := func() time.Time {
		return time.Now().Add(jittered(p.Interval, p.Interval/5))
	}
	for ctx.Err() == nil {
		sn, err := withRetryV(ctx, p.Retry, "promote.next", retryUntilDone, func() (jobq.ScheduledNext, error) {
			return p.Store.JobScheduledNext(ctx)
		})
		received := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				p.Log.Error("promoter probe failed", "component", "promoter", "err", err)
			}
			return idle(), promoted
		}
		if sn.Next.IsZero() {
			return idle(), promoted
		}
		if wait := sn.Next.Sub(sn.DBNow); wait > 0 {
			// The database clock, not ours, says when the job is due.
			at := received.Add(wait)
			if later := idle(); later.Before(at) {
				return later, promoted
			}
			return at, promoted
		}
		total, err := pr.promoteDue(ctx)
		promoted += total
		if err == nil && total == 0 {
			// Due rows exist but another transaction holds them (the
			// promotion skips locked rows): whoever holds them promotes
			// them, or the next pass does; probing again at once would spin.
			return idle(), promoted
		}
		if total > 0 {
			p.WakeFunc() // promoted jobs are due: scan at once
		}
		if err != nil {
			if ctx.Err() == nil {
				p.Log.Error("promotion failed", "component", "promoter", "promoted", total, "err", err)
			}
			return idle(), promoted
		}
	}
	return idle(), promoted
}

// promoteDue promotes due jobs Batch at a time until a batch comes back
// short, and reports them (EventPromoted).
func (pr *promoter) promoteDue(ctx context.Context) (int, error) {
	p := pr.p
	total := 0
	defer func() { p.Events.emit(Event{Kind: EventPromoted, N: total}) }()
	for ctx.Err() == nil {
		n, err := withRetryV(ctx, p.Retry, "promote", retryUntilDone, func() (int, error) {
			return p.Store.JobPromoteDue(ctx, p.Batch)
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < p.Batch {
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
// then instead of at its next PromoteInterval. It never blocks.
func (s *Scheduler) WakeAt(runAt, dbNow time.Time) {
	s.promoter.promoteAt(time.Now().Add(runAt.Sub(dbNow)))
}
