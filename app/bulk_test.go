package app

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/internal/testdb"
)

// TestBulkOperationsOutliveWriteTimeout: a purge or bulk retry that takes
// longer than the server's WriteTimeout (here a row lock holds it up; on a
// table of a million jobs the batches alone take 40 s against the 30 s
// default) still gets its answer, over HTTP and Connect. The answer used to
// be dropped at the write deadline while the work went on: the caller saw an
// empty reply (curl 000, "EOF") for a purge that had happened.
func TestBulkOperationsOutliveWriteTimeout(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.DSN(t)
	r, err := Start(ctx, Config{DSN: dsn, Listen: "127.0.0.1:0", NoScheduler: true, NoUI: true,
		WriteTimeout: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	db := r.Store.DB()
	insert := func(id int, status string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, `INSERT INTO job_queue (id, job_key, job_type, params, request_hash, status, run_at,
			attempt, started_at, finished_at, create_time, update_time)
			VALUES (?, CONCAT('old-', ?), 'noop', '{}', '', ?, NOW(6) - INTERVAL 2 HOUR, 1,
			NOW(6) - INTERVAL 2 HOUR, NOW(6) - INTERVAL 2 HOUR, NOW(6) - INTERVAL 2 HOUR, NOW(6) - INTERVAL 2 HOUR)`, id, id, status); err != nil {
			t.Fatal(err)
		}
	}
	// Jobs finished two hours ago: 1 and 2 SUCCESS, 3 and 4 FAILED.
	for id, status := range map[int]string{1: "SUCCESS", 2: "SUCCESS", 3: "FAILED", 4: "FAILED"} {
		insert(id, status)
	}
	// holdRows locks ids for 1 s (3× the write timeout), so the operation
	// that needs them answers only after its write deadline would have passed.
	holdRows := func(ids ...int) {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			var got int
			if err := tx.QueryRowContext(ctx, "SELECT id FROM job_queue WHERE id = ? FOR UPDATE", id).Scan(&got); err != nil {
				t.Fatal(err)
			}
		}
		go func(tx *sql.Tx) { time.Sleep(time.Second); _ = tx.Commit() }(tx) // the injected fault: rows held for a second (not a wait of the test)
	}
	base := "http://" + r.Addr
	hc, gc := client.New(base), client.NewGRPC(base)
	defer gc.Close()

	holdRows(3, 4)
	rr, err := hc.RetryBulk(ctx, apitype.RetryBulkRequest{Status: "FAILED"})
	if err != nil || rr.Retried != 2 {
		t.Errorf("HTTP bulk retry: %+v, %v; want 2 retried and its answer", rr, err)
	}
	holdRows(1)
	res, err := hc.Purge(ctx, "1h")
	if err != nil || res.Jobs != 2 {
		t.Errorf("HTTP purge: %+v, %v; want jobs 1 and 2 purged and its answer", res, err)
	}
	insert(5, "SUCCESS")
	holdRows(5)
	res, err = gc.Purge(ctx, "1h")
	if err != nil || res.Jobs != 1 {
		t.Errorf("Connect purge: %+v, %v; want job 5 purged and its answer", res, err)
	}
}
