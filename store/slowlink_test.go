package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// A lease renewal is one round trip: on a link with +300ms per round trip
// (toxiproxy, 150ms each way) renewing 20 runs takes less than 1.5 round
// trips, and renews all 20. It was a transaction of four (BEGIN, a locking
// read, the UPDATE, COMMIT) that held the rows across two of them, where the
// replica's own completions waited.
func TestLeaseRenewIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	const n, oneWay = 20, 150 * time.Millisecond
	dsn := testdb.DSN(t)
	fast, err := store.Open(context.Background(), dsn, store.PoolConfig{MaxOpen: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	ids := make([]uint64, n)
	for i := range n {
		submitJob(t, fast, fmt.Sprintf("rt-%d", i), "t", 0)
		ids[i] = claimOne(t, fast, "a", 30*time.Second).ID
	}
	link, slowDSN := testdb.SlowLink(t, dsn)
	slow, err := store.Open(context.Background(), slowDSN, store.PoolConfig{MaxOpen: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	ctx := context.Background()
	p := jobq.LeaseRenewParams{Owner: "a", Lease: time.Minute, IDs: ids}
	// The first renewal opens the heartbeat's session (its settings are
	// sent once per session, not per renewal).
	if got, err := slow.LeaseRenewMany(ctx, p); err != nil || len(got) != n {
		t.Fatalf("first renewal: %d renewed, %v; want %d", len(got), err, n)
	}
	link.Latency(t, oneWay)
	start := time.Now()
	got, err := slow.LeaseRenewMany(ctx, p)
	took := time.Since(start)
	if err != nil || len(got) != n {
		t.Fatalf("renewal on the slow link: %d renewed, %v; want %d", len(got), err, n)
	}
	rtt := 2 * oneWay
	t.Logf("renewal of %d runs on a link with %s per round trip took %s (%.2f round trips); measured round trip %s",
		n, rtt, took.Round(time.Millisecond), float64(took)/float64(rtt), slow.RoundTrip().Round(time.Millisecond))
	if took > rtt*3/2 {
		t.Fatalf("renewal took %s on a link with %s per round trip, want < 1.5 round trips (one statement)", took, rtt)
	}
}

// Ready's budget follows the measured round trip: on a link with +800ms per
// round trip, a check of three statements takes ~2.4s — more than the 2s
// the HTTP and gRPC health checks give it — and still passes, every time.
// /readyz flapped to 503 "schema check: context deadline exceeded" on such a
// link.
func TestReadyBudgetFollowsMeasuredRoundTrip(t *testing.T) {
	t.Parallel()
	const oneWay = 400 * time.Millisecond
	dsn := testdb.DSN(t)
	link, slowDSN := testdb.SlowLink(t, dsn)
	link.Latency(t, oneWay)
	slow, err := store.Open(context.Background(), slowDSN, store.PoolConfig{MaxOpen: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // what /readyz gives it
		start := time.Now()
		err := slow.Ready(ctx)
		cancel()
		t.Logf("check %d on a link with %s per round trip: %s, %v (measured round trip %s)",
			i+1, 2*oneWay, time.Since(start).Round(time.Millisecond), err, slow.RoundTrip().Round(time.Millisecond))
		if err != nil {
			t.Fatalf("check %d: %v, want ready", i+1, err)
		}
	}
}

// Releases in one completion batch are written with one statement per
// table, each row fenced by its attempt: every live run goes back to
// WAITING without spending a retry with one RELEASED execution row, and a
// stale release in the batch (its job re-claimed) is refused exactly, the
// others still applied.
func TestReleasesBatchedAndFenced(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	var cs []jobq.Completion
	for i := range 5 {
		submitJob(t, st, fmt.Sprintf("rel-%d", i), "t", 3)
		c := claimOne(t, st, "a", 30*time.Second)
		cs = append(cs, jobq.Completion{Fence: c.Fence(), Outcome: jobq.OutcomeReleased, Error: "given back"})
	}
	// The last run is stale: its job was released and re-claimed meanwhile.
	if _, err := st.DB().Exec("UPDATE job_queue SET attempt = attempt + 1 WHERE id = ?", cs[4].ID); err != nil {
		t.Fatal(err)
	}
	applied, err := st.JobCompleteMany(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range applied {
		if want := i < 4; a != want {
			t.Fatalf("applied %v, want the first 4 only", applied)
		}
	}
	for _, c := range cs[:4] {
		j := jobRow(t, st, c.ID)
		if j.Status != jobq.StateWaiting || j.RetryTimes != 0 || j.Attempt != 1 {
			t.Fatalf("job %d: %s retry_times %d attempt %d, want WAITING 0 1", c.ID, j.Status, j.RetryTimes, j.Attempt)
		}
	}
	if n := countRows(t, st, "SELECT COUNT(*) FROM job_attempt WHERE outcome = 'RELEASED' AND error = 'given back' AND attempt = 1"); n != 4 {
		t.Fatalf("%d RELEASED execution rows, want 4", n)
	}
	if j := jobRow(t, st, cs[4].ID); j.Status != jobq.StateRunning || j.Attempt != 2 {
		t.Fatalf("stale run's job: %s attempt %d, want RUNNING 2 (untouched)", j.Status, j.Attempt)
	}
}

func countRows(t *testing.T, st *store.Store, q string) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
