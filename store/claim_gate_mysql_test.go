package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/store"
)

// mysqlWaiter opens a store in the MySQL dialect with one connection on
// dsn (so every statement of it runs on the one session the slot wait
// set), its session innodb_lock_wait_timeout set to 37 s.
func mysqlWaiter(t *testing.T, dsn string) *store.Store {
	t.Helper()
	st := storesOn(t, dsn, 1, true)
	if _, err := st.DB().ExecContext(context.Background(), "SET SESSION innodb_lock_wait_timeout = 37"); err != nil {
		t.Fatal(err)
	}
	return st
}

// sessionLockWait is the innodb_lock_wait_timeout of st's (one) session.
func sessionLockWait(t *testing.T, st *store.Store) int {
	t.Helper()
	var v int
	if err := st.DB().QueryRowContext(context.Background(), "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// In the MySQL dialect the slot wait sets the session's lock wait timeout
// around its statement and puts the previous value back: after a wait that
// timed out, and after a wait statement that failed for another reason
// (KILL QUERY: the session lives on), a later statement of the session sees
// the value it had before the claim.
func TestClaimGateMySQLPutsLockWaitBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("timed out", func(t *testing.T) {
		t.Parallel()
		_, _, dsn, held, release := gatePairDSN(t, 20, 1)
		st := mysqlWaiter(t, dsn)
		got, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "b", Limit: 20, Lease: time.Minute, Slots: 1})
		if err != nil || len(got) != 10 {
			t.Fatalf("claim past the held slot: %d jobs, %v; want 10", len(got), err)
		}
		if v := sessionLockWait(t, st); v != 37 {
			t.Fatalf("session innodb_lock_wait_timeout %d after a timed-out slot wait, want 37", v)
		}
		release()
		<-held
	})
	t.Run("killed", func(t *testing.T) {
		t.Parallel()
		holder, _, dsn, held, release := gatePairDSN(t, 20, 1)
		st := mysqlWaiter(t, dsn)
		store.SetClaimSlotWait(st, time.Hour)
		var id int64
		if err := st.DB().QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "b", Limit: 20, Lease: time.Minute, Slots: 1})
			done <- err
		}()
		waitSlotWaiter(t, holder)
		if _, err := holder.DB().ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", id)); err != nil {
			t.Fatal(err)
		}
		if err := <-done; store.ErrorNumber(err) != 1317 {
			t.Fatalf("claim whose slot wait was killed: %v, want error 1317", err)
		}
		if v := sessionLockWait(t, st); v != 37 {
			t.Fatalf("session innodb_lock_wait_timeout %d after a killed slot wait, want 37", v)
		}
		release()
		<-held
	})
}

// A claim whose context ends between the MySQL slot wait's statement and
// putting the session's lock wait timeout back (a replica stopping, a
// claim deadline) must not leave its pooled connection with the wait's 1 s
// timeout: the next statement on that session sees the value it had.
func TestClaimGateMySQLCancelledWaitPutsLockWaitBack(t *testing.T) {
	t.Parallel()
	_, _, dsn, held, release := gatePairDSN(t, 20, 1)
	st := mysqlWaiter(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store.SetAfterSlotWait(st, cancel)
	if _, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "b", Limit: 20, Lease: time.Minute, Slots: 1}); err == nil {
		t.Fatal("a claim whose context was cancelled reported no error")
	}
	if v := sessionLockWait(t, st); v != 37 {
		t.Fatalf("session innodb_lock_wait_timeout %d after a claim cancelled in its slot wait, want 37", v)
	}
	release()
	<-held
}
