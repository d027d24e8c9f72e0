package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// gatePair opens two stores on one fresh database with jobs due jobs, and
// holds a claim of first inside its transaction, after its locking read,
// until the returned release is called: the held claim keeps its claim
// slot (and its rows) the whole time. held is closed once it is held.
func gatePair(t *testing.T, jobs, slots int) (first, second *store.Store, held <-chan []jobq.ClaimedJob, release func()) {
	t.Helper()
	first, second, _, held, release = gatePairDSN(t, jobs, slots)
	return first, second, held, release
}

// gatePairDSN is gatePair that also returns the database's DSN.
func gatePairDSN(t *testing.T, jobs, slots int) (first, second *store.Store, dsn string, held <-chan []jobq.ClaimedJob, release func()) {
	t.Helper()
	ctx := context.Background()
	dsn = testdb.DSN(t)
	first, second = storesOn(t, dsn, 8), storesOn(t, dsn, 8)
	for i := range jobs {
		if _, _, err := first.JobSubmit(ctx, jobq.SubmitParams{JobKey: fmt.Sprintf("g%d", i), JobType: "t", Params: `{}`, RequestHash: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	locked := make(chan struct{})
	unblock := make(chan struct{})
	store.SetAfterClaimLock(first, func(context.Context, *sql.Tx) {
		close(locked)
		<-unblock
	})
	out := make(chan []jobq.ClaimedJob, 1)
	go func() {
		got, err := first.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "a", Limit: jobs / 2, Lease: time.Minute, Slots: slots})
		if err != nil {
			t.Errorf("held claim: %v", err)
		}
		out <- got
	}()
	<-locked
	var once bool
	release = func() {
		if !once {
			once = true
			close(unblock)
		}
	}
	t.Cleanup(release)
	return first, second, dsn, out, release
}

// storePair opens two stores of maxOpen connections each on one fresh
// database, as two replicas of it.
func storePair(t *testing.T, maxOpen int) (a, b *store.Store) {
	t.Helper()
	dsn := testdb.DSN(t)
	return storesOn(t, dsn, maxOpen), storesOn(t, dsn, maxOpen)
}

// storesOn opens a store of maxOpen connections on dsn, closed at cleanup.
func storesOn(t *testing.T, dsn string, maxOpen int, mysqlDialect ...bool) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), dsn, store.PoolConfig{MaxOpen: maxOpen, ForceMySQLDialect: len(mysqlDialect) > 0 && mysqlDialect[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// takeSlot reports which claim slot below slots a fresh transaction of st
// gets without waiting (-1: none free).
func takeSlot(t *testing.T, st *store.Store, slots int) int {
	t.Helper()
	ctx := context.Background()
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	got, err := jobqdb.New(tx).ClaimSlotTake(ctx, uint16(slots))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		return -1
	}
	return int(got[0])
}

// A held claim holds its claim slot: the next free one is the one after
// it, and with one slot a second claim waits for the first's COMMIT, takes
// the slot then (not the ungated path after the wait) and claims the jobs
// the first left.
func TestClaimGateHoldsASlotPerClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, second, held, release := gatePair(t, 20, 1)
	if s := takeSlot(t, second, 1); s != -1 {
		t.Fatalf("slot %d free while a claim holds the only one", s)
	}
	if s := takeSlot(t, second, 4); s != 1 {
		t.Fatalf("next free slot %d while a claim holds slot 0, want 1", s)
	}
	// Long enough that the wait cannot end before the release below.
	store.SetClaimSlotWait(second, time.Minute)
	secondLocked := make(chan struct{})
	secondGo := make(chan struct{})
	store.SetAfterClaimLock(second, func(context.Context, *sql.Tx) {
		close(secondLocked)
		<-secondGo
	})
	done := make(chan []jobq.ClaimedJob, 1)
	var waits []bool // timedOut of each reported wait
	go func() {
		got, err := second.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "b", Limit: 20, Lease: time.Minute, Slots: 1,
			OnSlotWait: func(_ time.Duration, timedOut bool) { waits = append(waits, timedOut) }})
		if err != nil {
			t.Errorf("second claim: %v", err)
		}
		done <- got
	}()
	waitSlotWaiter(t, second)
	release()
	a := <-held
	<-secondLocked
	// The second claim holds slot 0 now, inside its transaction.
	if s := takeSlot(t, second, 1); s != -1 {
		t.Fatalf("slot %d free while the second claim runs: it did not take the slot it waited for", s)
	}
	close(secondGo)
	b := <-done
	if len(waits) != 1 || waits[0] {
		t.Errorf("slot waits reported %v, want one that acquired the slot", waits)
	}
	if len(a) != 10 || len(b) != 10 {
		t.Fatalf("claimed %d then %d jobs, want 10 and the other 10", len(a), len(b))
	}
	ids := map[uint64]bool{}
	for _, j := range slices.Concat(a, b) {
		if ids[j.ID] {
			t.Fatalf("job %d claimed twice", j.ID)
		}
		ids[j.ID] = true
	}
}

// A claim that finds every slot held waits ClaimSlotWait, then claims
// without a slot (a holder may be frozen mid-claim), the held claim's rows
// skipped as always.
func TestClaimGateWaitEndsAndClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, second, held, release := gatePair(t, 20, 1)
	start := time.Now()
	var reported []time.Duration
	got, err := second.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "b", Limit: 20, Lease: time.Minute, Slots: 1,
		OnSlotWait: func(d time.Duration, timedOut bool) {
			if timedOut {
				reported = append(reported, d)
			}
		}})
	waited := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("claimed %d jobs past a held slot, want the 10 the held claim left", len(got))
	}
	if waited < store.ClaimSlotWait {
		t.Fatalf("claimed after %s, before the slot wait (%s) ended", waited, store.ClaimSlotWait)
	}
	if len(reported) != 1 || reported[0] < store.ClaimSlotWait {
		t.Errorf("timed-out waits reported %v, want one of at least %s", reported, store.ClaimSlotWait)
	}
	release()
	if a := <-held; len(a) != 10 {
		t.Fatalf("held claim got %d jobs, want 10", len(a))
	}
}

// Slots 0 takes no slot: a claim held mid-transaction leaves slot 0 free.
func TestClaimGateOff(t *testing.T) {
	t.Parallel()
	_, second, held, release := gatePair(t, 4, 0)
	if s := takeSlot(t, second, 1); s != 0 {
		t.Fatalf("slot 0 taken (%d) by a claim without a gate", s)
	}
	release()
	if a := <-held; len(a) != 2 {
		t.Fatalf("claimed %d, want 2", len(a))
	}
}

// waitSlotWaiter returns once a connection of st's database is in the
// claim gate's wait (its statement in information_schema.PROCESSLIST),
// failing after 30 s.
func waitSlotWaiter(t *testing.T, st *store.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var n int
		err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND INFO LIKE '%SELECT slot FROM claim_gate WHERE slot = % FOR UPDATE%'`).Scan(&n)
		if err != nil {
			t.Fatalf("waiting for a claim in the slot wait: %v", err)
		}
		if n > 0 {
			return
		}
	}
}

// A claim whose connection dies while it holds a claim slot (KILL of its
// connection: a crashed replica, a cut link) gives the slot back with its
// rolled-back transaction: a peer's claim waiting for the only slot takes
// it then (not after its wait, which here outlasts the claim's context)
// and claims every job, the dead claim's locked rows included.
func TestClaimGateKilledClaimFreesItsSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first, second := storePair(t, 8)
	const jobs = 20
	for i := range jobs {
		if _, _, err := first.JobSubmit(ctx, jobq.SubmitParams{JobKey: fmt.Sprintf("k%d", i), JobType: "t", Params: `{}`, RequestHash: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	connID := make(chan int64, 1)
	unblock := make(chan struct{})
	store.SetAfterClaimLock(first, func(ctx context.Context, tx *sql.Tx) {
		var id int64
		if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Errorf("connection id: %v", err)
		}
		connID <- id
		<-unblock
	})
	firstDone := make(chan error, 1)
	go func() {
		got, err := first.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "a", Limit: jobs / 2, Lease: time.Minute, Slots: 1})
		if len(got) != 0 {
			t.Errorf("the killed claim returned %d jobs", len(got))
		}
		firstDone <- err
	}()
	id := <-connID
	store.SetClaimSlotWait(second, time.Hour)
	holding := make(chan int, 1)
	store.SetAfterClaimLock(second, func(context.Context, *sql.Tx) { holding <- takeSlot(t, second, 1) })
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done := make(chan []jobq.ClaimedJob, 1)
	go func() {
		got, err := second.JobClaimSkipLocked(wctx, jobq.ClaimParams{Owner: "b", Limit: jobs, Lease: time.Minute, Slots: 1})
		if err != nil {
			t.Errorf("peer claim after the kill: %v", err)
		}
		done <- got
	}()
	waitSlotWaiter(t, second)
	if _, err := second.DB().ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
		t.Fatal(err)
	}
	if s := <-holding; s != -1 {
		t.Fatalf("slot %d free while the peer's claim runs: it claimed without the slot the dead claim left", s)
	}
	if got := <-done; len(got) != jobs {
		t.Fatalf("peer claimed %d jobs after the kill, want all %d", len(got), jobs)
	}
	close(unblock)
	if err := <-firstDone; err == nil {
		t.Fatal("the killed claim reported no error")
	}
}

// The limited-type claim, a remote worker's fetch and the cas claim take no
// claim slot and never wait for one: with the only slot held (and a slot
// wait that would outlast the claims' context) each claims its jobs.
func TestClaimGateOtherClaimsTakeNoSlot(t *testing.T) {
	t.Parallel()
	_, second, held, release := gatePair(t, 0, 1)
	store.SetClaimSlotWait(second, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	second.SetRemoteTypes([]string{"r"})
	for i, typ := range []string{"l", "l", "r", "r", "c", "c"} {
		if _, _, err := second.JobSubmit(ctx, jobq.SubmitParams{JobKey: fmt.Sprintf("o%d", i), JobType: typ, Params: `{}`, RequestHash: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := second.TypeSetLimit(ctx, "l", 5); err != nil {
		t.Fatal(err)
	}
	limited, err := second.JobClaimLimited(ctx, "l", jobq.ClaimParams{Owner: "b", Limit: 5, Lease: time.Minute, Slots: 1})
	if err != nil || len(limited) != 2 {
		t.Fatalf("limited-type claim with the only slot held: %d jobs, %v; want 2", len(limited), err)
	}
	remote, err := second.JobClaimRemote(ctx, jobq.RemoteClaimParams{Owner: "worker:w", Types: []string{"r"}, Limit: 5, Lease: time.Minute, Nonce: []byte("n")})
	if err != nil || len(remote) != 2 {
		t.Fatalf("remote fetch with the only slot held: %d jobs, %v; want 2", len(remote), err)
	}
	cands, err := second.JobScanAvailable(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	cas, _, err := second.JobClaimCAS(ctx, jobq.ClaimCASParams{ClaimParams: jobq.ClaimParams{Owner: "b", Limit: 10, Lease: time.Minute, Slots: 1}, Candidates: cands})
	if err != nil || len(cas) != 2 {
		t.Fatalf("cas claim with the only slot held: %d jobs, %v; want 2", len(cas), err)
	}
	if s := takeSlot(t, second, 1); s != -1 {
		t.Fatalf("slot %d free: the held claim lost it", s)
	}
	release()
	<-held
}

// A claim whose context ends while it waits for a claim slot (a stopping
// replica) returns at once with the context's error, not at the end of
// the wait, and claims nothing; the store's next claim takes the slot once
// it is free and claims the jobs.
func TestClaimGateWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	_, second, held, release := gatePair(t, 20, 1)
	store.SetClaimSlotWait(second, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		got, err := second.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "b", Limit: 20, Lease: time.Minute, Slots: 1})
		if len(got) != 0 {
			t.Errorf("a cancelled claim claimed %d jobs", len(got))
		}
		done <- err
	}()
	waitSlotWaiter(t, second)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("claim cancelled in its slot wait: %v, want context.Canceled", err)
	}
	release()
	if a := <-held; len(a) != 10 {
		t.Fatalf("held claim got %d jobs, want 10", len(a))
	}
	got, err := second.JobClaimSkipLocked(context.Background(), jobq.ClaimParams{Owner: "b", Limit: 20, Lease: time.Minute, Slots: 1})
	if err != nil || len(got) != 10 {
		t.Fatalf("claim after the cancelled one: %d jobs, %v; want the 10 left", len(got), err)
	}
}
