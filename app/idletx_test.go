package app

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
)

// The sessions of a replica started as `jobq serve` starts it (Start) carry
// idle_transaction_timeout = Lease/5 rounded up to whole seconds, so the
// server ends a session frozen inside a transaction before its locks can
// hold off the rescue of its jobs (MariaDB; MySQL has no such variable).
func TestServeSessionsCarryIdleTransactionTimeout(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		lease time.Duration
		want  int
	}{{7 * time.Second, 2}, {scheduler.LeaseDefault, int((scheduler.LeaseDefault/5 + time.Second - 1) / time.Second)}} {
		r, err := Start(ctx, Config{DSN: testdb.DSN(t), Listen: "127.0.0.1:0", NoUI: true, NoScheduler: true,
			Scheduler: scheduler.Config{Lease: c.lease}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Store.Server.MariaDB {
			r.Stop(ctx)
			t.Skipf("%s has no idle_transaction_timeout", r.Store.Server.Description)
		}
		// Every pooled session: hold two at once so both are asked.
		db := r.Store.DB()
		c1, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, conn := range []*sql.Conn{c1, c2} {
			var secs int
			if err := conn.QueryRowContext(ctx, "SELECT @@session.idle_transaction_timeout").Scan(&secs); err != nil {
				t.Fatal(err)
			}
			if secs != c.want {
				t.Fatalf("serve session %d has idle_transaction_timeout = %d s with lease %v, want %d s (Lease/5 rounded up): serve's sessions must carry idle_transaction_timeout = Lease/5",
					i, secs, c.lease, c.want)
			}
		}
		c1.Close()
		c2.Close()
		r.Stop(ctx)
	}
}

// Where the server has no idle_transaction_timeout (the MySQL dialect
// forced here) a replica with a scheduler runs the idle-transaction reaper,
// and stops it on Stop; on MariaDB it runs none (the server does the job).
func TestServeRunsTheReaperWithoutIdleTransactionTimeout(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func() *Replica {
		r, err := Start(ctx, Config{DSN: testdb.DSN(t), Listen: "127.0.0.1:0", NoUI: true, Registry: scheduler.NewRegistry(),
			Scheduler: scheduler.Config{Lease: 5 * time.Second, Logger: quiet}, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := start()
	if got := r.reaping; got != (r.Store.IdleTxTimeout == 0) {
		t.Fatalf("reaper running %v with idle_transaction_timeout %v on %s", got, r.Store.IdleTxTimeout, r.Store.Server.Description)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t.Setenv(store.ForceMySQLDialectEnv, "1")
	r = start()
	if !r.reaping || r.Store.IdleTxTimeout != 0 {
		t.Fatalf("MySQL dialect: reaper running %v, idle_transaction_timeout %v; want the reaper and none", r.reaping, r.Store.IdleTxTimeout)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// Without idle_transaction_timeout (the MySQL dialect forced) a session
// frozen inside a transaction on an expired job's row keeps the rescue off
// it; the replica's rescue pass that cannot return the run pokes the
// reaper, which ends the session once it has been idle for Lease/5 — long
// before the reaper's own interval (the lease) — and a later rescue pass
// returns the job. The wait on the rescue event is bounded by that
// interval: a rescue after it would not show the poke.
func TestReaperIsPokedByARescueThatFindsItsRowHeld(t *testing.T) {
	ctx := context.Background()
	t.Setenv(store.ForceMySQLDialectEnv, "1")
	dsn := testdb.DSN(t)
	st, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testdb.ServerWide(t, st, "jobq_test_innodb_trx_watch")
	j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: "frozen", JobType: "gone", Params: "{}", RequestHash: "frozen", MaxRetry: 3})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "frozen-replica", Limit: 1, Lease: time.Minute})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %d claimed, %v; want 1", len(cs), err)
	}
	if _, err := st.DB().ExecContext(ctx, `UPDATE job_queue SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, j.ID); err != nil {
		t.Fatal(err)
	}
	frozen, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Rollback()
	if _, err := frozen.ExecContext(ctx, "UPDATE job_queue SET finished_at = NOW(6) WHERE id = ?", j.ID); err != nil {
		t.Fatal(err)
	}

	const lease = 10 * time.Second // IdleFor 2s, the reaper's interval 10s
	rescued := make(chan struct{})
	var once sync.Once
	var skipped atomic.Int64
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := time.Now()
	r, err := Start(ctx, Config{DSN: dsn, Listen: "127.0.0.1:0", NoUI: true, NoAPI: true, Registry: scheduler.NewRegistry(), Logger: quiet,
		Scheduler: scheduler.Config{Lease: lease, RescueInterval: 100 * time.Millisecond, Logger: quiet,
			Observer: scheduler.ObserverFunc(func(e scheduler.Event) {
				if e.Kind != scheduler.EventRescued {
					return
				}
				skipped.Add(int64(e.N))
				if slices.Contains(e.Fences, cs[0].Fence()) {
					once.Do(func() { close(rescued) })
				}
			})}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop(ctx)
	if r.reaper == nil || r.reaper.Interval != lease {
		t.Fatalf("reaper %+v, want one passing every lease (%s)", r.reaper, lease)
	}
	select {
	case <-rescued:
	case <-time.After(time.Until(start.Add(lease))):
		t.Fatalf("job %d not rescued within the reaper's interval (%s): the rescue's skip did not poke it (%d skipped)", j.ID, lease, skipped.Load())
	}
	if skipped.Load() == 0 {
		t.Fatal("no rescue pass reported a skipped candidate")
	}
	if err := frozen.Commit(); err == nil {
		t.Fatal("the frozen transaction committed after the reaper ended it")
	}
	t.Logf("rescued %s after start, %d skipped candidates reported", time.Since(start).Round(time.Millisecond), skipped.Load())
}
