package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// A replica frozen inside a transaction (SIGSTOP, a paused VM, a partition
// without a TCP reset) holds the job's row lock; the rescuer skips locked
// rows, so without a server-side bound the job would stay RUNNING until the
// server's wait_timeout (8 h by default). With PoolConfig.IdleTxTimeout the
// server ends the frozen session and rolls its transaction back: the rescue
// goes through, and the frozen process's COMMIT, when it wakes, fails with
// a transient (lost connection) error rather than committing.
func TestFrozenTransactionDoesNotHoldOffRescue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, testdb.DSN(t), store.PoolConfig{MaxOpen: 4, IdleTxTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Server.MariaDB {
		if st.IdleTxTimeout != 0 {
			t.Fatalf("IdleTxTimeout = %v on %s, want 0 (MySQL has no idle_transaction_timeout)", st.IdleTxTimeout, st.Server.Description)
		}
		t.Skipf("%s has no idle_transaction_timeout", st.Server.Description)
	}
	if st.IdleTxTimeout != 2*time.Second {
		t.Fatalf("IdleTxTimeout = %v, want 2s (1.5 s rounded up to whole seconds)", st.IdleTxTimeout)
	}
	var secs int
	if err := st.DB().QueryRowContext(ctx, "SELECT @@session.idle_transaction_timeout").Scan(&secs); err != nil || secs != 2 {
		t.Fatalf("pooled session's idle_transaction_timeout = %d (err %v), want 2", secs, err)
	}

	id := submitJob(t, st, "frozen", "t", 3)
	c := claimOne(t, st, "a", 30*time.Second)
	expireLease(t, st, id) // its holder stopped renewing
	// The holder had started its outcome write and froze before COMMIT.
	frozen, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Rollback()
	if _, err := frozen.ExecContext(ctx, "UPDATE job_queue SET status = 'SUCCESS', finished_at = NOW(6) WHERE id = ? AND attempt = ?", id, c.Attempt); err != nil {
		t.Fatal(err)
	}
	// While the frozen session lives, the rescuer skips the locked row.
	if ok, err := st.JobRescueExpired(ctx, c.Fence()); err != nil || ok {
		t.Fatalf("rescue while the frozen transaction holds the row: ok=%v err=%v; want skipped", ok, err)
	}
	// Then the server ends it: a locking read of the row waits for the
	// frozen transaction's lock and gets it once the server has rolled that
	// transaction back (its lock wait bounded at 2 min, which only stops a
	// broken build from hanging the suite). The rescue then goes through.
	var got uint64
	if err := st.DB().QueryRowContext(ctx, "SET STATEMENT innodb_lock_wait_timeout = 120 FOR SELECT id FROM job_queue WHERE id = ? FOR UPDATE", id).Scan(&got); err != nil {
		t.Fatalf("the frozen transaction still holds the row after 2 min: the server never ended it (%v)", err)
	}
	if ok, err := st.JobRescueExpired(ctx, c.Fence()); err != nil || !ok {
		t.Fatalf("rescue once the server ended the frozen transaction: ok=%v err=%v; want rescued", ok, err)
	}
	j := jobRow(t, st, id)
	if j.Status != "WAITING" || j.RetryTimes != 1 {
		t.Fatalf("after the rescue: status %s, retry_times %d; want WAITING, 1", j.Status, j.RetryTimes)
	}
	// The frozen process wakes up: its transaction is gone, and its COMMIT
	// fails with an error the outcome writer retries (and the attempt
	// fence then refuses) instead of committing SUCCESS.
	err = frozen.Commit()
	if err == nil {
		t.Fatal("the frozen transaction committed after the server should have ended it")
	}
	if k := store.Classify(err); k != store.KindUnavailable {
		t.Fatalf("frozen COMMIT error %v classified %v, want unavailable (transient)", err, k)
	}
	if j := jobRow(t, st, id); j.Status != "WAITING" {
		t.Fatalf("after the frozen COMMIT: status %s, want WAITING", j.Status)
	}
}
