package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// On a server without idle_transaction_timeout (the MySQL dialect forced
// here: the pool's sessions get none, as on MySQL) a frozen holder keeps
// its job rows locked and the rescue skips them; the IdleTxReaper ends its
// session once it has been idle in the transaction for IdleFor, the rescue
// then goes through, and the frozen COMMIT fails instead of committing.
func TestIdleTxReaperFreesAFrozenHoldersRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, testdb.DSN(t), store.PoolConfig{MaxOpen: 4, IdleTxTimeout: time.Second, ForceMySQLDialect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testdb.ServerWide(t, st, "jobq_test_innodb_trx_watch")
	if st.IdleTxTimeout != 0 || st.Server.MariaDB || st.Server.InsertReturning {
		t.Fatalf("forced MySQL dialect: IdleTxTimeout %v, MariaDB %v, InsertReturning %v; want 0, false, false",
			st.IdleTxTimeout, st.Server.MariaDB, st.Server.InsertReturning)
	}
	id := submitJob(t, st, "frozen", "t", 3)
	c := claimOne(t, st, "a", 30*time.Second)
	expireLease(t, st, id)
	frozen, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Rollback()
	if _, err := frozen.ExecContext(ctx, "UPDATE job_queue SET status = 'SUCCESS', finished_at = NOW(6) WHERE id = ? AND attempt = ?", id, c.Attempt); err != nil {
		t.Fatal(err)
	}
	var frozenID uint64
	if err := frozen.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&frozenID); err != nil {
		t.Fatal(err)
	}
	var sessionTimeout int
	if err := frozen.QueryRowContext(ctx, "SELECT @@session.idle_transaction_timeout").Scan(&sessionTimeout); err != nil || sessionTimeout != 0 {
		t.Fatalf("frozen session's idle_transaction_timeout = %d (%v), want 0 (off)", sessionTimeout, err)
	}
	if ok, err := st.JobRescueExpired(ctx, c.Fence()); err != nil || ok {
		t.Fatalf("rescue while the frozen transaction holds the row: ok=%v err=%v; want skipped", ok, err)
	}
	r := &store.IdleTxReaper{Store: st, IdleFor: time.Second}
	// A pass before the holder has been idle for IdleFor kills nothing.
	if res := r.ReapOnce(ctx); res.Err != nil || len(res.Killed) != 0 {
		t.Fatalf("early pass: %+v, want nothing killed", res)
	}
	// Then the reaper's own loop, as jobq serve runs it (a pass every
	// 100 ms here), each pass reporting what it did (OnReapFunc): the first
	// report of a pass that ended a session is waited for. The bound only
	// stops a broken build from hanging the suite.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	reports := make(chan store.ReapResult)
	r.Interval = 100 * time.Millisecond
	r.OnReapFunc = func(res store.ReapResult) {
		select {
		case reports <- res:
		case <-runCtx.Done():
		}
	}
	go r.Run(runCtx)
	var res store.ReapResult
	passes := 0
	for deadline := time.After(30 * time.Second); len(res.Killed) == 0; passes++ {
		select {
		case res = <-reports:
		case <-deadline:
			t.Fatal("the reaper never ended the frozen session")
		}
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	stop()
	if !slices.Equal(res.Killed, []uint64{frozenID}) || len(res.Refused) != 0 {
		t.Fatalf("killed %v refused %v, want only the frozen session %d", res.Killed, res.Refused, frozenID)
	}
	// The server rolls the killed session's transaction back after KILL
	// returns: the rescue (which skips locked rows) is retried until that
	// rollback has released the row — a poll of the database's lock, bounded
	// so a broken build cannot hang the suite.
	var ok bool
	for deadline := time.Now().Add(10 * time.Second); ; {
		ok, err = st.JobRescueExpired(ctx, c.Fence())
		if err != nil || ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the row lock's release
	}
	if err != nil || !ok {
		t.Fatalf("rescue after the reaper: ok=%v err=%v; want rescued", ok, err)
	}
	if j := jobRow(t, st, id); j.Status != "WAITING" || j.RetryTimes != 1 {
		t.Fatalf("after the rescue: status %s, retry_times %d; want WAITING, 1", j.Status, j.RetryTimes)
	}
	if err := frozen.Commit(); err == nil {
		t.Fatal("the frozen transaction committed after the reaper ended it")
	} else if k := store.Classify(err); k != store.KindUnavailable {
		t.Fatalf("frozen COMMIT error %v classified %v, want unavailable", err, k)
	}
	t.Logf("freed after %d passes", passes)
}

// Poke runs a pass at once however long Interval is, and pokes made while
// one waits make one pass.
func TestIdleTxReaperPassesOnPoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	passes := make(chan store.ReapResult, 4)
	r := &store.IdleTxReaper{Store: st, IdleFor: time.Second, Interval: time.Hour,
		OnReapFunc: func(res store.ReapResult) { passes <- res }}
	r.Poke()
	r.Poke() // one pass for both: the first waits
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(runCtx) }()
	select {
	case res := <-passes:
		if res.Err != nil || len(res.Killed) != 0 {
			t.Fatalf("poked pass: %+v, want nothing killed, no error", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no pass after Poke (Interval is an hour)")
	}
	r.Poke()
	select {
	case <-passes:
	case <-time.After(30 * time.Second):
		t.Fatal("no pass after the second Poke")
	}
	stop()
	<-done
	if n := len(passes); n != 0 {
		t.Fatalf("%d passes more than the pokes asked", n)
	}
}
