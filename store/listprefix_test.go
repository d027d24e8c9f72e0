package store_test

import (
	"context"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// A key-prefix page reads the prefix's range of uk_job_key, not the table:
// with the matching keys among the oldest rows, a walk of the primary key
// from the newest id (what the optimizer picks for ORDER BY id DESC LIMIT
// without the index hint) reads every row. Measured in rows the server
// read for the call (Handler_read_* of the only pooled session), not time.
func TestListByKeyPrefixReadsOnlyTheKeyRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, testdb.DSN(t), store.PoolConfig{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// 3,000 old jobs with the prefix, then 30,000 newer ones without it.
	const fill = `INSERT INTO job_queue (job_key, job_type, params, request_hash, status, run_at, create_time, update_time)
WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
SELECT CONCAT(?, i), 'noop', '{}', REPEAT('a', 64), 'SUCCESS', NOW(6), NOW(6), NOW(6) FROM n`
	for _, step := range []struct {
		prefix string
		n      int
	}{{"old-", 3000}, {"new-", 30000}} {
		// Both servers stop recursive CTEs at 1,000 rows by default.
		limit := "SET SESSION max_recursive_iterations = 100000"
		// The real server's name for it (Server.MariaDB is false in the
		// forced MySQL dialect; the variable is the server's own).
		if !store.ParseServerVersion(st.Server.Version).MariaDB {
			limit = "SET SESSION cte_max_recursion_depth = 100000"
		}
		if _, err := st.DB().ExecContext(ctx, limit); err != nil {
			t.Fatal(err)
		}
		if _, err := st.DB().ExecContext(ctx, fill, step.n, step.prefix); err != nil {
			t.Fatalf("fill %s: %v", step.prefix, err)
		}
	}
	if _, err := st.DB().ExecContext(ctx, "ANALYZE TABLE job_queue"); err != nil {
		t.Fatal(err)
	}
	read := func() (n int64) {
		rows, err := st.DB().QueryContext(ctx, "SHOW SESSION STATUS LIKE 'Handler_read%'")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var v int64
			if err := rows.Scan(&name, &v); err != nil {
				t.Fatal(err)
			}
			n += v
		}
		return n
	}
	for _, f := range []jobq.ListParams{{KeyPrefix: "old-", Limit: 5}, {KeyPrefix: "old-", Status: "FAILED", Limit: 5}} {
		before := read()
		jobs, _, err := st.JobList(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		// SHOW STATUS itself reads a few rows; the range holds 3,000 keys.
		got := read() - before
		want := 5
		if f.Status != "" {
			want = 0
		}
		if len(jobs) != want {
			t.Fatalf("%+v: %d jobs, want %d", f, len(jobs), want)
		}
		if got > 10000 {
			t.Fatalf("%+v: the server read %d rows for a prefix with 3,000 keys in a 33,000-row table; want the key range only (< 10,000)", f, got)
		}
		t.Logf("%+v: %d rows read", f, got)
	}
}
