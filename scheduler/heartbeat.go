package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/storeerr"
)

// heartbeatStore is what the heartbeat needs from the store.
type heartbeatStore interface {
	LeaseRenewMany(ctx context.Context, p jobq.LeaseRenewParams) ([]uint64, error)
	JobFenceStates(ctx context.Context, ids []uint64) ([]jobq.FenceState, error)
}

// heartbeatParams configures the heartbeat.
type heartbeatParams struct {
	Store    heartbeatStore
	Runs     *runTable
	Owner    string
	Lease    time.Duration
	Interval time.Duration // Config.HeartbeatInterval

	Retry  dbRetrier
	Log    *slog.Logger
	Events emitter // EventRenewed, EventRenewalFailed, EventHeartbeatStall, EventLeaseLost
}

// heartbeat renews every in-flight lease in one statement each Interval. A
// run that no longer holds its job (rescued, re-claimed) has its handler
// cancelled with ErrLeaseLost; a run whose cancel was requested gets
// ErrCancelRequested; and when renewals keep failing (or hang), each
// handler is cancelled before its lease can run out: by the beat that finds
// the next one would come too late, or at the latest by the run's guard
// timer, leaseGuardMargin before the local lease deadline.
type heartbeat struct {
	loopService
	p heartbeatParams
	// testHold, when set, runs before each wait for the next beat: a test
	// holds the loop there as a starved CPU would.
	testHold func()
	// wake asks for a beat now (renewSoon).
	wake chan struct{}
}

func newHeartbeat(p heartbeatParams) *heartbeat {
	return &heartbeat{p: p, wake: make(chan struct{}, 1)}
}

// renewSoon asks for a beat now when a run was just added whose guard would
// fire within 2 × Interval: the next scheduled beat may come an Interval
// later and take up to an Interval to land. That is a run whose claim took
// long to answer (its local lease counts from when the claim was sent): on
// a link with +200ms per round trip a claim of six round trips left a run
// with a 3s lease 1s before its guard, and the next beat came too late
// for 285 of 285 runs. It never blocks.
func (h *heartbeat) renewSoon(guardDelay time.Duration) {
	if guardDelay >= 2*h.p.Interval {
		return
	}
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Start runs the heartbeat until Stop. Cancelling ctx does not stop it:
// leases must be renewed while handlers finish after a soft stop.
func (h *heartbeat) Start(ctx context.Context) error {
	return h.start(context.WithoutCancel(ctx), h.run)
}

func (h *heartbeat) run(ctx context.Context) {
	// A store with a session of the heartbeat's own opens it now, so the
	// first renewal is as short as the others (store.OpenRenewSession).
	if o, ok := h.p.Store.(interface {
		OpenRenewSession(ctx context.Context, lease time.Duration) error
	}); ok {
		octx, cancel := context.WithTimeout(ctx, h.p.Lease)
		if err := o.OpenRenewSession(octx, h.p.Lease); err != nil {
			h.p.Log.Warn("could not open the heartbeat's session; the first renewal opens it", "component", "heartbeat", "err", err)
		}
		cancel()
	}
	// A timer to an instant of its own, not a ticker: a beat that runs
	// later than that instant measures how long this process was not run
	// (checkStall).
	due := time.Now().Add(h.p.Interval)
	t := time.NewTimer(h.p.Interval)
	defer t.Stop()
	for {
		if h.testHold != nil {
			h.testHold()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			began := time.Now()
			h.checkStall(began.Sub(due))
			renewed := h.beat(context.WithoutCancel(ctx))
			h.p.Events.emit(Event{Kind: EventRenewed, N: renewed})
			// The next beat is due an Interval after this one began, or at
			// once when this one took longer (a slow database is not a
			// stall: it is the renewal deadline's business).
			due = began.Add(h.p.Interval)
			if now := time.Now(); due.Before(now) {
				due = now
			}
			t.Reset(time.Until(due))
		case <-h.wake:
			// A beat out of schedule for runs that would otherwise be
			// renewed too late; the next scheduled beat stays where it is.
			renewed := h.beat(context.WithoutCancel(ctx))
			h.p.Events.emit(Event{Kind: EventRenewed, N: renewed})
		}
	}
}

// checkStall reports a beat that began late by more than
// heartbeatStallThreshold: the Go runtime did not run the heartbeat when
// its timer was due — a CPU-starved machine, a stopped process (SIGSTOP,
// a VM pause) or a long stop-the-world pause. Such a stall can cost runs
// their leases with no database trouble at all, so it is logged (with the
// measured delay; the stall is the interval of that length ending at the
// log line) and counted (jobq_heartbeat_stalls_total).
func (h *heartbeat) checkStall(late time.Duration) {
	if late <= heartbeatStallThreshold(h.p.Lease) {
		return
	}
	h.p.Events.emit(Event{Kind: EventHeartbeatStall, Duration: late})
	h.p.Log.Warn("heartbeat ran late: this process was not scheduled in time (CPU starvation, a stop or a long pause); leases may have expired meanwhile",
		"component", "heartbeat", "late_ms", late.Milliseconds(), "lease_ms", h.p.Lease.Milliseconds(), "runs", h.p.Runs.len())
}

// beat renews the live runs' leases and returns how many it renewed.
func (h *heartbeat) beat(ctx context.Context) int {
	p := h.p
	runs, ids := p.Runs.live()
	if len(runs) == 0 {
		return 0
	}
	sent := time.Now()
	// The renewal and the fence read may take as long as a lease can still
	// be saved — until the latest run's guard would fire (lease deadline −
	// leaseGuardMargin), at least one Interval — not one interval: a renewal
	// queued behind a slow peer's locks or a brief outage still lands, and
	// the guards cancel handlers in time meanwhile.
	ctx, cancel := context.WithDeadline(ctx, p.Runs.latestDeadline(runs, leaseGuardMargin(p.Lease), sent.Add(p.Interval)))
	defer cancel()
	renewedIDs, err := withRetryV(ctx, p.Retry, "lease.renew", retryUntilDone, func() ([]uint64, error) {
		return p.Store.LeaseRenewMany(ctx, jobq.LeaseRenewParams{Owner: p.Owner, Lease: p.Lease, IDs: ids})
	})
	if err != nil {
		p.Events.emit(Event{Kind: EventRenewalFailed, Err: err})
		p.Log.Warn("lease renewal failed", "component", "heartbeat", "runs", len(runs), "cause", storeerr.Cause(err), "err", err)
		h.expireUnrenewed(runs)
		return 0
	}
	if len(renewedIDs) == len(runs) {
		h.renewed(runs, sent)
		return len(runs)
	}
	// Runs the renewal left out were lost, asked to cancel, or busy: their
	// row was held by another transaction (most often the run's own outcome
	// write), which the renewal skips instead of waiting for. Read who holds
	// them to tell which.
	done := make(map[uint64]bool, len(renewedIDs))
	for _, id := range renewedIDs {
		done[id] = true
	}
	var kept, rest []*run
	var restIDs []uint64
	for _, r := range runs {
		if done[r.job.ID] {
			kept = append(kept, r)
		} else {
			rest, restIDs = append(rest, r), append(restIDs, r.job.ID)
		}
	}
	states, err := withRetryV(ctx, p.Retry, "lease.fence_states", retryUntilDone, func() ([]jobq.FenceState, error) {
		return p.Store.JobFenceStates(ctx, restIDs)
	})
	if err != nil {
		p.Events.emit(Event{Kind: EventRenewalFailed, Err: err})
		p.Log.Warn("fence state read failed", "component", "heartbeat", "err", err)
		h.renewed(kept, sent)
		h.expireUnrenewed(rest)
		return len(kept)
	}
	byID := make(map[uint64]jobq.FenceState, len(states))
	for _, st := range states {
		byID[st.ID] = st
	}
	busy := 0
	for _, r := range rest {
		st, ok := byID[r.job.ID]
		holds := ok && st.Status == jobq.StateRunning && st.Owner == p.Owner && st.Attempt == r.job.Attempt
		switch {
		case !holds && p.Runs.isFinished(r):
			// Its handler returned and its outcome is being written: the
			// write just committed (a race with this read), or it will be
			// refused as stale. Nothing to cancel, and no lease was lost
			// while it worked; stop renewing it.
		case !holds:
			h.lose(r)
		case st.CancelRequested:
			r.cancel(ErrCancelRequested)
		case p.Runs.isFinished(r):
			// Its row is busy with its own outcome write: nothing to renew
			// for a handler, the write ends the run.
		default:
			// Still held, but its row was busy: not renewed by this beat
			// (its lease deadline and guard stay as they were); the next
			// beat tries again. A run whose handler has not returned needs
			// its lease: say so, as a failed renewal.
			busy++
		}
	}
	if busy > 0 {
		p.Events.emit(Event{Kind: EventRenewalFailed, N: busy, Err: errRowsBusy})
		p.Log.Warn("lease renewal skipped runs whose row another transaction holds; their leases were not renewed by this beat",
			"component", "heartbeat", "runs", busy, "renewed", len(kept))
	}
	h.renewed(kept, sent)
	return len(kept)
}

// errRowsBusy is the Err of the EventRenewalFailed of a beat that skipped
// runs whose row another transaction held.
var errRowsBusy = errors.New("lease renewal skipped runs whose row another transaction holds")

// renewed moves the runs' lease deadlines to sent+Lease (sent is when the
// renewal statement was sent, so the estimate stays before lease_until).
func (h *heartbeat) renewed(runs []*run, sent time.Time) {
	deadline := sent.Add(h.p.Lease)
	h.p.Runs.renewed(runs, deadline, h.guardDelay(deadline))
}

// guardDelay is how long from now a run's guard waits: until
// leaseGuardMargin before its local lease deadline.
func (h *heartbeat) guardDelay(deadline time.Time) time.Duration {
	return time.Until(deadline) - leaseGuardMargin(h.p.Lease)
}

// guardFired runs when no renewal moved a run's lease deadline in time —
// renewals failing, or hanging like an unreachable database, which would
// otherwise hold the heartbeat past the deadline — and cancels the handler
// while its lease is still valid.
func (h *heartbeat) guardFired(r *run) {
	if h.p.Runs.isFinished(r) { // no handler to cancel; keep renewing while the outcome is written
		return
	}
	h.p.Log.Warn("no lease renewal succeeded in time; cancelling the handler before its lease expires",
		"component", "heartbeat", "job_id", r.job.ID, "attempt", r.job.Attempt)
	h.lose(r)
}

// expireUnrenewed cancels handlers whose lease would run out before the
// next heartbeat could renew it.
func (h *heartbeat) expireUnrenewed(runs []*run) {
	next := time.Now().Add(h.p.Interval)
	for _, r := range runs {
		if h.p.Runs.expiresBefore(r, next) {
			h.lose(r)
		}
	}
}

func (h *heartbeat) lose(r *run) {
	p := h.p
	if !p.Runs.markLost(r) { // already lost, or finished
		return
	}
	p.Log.Warn("run lost its lease; cancelling its handler", "component", "heartbeat", "job_id", r.job.ID, "attempt", r.job.Attempt)
	r.cancel(ErrLeaseLost)
	p.Events.emit(Event{Kind: EventLeaseLost, Fence: r.job.Fence()})
}
