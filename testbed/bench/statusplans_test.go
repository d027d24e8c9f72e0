package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/jobq/jobq/internal/testdb"
)

// handlerReads is the session's total of Handler_read_* counters: the index
// and table entries the server read for the session's statements.
func handlerReads(ctx context.Context, t *testing.T, c *sql.Conn) int64 {
	t.Helper()
	rows, err := c.QueryContext(ctx, "SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sum
}

// statusPlanTable fills job_queue with 200,000 SUCCESS noop jobs, a WAITING
// backlog of 20,000 "big" jobs, 30 expired RUNNING "big" runs owned by a
// worker, 20 FAILED noop jobs, and a limited keyed type "keyed" with 50,000
// PARKED jobs (one key, one slot) next to 5 WAITING ones; then ANALYZE.
func statusPlanTable(ctx context.Context, t *testing.T, db *sql.DB) {
	t.Helper()
	ins := func(n int, prefix, jobType, status, extraCols, extraVals string) {
		t.Helper()
		q := fmt.Sprintf(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, max_retry,
			timeout_ms, run_at, attempt, create_time, update_time%s)
			SELECT CONCAT('%s', seq), '%s', '{}', REPEAT('0', 64), '%s', 0, 3, 0, NOW(6) - INTERVAL 1 HOUR, 0, NOW(6), NOW(6)%s
			FROM seq_1_to_%d`, extraCols, prefix, jobType, status, extraVals, n)
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("insert %s: %v", prefix, err)
		}
	}
	ins(200000, "s-", "noop", "SUCCESS", ", finished_at", ", NOW(6) - INTERVAL 1 DAY")
	ins(20000, "w-", "big", "WAITING", "", "")
	ins(30, "r-", "big", "RUNNING", ", owner, started_at, lease_until", ", 'worker:w1', NOW(6) - INTERVAL 2 HOUR, NOW(6) - INTERVAL 1 MINUTE")
	ins(20, "f-", "noop", "FAILED", ", finished_at", ", NOW(6)")
	ins(50000, "p-", "keyed", "PARKED", ", concurrency_key", ", 'k1'")
	ins(5, "kw-", "keyed", "WAITING", ", concurrency_key", ", 'k1'")
	for _, q := range []string{
		"INSERT INTO job_type_control (job_type, max_running, update_time) VALUES ('big', 50, NOW(6)), ('keyed', 50, NOW(6))",
		"ANALYZE TABLE job_queue",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestStatusReadsBounded runs every reader of idx_lease and idx_type_status
// (and the stats counts) on a 270,000-row table and checks the entries each
// reads against the rows it is about: a read by status of a few RUNNING or
// FAILED jobs must not walk the SUCCESS rows, and a limited keyed type's
// claim and probe must not walk its PARKED backlog, which migration 021
// indexes as WAITING in idx_type_status.
func TestStatusReadsBounded(t *testing.T) {
	ctx := context.Background()
	st := testdb.Store(t)
	db := st.DB()
	statusPlanTable(ctx, t, db)
	qs, err := SchedulerQueries()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, q := range qs {
		byName[q.Name] = q.SQL
	}
	var maxID int64
	if err := db.QueryRowContext(ctx, "SELECT MAX(id) + 1 FROM job_queue").Scan(&maxID); err != nil {
		t.Fatal(err)
	}
	before := fmt.Sprint(maxID)
	cases := []struct {
		name string
		args map[string]string
		max  int64 // entries the read may take: about the rows it is about
	}{
		{"JobRescueCandidates", map[string]string{"?": "100"}, 200},
		{"JobListByStatus", map[string]string{"index_status": "'FAILED'", "status": "'FAILED'", "before_id": before, "?": "50"}, 200},
		{"JobListRunningByType", map[string]string{"job_type": "'big'", "before_id": before, "?": "50"}, 200},
		{"WorkerRunsInFlight", map[string]string{}, 200},
		{"ActivityRunningOwners", map[string]string{}, 200},
		{"AlertRunningSince", map[string]string{"job_type": "'big'", "cutoff": "NOW(6)"}, 200},
		{"JobCountRunningByType", map[string]string{"?": "'big'"}, 200},
		{"StatsCountRunningByType", map[string]string{}, 400},
		{"TypeProbe", map[string]string{"job_type": "'big'", "lane": "0"}, 400},
		{"JobIDsByStatus", map[string]string{"index_status": "'FAILED'", "status": "'FAILED'", "after_id": "0", "?": "100"}, 200},
		// The keyed type: 5 WAITING jobs, 50,000 PARKED ones.
		{"TypeProbe", map[string]string{"job_type": "'keyed'", "lane": "0"}, 400},
		{"JobLockAvailableByType", map[string]string{"job_type": "'keyed'", "lane": "0", "?": "10"}, 400},
		{"JobLockAvailableByTypeSkipLocked", map[string]string{"job_type": "'keyed'", "lane": "0", "?": "10"}, 400},
		{"JobListByTypeStatus", map[string]string{"job_type": "'keyed'", "type_status": "'WAITING'", "status": "'WAITING'", "before_id": before, "?": "50"}, 400},
		{"JobListByTypeStatus", map[string]string{"job_type": "'keyed'", "type_status": "'PARKED'", "status": "'PARKED'", "before_id": before, "?": "50"}, 400},
		{"JobListParked", map[string]string{"before_id": before, "?": "50"}, 400},
		// The newest page of WAITING jobs: the optimizer walks the primary
		// key back from the newest job (or reads idx_scan's WAITING range),
		// here past the 50,000 PARKED jobs, the newest ids of the table —
		// bounded by the jobs newer than the page, as before migration 021.
		{"JobListWaiting", map[string]string{"before_id": before, "?": "50"}, 50000 + 400},
	}
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	base := handlerReads(ctx, t, c)
	base = handlerReads(ctx, t, c) - base // the cost of SHOW STATUS itself
	for _, tc := range cases {
		q, ok := byName[tc.name]
		if !ok {
			t.Fatalf("query %s not in sql/queries", tc.name)
		}
		text, err := Bind(q, "", tc.args)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		plan, err := Explain(ctx, db, text)
		if err != nil {
			t.Fatalf("%s: explain: %v", tc.name, err)
		}
		tx, err := c.BeginTx(ctx, nil) // the locking reads need a transaction
		if err != nil {
			t.Fatal(err)
		}
		r0 := handlerReads(ctx, t, c)
		rows, err := tx.QueryContext(ctx, text)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		rows.Close()
		read := handlerReads(ctx, t, c) - r0 - base
		_ = tx.Rollback()
		var keys []string
		for _, p := range plan {
			keys = append(keys, fmt.Sprintf("%s:%s/%s rows=%d %s", p.Table, p.Type, p.Key, p.Rows, p.Extra))
		}
		t.Logf("%s %v: %d rows returned, %d entries read; plan %s", tc.name, tc.args["job_type"], n, read, strings.Join(keys, "; "))
		if read > tc.max {
			t.Errorf("%s (job_type %s): read %d entries for %d rows returned, want at most %d; plan %s",
				tc.name, tc.args["job_type"], read, n, tc.max, strings.Join(keys, "; "))
		}
	}
}
