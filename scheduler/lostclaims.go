package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/jobq/jobq"
)

// lostClaimSlack widens the window of JobHeldBy past the time since the lost
// claim was sent, for the difference between the local monotonic clock and
// the database's: the read must never miss the lost claim's rows.
const lostClaimSlack = time.Second

// lostClaims remembers claim tries that failed after they may have
// committed. A claim's COMMIT can reach the database while its answer is
// lost with the connection (a reset, a proxy dropping it, a failover): its
// rows are RUNNING under this replica's owner id, yet no handler runs them
// and no heartbeat renews them, so they would wait for a rescue after their
// lease — a run lost to a connection the replica itself retried. After such
// a failure the scanner reads the owner's recent RUNNING rows (JobHeldBy)
// and takes on those its run table does not know (Scheduler.adoptLost).
// Safe for concurrent use: a draining scanner's claims in flight each try
// and dispatch on their own goroutine.
type lostClaims struct {
	mu    sync.Mutex
	since time.Time // when the earliest unreconciled failed try was sent; zero: none
	// dispatched is every fence this replica dispatched within the last
	// keep (4 leases): such a run is never adopted, even when its row is
	// still RUNNING after the run left the run table (an outcome write that
	// was given up) — adopting it would run the same attempt twice.
	dispatched map[jobq.Fence]time.Time
	adds       int
}

// noteDispatch records that f was dispatched now, forgetting fences older
// than keep every 1,024 notes.
func (l *lostClaims) noteDispatch(f jobq.Fence, keep time.Duration) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dispatched == nil {
		l.dispatched = map[jobq.Fence]time.Time{}
	}
	l.dispatched[f] = now
	if l.adds++; l.adds%1024 == 0 {
		for g, at := range l.dispatched {
			if now.Sub(at) > keep {
				delete(l.dispatched, g)
			}
		}
	}
}

// try runs one claim try, stamps the jobs it returns with when it was sent
// (ClaimedJob.LeaseBase: the database stamped lease_until after that, so a
// lease counted from it ends no later than the database's) unless the store
// stamped them with the later moment it sent the statement that stamped the
// lease, and remembers a failed try: whether it committed is unknown.
func (l *lostClaims) try(fn func() ([]jobq.ClaimedJob, error)) ([]jobq.ClaimedJob, error) {
	began := time.Now()
	jobs, err := fn()
	for i := range jobs {
		if jobs[i].LeaseBase.IsZero() || jobs[i].LeaseBase.Before(began) {
			jobs[i].LeaseBase = began
		}
	}
	if err != nil && l != nil {
		l.mu.Lock()
		if l.since.IsZero() || began.Before(l.since) {
			l.since = began
		}
		l.mu.Unlock()
	}
	return jobs, err
}

// wasDispatched reports whether f was dispatched within the last keep.
func (l *lostClaims) wasDispatched(f jobq.Fence) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.dispatched[f]
	return ok
}

// failedSince returns when the earliest unreconciled failed try was sent
// (zero: none).
func (l *lostClaims) failedSince() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.since
}

// reconcile runs adopt for the remembered failed tries, if any, and forgets
// them once adopt succeeded (a failed read is tried again at the next scan).
// It returns the runs adopt dispatched. The scanner calls it while no claim
// of its own is in flight (before and after each scan's claims), so no
// failed try can come in between the read and the forgetting.
func (l *lostClaims) reconcile(ctx context.Context, adopt func(ctx context.Context, since time.Time) (int, error)) int {
	if l == nil || adopt == nil || ctx.Err() != nil {
		return 0
	}
	since := l.failedSince()
	if since.IsZero() {
		return 0
	}
	n, err := adopt(ctx, since)
	if err != nil {
		return 0
	}
	l.mu.Lock()
	l.since = time.Time{}
	l.mu.Unlock()
	return n
}

// adoptLost takes on the runs that failed claim tries sent since `since`
// committed without this replica hearing of it: every RUNNING row of its
// owner id claimed after since that its run table did not hold before the
// read. Each is dispatched like a fresh claim, its local lease counted from
// since (never later than the database's lease_until); while no worker slot
// is free it is released (WAITING, no retry spent, fenced by its attempt)
// instead. Errors: the read's.
func (s *Scheduler) adoptLost(ctx context.Context, since time.Time) (int, error) {
	known := s.runs.fences() // before the read: a run that ends meanwhile is still known
	held, err := s.store.JobHeldBy(ctx, s.cfg.Owner, time.Since(since)+lostClaimSlack)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, cj := range held {
		f := cj.Fence()
		if _, ok := known[f]; ok || s.runs.holds(f) {
			continue
		}
		if s.lost.wasDispatched(f) {
			continue // dispatched before and gone from the run table: its outcome write was given up; the rescuer's
		}
		if s.slots.reserve(1) == 0 {
			// Never started, so handed back like a run released at
			// shutdown: WAITING at once, no retry spent, its one execution
			// row RELEASED — not left unrenewed for a rescue after its
			// lease, which would spend a retry on a run that never began.
			s.log.Warn("a claim committed although its answer was lost; no worker slot is free, so the job is released",
				"component", "scanner", "job_id", cj.ID, "attempt", cj.Attempt)
			s.lost.noteDispatch(f, 4*s.cfg.Lease) // handled: a later reconcile must not release it again
			s.completer.submit(jobq.Completion{Fence: f, JobType: cj.JobType, Outcome: jobq.OutcomeReleased,
				Error: "released: its claim's answer was lost and no worker slot was free", DueAt: cj.RunAt,
				ConcurrencyKey: cj.ConcurrencyKey})
			continue
		}
		cj.LeaseBase = since
		s.log.Warn("took on a run whose claim committed although its answer was lost",
			"component", "scanner", "job_id", cj.ID, "attempt", cj.Attempt)
		s.emit(Event{Kind: EventAdopted, Fence: f})
		s.disp.dispatch(cj)
		n++
	}
	return n, nil
}
