package app

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"
	"time"

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
