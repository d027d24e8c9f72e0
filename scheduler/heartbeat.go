package scheduler

import (
	"context"
	"time"

	"github.com/jobq/jobq"
)

// heartbeat renews every in-flight lease in one statement each
// HeartbeatInterval. A run that no longer holds its job (rescued, re-claimed)
// has its handler cancelled with ErrLeaseLost; a run whose cancel was
// requested gets ErrCancelRequested; and when renewals keep failing (or
// hang), each handler is cancelled before its lease can run out: by the
// beat that finds the next one would come too late, or at the latest by the
// run's guard timer, Lease/5 before the local lease deadline.
type heartbeat struct {
	s      *Scheduler
	stopCh chan struct{}
	done   chan struct{}
}

func newHeartbeat(s *Scheduler) *heartbeat {
	return &heartbeat{s: s, stopCh: make(chan struct{}), done: make(chan struct{})}
}

func (h *heartbeat) stop() {
	close(h.stopCh)
	<-h.done
}

func (h *heartbeat) run() {
	defer close(h.done)
	t := time.NewTicker(h.s.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-h.stopCh:
			return
		case <-t.C:
			h.beat()
		}
	}
}

func (h *heartbeat) beat() {
	s := h.s
	s.mu.Lock()
	runs := make([]*run, 0, len(s.runs))
	seen := map[uint64]bool{}
	ids := make([]uint64, 0, len(s.runs))
	for _, r := range s.runs {
		if r.lost {
			continue
		}
		runs = append(runs, r)
		if !seen[r.job.ID] {
			seen[r.job.ID] = true
			ids = append(ids, r.job.ID)
		}
	}
	s.mu.Unlock()
	if len(runs) == 0 {
		return
	}
	sent := time.Now()
	// The renewal and the fence read may take as long as a lease can still
	// be saved: until the latest run's guard would fire (lease deadline −
	// Lease/5), not one interval. A renewal queued behind a slow peer's locks
	// or a brief outage still lands; the guard cancels handlers in time.
	ctx, cancel := context.WithDeadline(context.Background(), h.renewDeadline(runs, sent))
	defer cancel()
	var n int64
	err := s.dbRetry(ctx, "lease.renew", 0, func() error {
		var e error
		n, e = s.store.LeaseRenewMany(ctx, jobq.LeaseRenewParams{Owner: s.cfg.Owner, Lease: s.cfg.Lease, IDs: ids})
		return e
	})
	if err != nil {
		s.stats.heartbeatFails.Add(1)
		s.log.Warn("lease renewal failed", "component", "heartbeat", "runs", len(runs), "err", err)
		h.expireUnrenewed(runs)
		return
	}
	if int(n) == len(runs) {
		h.renewed(runs, sent)
		return
	}
	var states []jobq.FenceState
	err = s.dbRetry(ctx, "lease.fence_states", 0, func() error {
		var e error
		states, e = s.store.JobFenceStates(ctx, ids)
		return e
	})
	if err != nil {
		s.stats.heartbeatFails.Add(1)
		s.log.Warn("fence state read failed", "component", "heartbeat", "err", err)
		h.expireUnrenewed(runs)
		return
	}
	byID := make(map[uint64]jobq.FenceState, len(states))
	for _, st := range states {
		byID[st.ID] = st
	}
	var kept []*run
	for _, r := range runs {
		st, ok := byID[r.job.ID]
		holds := ok && st.Status == jobq.StateRunning && st.Owner == s.cfg.Owner && st.Attempt == r.job.Attempt
		switch {
		case !holds:
			h.lose(r)
		case st.CancelRequested:
			r.cancel(ErrCancelRequested)
		default:
			kept = append(kept, r)
		}
	}
	h.renewed(kept, sent)
}

// renewDeadline is the latest lease deadline among runs minus Lease/5, and
// at least one HeartbeatInterval after now.
func (h *heartbeat) renewDeadline(runs []*run, now time.Time) time.Time {
	d := now.Add(h.s.cfg.HeartbeatInterval)
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	for _, r := range runs {
		d = later(d, r.leaseDeadline.Add(-h.s.cfg.Lease/5))
	}
	return d
}

func (h *heartbeat) renewed(runs []*run, sent time.Time) {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	for _, r := range runs {
		r.leaseDeadline = sent.Add(h.s.cfg.Lease)
		if !r.lost {
			r.guard.Reset(h.s.leaseGuardDelay(r.leaseDeadline))
		}
	}
}

// leaseGuardDelay is how long from now a run's guard waits: until Lease/5
// before its local lease deadline. The margin
// covers the claim's own latency (a run's first deadline is counted from
// dispatch, after the database set lease_until) and the handler's time to
// notice its cancelled context.
func (s *Scheduler) leaseGuardDelay(deadline time.Time) time.Duration {
	return time.Until(deadline) - s.cfg.Lease/5
}

// guardFired runs when no renewal moved a run's lease deadline in time —
// renewals failing, or hanging like an unreachable database, which would
// otherwise hold the heartbeat past the deadline — and cancels the handler
// while its lease is still valid.
func (h *heartbeat) guardFired(r *run) {
	h.s.mu.Lock()
	finished := r.finished
	h.s.mu.Unlock()
	if finished { // no handler to cancel; keep renewing while the outcome is written
		return
	}
	h.s.log.Warn("no lease renewal succeeded in time; cancelling the handler before its lease expires",
		"component", "heartbeat", "job_id", r.job.ID, "attempt", r.job.Attempt)
	h.lose(r)
}

// expireUnrenewed cancels handlers whose lease would run out before the
// next heartbeat could renew it.
func (h *heartbeat) expireUnrenewed(runs []*run) {
	next := time.Now().Add(h.s.cfg.HeartbeatInterval)
	for _, r := range runs {
		h.s.mu.Lock()
		expiring := next.After(r.leaseDeadline) && !r.finished
		h.s.mu.Unlock()
		if expiring {
			h.lose(r)
		}
	}
}

func (h *heartbeat) lose(r *run) {
	s := h.s
	s.mu.Lock()
	if r.lost || s.runs[r.job.Fence()] != r { // already lost, or finished
		s.mu.Unlock()
		return
	}
	r.lost = true
	s.mu.Unlock()
	s.stats.leaseLost.Add(1)
	s.log.Warn("run lost its lease; cancelling its handler", "component", "heartbeat", "job_id", r.job.ID, "attempt", r.job.Attempt)
	if !s.cfg.Sabotage.NoLeaseCancel {
		r.cancel(ErrLeaseLost)
	}
	if s.cfg.Hooks.LeaseLostFunc != nil {
		s.cfg.Hooks.LeaseLostFunc(r.job.Fence())
	}
}
