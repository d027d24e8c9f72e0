package scheduler

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/storeerr"
)

// stallWait bounds the waits below (a hang, not a timing assertion).
const stallWait = 2 * time.Minute

// slowRenewStore is the real store whose first renewal answers only after
// hold (a slow database); later ones at once.
type slowRenewStore struct {
	heartbeatStore
	hold  time.Duration
	calls atomic.Int64
}

func (s *slowRenewStore) LeaseRenewMany(ctx context.Context, p jobq.LeaseRenewParams) ([]uint64, error) {
	if s.calls.Add(1) == 1 {
		select {
		case <-time.After(s.hold):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.heartbeatStore.LeaseRenewMany(ctx, p)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// stallHeartbeat is a heartbeat over one run claimed on a real database,
// renewing through a slowRenewStore that holds its first renewal for hold.
func stallHeartbeat(t *testing.T, hold, lease, interval time.Duration, log *slog.Logger) (*heartbeat, *slowRenewStore, *eventLog) {
	t.Helper()
	db := testdb.Store(t)
	submitJob(t, db, "stall")
	cj := claimAll(t, db, "stall-owner", lease)[0]
	st := &slowRenewStore{heartbeatStore: db, hold: hold}
	runs := newRunTable()
	_, cancel := context.WithCancelCause(context.Background())
	r := &run{job: &Job{ClaimedJob: jobq.ClaimedJob{ID: cj.ID, Attempt: cj.Attempt}}, cancel: cancel, leaseDeadline: firstLeaseDeadline(time.Time{}, lease)}
	runs.add(r, time.Hour, func() {})
	events := &eventLog{}
	h := newHeartbeat(heartbeatParams{
		Store: st, Runs: runs, Owner: "stall-owner", Lease: lease, Interval: interval,
		Retry: testRetrier(), Log: log, Events: events.emitter(),
	})
	return h, st, events
}

// A heartbeat the runtime did not run when its timer was due — held here
// for a second, past the Lease/5 threshold plus an interval, as a starved
// CPU or a SIGSTOP would hold it — says so: it counts the stall and logs a
// WARN with the measured delay, which is at least the hold less one
// interval (a slower machine only makes it later).
func TestHeartbeatReportsItsOwnStall(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	const lease, interval, hold = 2 * time.Second, 250 * time.Millisecond, time.Second
	h, _, events := stallHeartbeat(t, 0, lease, interval, slog.New(slog.NewJSONHandler(&logs, nil)))
	var once sync.Once
	h.testHold = func() { once.Do(func() { time.Sleep(hold) }) } // the injected stall itself (not a wait of the test)
	startService(t, h)
	late := events.next(t, EventHeartbeatStall, stallWait).Duration
	if late < hold-interval {
		t.Fatalf("stall measured %s, want at least %s (held %s, interval %s)", late, hold-interval, hold, interval)
	}
	if n := events.count(EventHeartbeatStall); n < 1 {
		t.Fatalf("Stalls = %d, want ≥ 1", n)
	}
	events.next(t, EventRenewed, stallWait) // the late beat still renews
	out := logs.String()
	if !strings.Contains(out, `"msg":"heartbeat ran late`) || !strings.Contains(out, `"late_ms":`) || !strings.Contains(out, `"runs":1`) {
		t.Fatalf("log = %s; want a WARN 'heartbeat ran late' with late_ms and runs", out)
	}
	t.Logf("stall measured %s", late)
}

// A beat that takes long because the database is slow is not a stall: the
// next beat is due when the slow one ends, not an interval after it began.
// The renewal here takes 3 s against a 2 s stall threshold (lease 10 s):
// measuring from the slow beat's start would report a stall of about 3 s.
func TestSlowRenewalIsNotAStall(t *testing.T) {
	t.Parallel()
	const lease, interval = 10 * time.Second, 100 * time.Millisecond
	h, st, events := stallHeartbeat(t, 3*time.Second, lease, interval, discardLog())
	startService(t, h)
	for st.calls.Load() < 3 {
		events.next(t, EventRenewed, stallWait)
	}
	if n := events.count(EventHeartbeatStall); n != 0 {
		t.Fatalf("Stalls = %d after a slow renewal, want 0 (threshold %s)", n, heartbeatStallThreshold(lease))
	}
}

// The threshold is the lease guard's margin, and a beat late by exactly
// that much is not yet a stall.
func TestCheckStallThreshold(t *testing.T) {
	const lease = 2 * time.Second
	h, _, events := stallHeartbeat(t, 0, lease, time.Second, discardLog())
	h.checkStall(leaseGuardMargin(lease))
	if n := events.count(EventHeartbeatStall); n != 0 {
		t.Fatalf("Stalls = %d at the threshold, want 0", n)
	}
	h.checkStall(leaseGuardMargin(lease) + time.Millisecond)
	if n := events.count(EventHeartbeatStall); n != 1 {
		t.Fatalf("Stalls = %d past the threshold, want 1", n)
	}
}

// An outcome write given up because its runs' lease deadline passed while
// it retried a transient error says so (pastLeaseDeadlineError, which the
// chaos checker reads as "the database did not commit it in time"); one
// not retried at all (a permanent error, as the testbed's deadlock-retry
// sabotage marks every error) does not.
func TestOutcomeWriteGivenUpPastTheDeadlineSaysSo(t *testing.T) {
	t.Parallel()
	deadlock := storeerr.Mark(&mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}, storeerr.KindConflict, "deadlock")
	runs := newRunTable()
	f := jobq.Fence{ID: 1, Attempt: 1}
	runs.add(&run{job: &Job{ClaimedJob: jobq.ClaimedJob{ID: 1, Attempt: 1}}, cancel: func(error) {}, leaseDeadline: time.Now().Add(300 * time.Millisecond)}, time.Hour, func() {})
	w := outcomeWriter{Runs: runs, Lease: time.Second, Retry: testRetrier(), Log: discardLog()}
	err := w.write("complete", []jobq.Fence{f}, func(context.Context) error { return deadlock })
	var pd *pastLeaseDeadlineError
	if !errors.As(err, &pd) || pd.tries < 2 || !errors.Is(err, deadlock) {
		t.Fatalf("err = %v (%T), want a pastLeaseDeadlineError after several tries wrapping the deadlock", err, err)
	}
	permanent := storeerr.Mark(deadlock, storeerr.KindPermanent, "deadlock")
	err = w.write("complete", []jobq.Fence{f}, func(context.Context) error { return permanent })
	if errors.As(err, &pd) || !errors.Is(err, deadlock) {
		t.Fatalf("err = %v (%T) without retries, want the deadlock itself", err, err)
	}
}
