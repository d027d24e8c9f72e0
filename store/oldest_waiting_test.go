package store_test

import (
	"context"
	"testing"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// OldestWaitingAge finds the longest-due WAITING job in index dives per
// (lane, priority) group of idx_scan, not per job: 30,000 due WAITING jobs
// in 6 groups, a group whose jobs are not due yet (a writer's clock ahead)
// and SCHEDULED jobs due longer ago (not WAITING: not counted). Measured in
// rows the server read for the call (Handler_read_* of the only pooled
// session), and checked against the same age read the slow way (every
// WAITING row).
func TestOldestWaitingAgeDivesPerGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, testdb.DSN(t), store.PoolConfig{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db := st.DB()
	age := func() int64 {
		t.Helper()
		got, err := store.OldestWaitingAge(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	insert := func(rows string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, `INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, lane, run_at, create_time, update_time) `+rows); err != nil {
			t.Fatal(err)
		}
	}
	if got := age(); got != -1 {
		t.Fatalf("empty queue: age %d, want -1", got)
	}
	// Not due yet: a WAITING group alone with no due job.
	insert(`SELECT CONCAT('ahead-', seq), 'noop', '{}', 'h', 'WAITING', 7, 0, NOW(6) + INTERVAL 1 HOUR, NOW(6), NOW(6) FROM seq_1_to_500`)
	if got := age(); got != -1 {
		t.Fatalf("no WAITING job due: age %d, want -1", got)
	}
	insert(`SELECT CONCAT('w-', seq), 'noop', '{}', 'h', 'WAITING', ELT(1 + seq % 3, 0, 5, 1000), seq % 2, NOW(6) - INTERVAL seq SECOND, NOW(6), NOW(6) FROM seq_1_to_30000`)
	insert(`SELECT CONCAT('s-', seq), 'noop', '{}', 'h', 'SCHEDULED', 0, 0, NOW(6) - INTERVAL 1 DAY, NOW(6), NOW(6) FROM seq_1_to_100`)
	if _, err := db.ExecContext(ctx, "ANALYZE TABLE job_queue"); err != nil {
		t.Fatal(err)
	}
	var slow int64
	if err := db.QueryRowContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, MIN(run_at), NOW(6)) FROM job_queue IGNORE INDEX (idx_scan)
		WHERE status = 'WAITING' AND run_at <= NOW(6)`).Scan(&slow); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "FLUSH STATUS"); err != nil {
		t.Fatal(err)
	}
	got := age()
	reads := testdb.HandlerReads(t, db)
	// 7 groups: a dive into each and one past the last.
	if reads > 2*8 {
		t.Errorf("OldestWaitingAge read %d index entries for 7 groups of 30,500 WAITING jobs, want ≤ 16", reads)
	}
	// The slow read ran first: got is older by the time between them.
	if got < slow || got > slow+10e6 {
		t.Errorf("OldestWaitingAge = %d µs, want the slow read's %d µs (+ < 10 s)", got, slow)
	}
	t.Logf("oldest due WAITING job: %d µs, %d index entries read", got, reads)
}
