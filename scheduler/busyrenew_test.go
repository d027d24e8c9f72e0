package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
)

// A run whose row was busy during a beat (its own outcome write, a rescuer
// holding it) is neither lost nor renewed: it keeps its lease deadline, so
// its guard still fires in time if its row stays busy, while the other runs
// are renewed. The busy row is held here by a real transaction's FOR UPDATE.
func TestBusyRowIsNotRenewedNorLost(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	const lease = 6 * time.Second
	submitJob(t, st, "busy")
	submitJob(t, st, "free")
	claimed := claimAll(t, st, "o", lease)
	if len(claimed) != 2 {
		t.Fatalf("claimed %d jobs, want 2", len(claimed))
	}
	runs := newRunTable()
	// A deadline counted from a second ago: any renewal sent now moves it.
	start := firstLeaseDeadline(time.Now().Add(-time.Second), lease)
	var cancelled atomic.Int64
	mk := func(i int) *run {
		r := &run{job: &Job{ClaimedJob: jobq.ClaimedJob{ID: claimed[i].ID, Attempt: claimed[i].Attempt}}, cancel: func(error) { cancelled.Add(1) }, leaseDeadline: start}
		runs.add(r, time.Hour, func() {})
		return r
	}
	busy, free := mk(0), mk(1)
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT id FROM job_queue WHERE id = ? FOR UPDATE", busy.job.ID); err != nil {
		t.Fatal(err)
	}
	events := &eventLog{}
	h := newHeartbeat(heartbeatParams{
		Store: st, Runs: runs, Owner: "o", Lease: lease, Interval: lease / 3,
		Retry: testRetrier(), Log: discardLog(), Events: events.emitter(),
	})
	if n := h.beat(ctx); n != 1 {
		t.Fatalf("beat renewed %d runs, want 1 (the free one)", n)
	}
	if lost, c := events.count(EventLeaseLost), cancelled.Load(); lost != 0 || c != 0 {
		t.Fatalf("LeaseLost = %d, cancels = %d; want 0 (a busy row is still held)", lost, c)
	}
	if !busy.leaseDeadline.Equal(start) {
		t.Errorf("busy run's deadline moved to %v; want it kept at %v", busy.leaseDeadline, start)
	}
	if !free.leaseDeadline.After(start) {
		t.Errorf("free run's deadline %v; want renewed past %v", free.leaseDeadline, start)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := h.beat(ctx); n != 2 {
		t.Fatalf("beat after the row was freed renewed %d runs, want 2", n)
	}
	if !busy.leaseDeadline.After(start) {
		t.Errorf("busy run's deadline %v after its row was freed; want renewed past %v", busy.leaseDeadline, start)
	}
}
