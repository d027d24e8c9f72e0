package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// busyRenewStore renews every run but busy, whose row another transaction
// holds (store.LeaseRenewMany skips it), and reports every run still held
// by owner.
type busyRenewStore struct {
	owner string
	busy  uint64
}

func (s *busyRenewStore) LeaseRenewMany(_ context.Context, p jobq.LeaseRenewParams) ([]uint64, error) {
	var out []uint64
	for _, id := range p.IDs {
		if id != s.busy {
			out = append(out, id)
		}
	}
	return out, nil
}

func (s *busyRenewStore) JobFenceStates(_ context.Context, ids []uint64) ([]jobq.FenceState, error) {
	out := make([]jobq.FenceState, len(ids))
	for i, id := range ids {
		out[i] = jobq.FenceState{ID: id, Attempt: 1, Status: jobq.StateRunning, Owner: s.owner}
	}
	return out, nil
}

// A run whose row was busy during a beat (its own outcome write, a rescuer
// holding it) is neither lost nor renewed: it keeps its lease deadline, so
// its guard still fires in time if its row stays busy, while the other runs
// are renewed.
func TestBusyRowIsNotRenewedNorLost(t *testing.T) {
	t.Parallel()
	const lease = 6 * time.Second
	runs := newRunTable()
	start := firstLeaseDeadline(time.Time{}, lease)
	var cancelled atomic.Int64
	mk := func(id uint64) *run {
		r := &run{job: &Job{ID: id, Attempt: 1}, cancel: func(error) { cancelled.Add(1) }, leaseDeadline: start}
		runs.add(r, time.Hour, func() {})
		return r
	}
	busy, free := mk(1), mk(2)
	h := newHeartbeat(heartbeatParams{
		Store: &busyRenewStore{owner: "o", busy: busy.job.ID}, Runs: runs, Owner: "o", Lease: lease, Interval: lease / 3,
		Retry: testRetrier(), Log: discardLog(), Fails: new(atomic.Int64), Stalls: new(atomic.Int64), LeaseLost: new(atomic.Int64),
	})
	time.Sleep(10 * time.Millisecond)
	if n := h.beat(context.Background()); n != 1 {
		t.Fatalf("beat renewed %d runs, want 1 (the free one)", n)
	}
	if lost, c := h.p.LeaseLost.Load(), cancelled.Load(); lost != 0 || c != 0 {
		t.Fatalf("LeaseLost = %d, cancels = %d; want 0 (a busy row is still held)", lost, c)
	}
	if !busy.leaseDeadline.Equal(start) {
		t.Errorf("busy run's deadline moved to %v; want it kept at %v", busy.leaseDeadline, start)
	}
	if !free.leaseDeadline.After(start) {
		t.Errorf("free run's deadline %v; want renewed past %v", free.leaseDeadline, start)
	}
}
