package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/dbprovider"
)

// Env is the harness's own database: created on the provided server,
// migrated, and dropped by Close unless kept.
type Env struct {
	DSN    string  // names the bench database
	Admin  *sql.DB // the harness's own pool (seeding, reset, status, EXPLAIN)
	Server store.ServerInfo
	// BaseID is the highest job id of the pre-loaded terminal rows; Reset
	// deletes every job above it, so each point starts from the same table.
	BaseID    uint64
	TableRows int // terminal rows pre-loaded
	drop      func() error
	seq       int
}

// NewEnv creates database bench_<random> on srv and migrates it.
func NewEnv(ctx context.Context, srv *dbprovider.Server) (*Env, error) {
	dsn, drop, err := srv.CreateDatabase(ctx, "jobq_bench")
	if err != nil {
		return nil, fmt.Errorf("create bench database: %w", err)
	}
	st, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 8})
	if err != nil {
		_ = drop()
		return nil, err
	}
	if _, err := st.MigrateUp(ctx); err != nil {
		st.Close()
		_ = drop()
		return nil, err
	}
	return &Env{DSN: dsn, Admin: st.DB(), Server: st.Server, drop: drop}, nil
}

// Close closes the pool and drops the database.
func (e *Env) Close() error {
	e.Admin.Close()
	if e.drop == nil {
		return nil
	}
	return e.drop()
}

// digits is a 0…999 row source for multi-row INSERT … SELECT that works on
// MySQL 8 and MariaDB (recursion depth 999 is under both servers' limits).
const digits = `WITH RECURSIVE d(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM d WHERE n < 999) `

// insertRows inserts n rows with one multi-row INSERT … SELECT per 1,000,000
// rows: job_key = prefix + number, status and run_at as given (SQL
// expressions of the row number k).
func (e *Env) insertRows(ctx context.Context, n int, prefix, statusExpr, runAtExpr, finishedExpr, jobType string) error {
	for off := 0; off < n; off += 1000000 {
		chunk := min(n-off, 1000000)
		q := `INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, max_retry,
			timeout_ms, run_at, attempt, started_at, finished_at, create_time, update_time) ` + digits + `
			SELECT CONCAT(?, k), ?, '{}', REPEAT('0', 64), ` + statusExpr + `, 0, 3, 0, ` + runAtExpr + `,
			IF(` + statusExpr + ` = 'WAITING', 0, 1), ` + finishedExpr + `, ` + finishedExpr + `, NOW(6), NOW(6)
			FROM (SELECT a.n * 1000 + b.n + ? AS k FROM d a CROSS JOIN d b WHERE a.n * 1000 + b.n < ?) AS s`
		if _, err := e.Admin.ExecContext(ctx, q, prefix, jobType, off, chunk); err != nil {
			return fmt.Errorf("insert %d rows: %w", chunk, err)
		}
	}
	return nil
}

// Preload inserts rows terminal jobs (9 in 10 SUCCESS, 1 in 10 FAILED, due
// and finished a day ago) so later points run against a table of that size,
// and records BaseID. Call it on an empty table; it is cumulative otherwise.
func (e *Env) Preload(ctx context.Context, rows int) error {
	if err := e.Reset(ctx); err != nil {
		return err
	}
	add := rows - e.TableRows
	if add > 0 {
		if err := e.insertRows(ctx, add, fmt.Sprintf("pre%d-", e.TableRows), "IF(k % 10 = 0, 'FAILED', 'SUCCESS')",
			"NOW(6) - INTERVAL 1 DAY", "NOW(6) - INTERVAL 1 DAY", "noop"); err != nil {
			return err
		}
		if _, err := e.Admin.ExecContext(ctx, "ANALYZE TABLE job_queue"); err != nil {
			return fmt.Errorf("analyze: %w", err)
		}
	}
	e.TableRows = rows
	return e.Admin.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM job_queue").Scan(&e.BaseID)
}

// Seed inserts n WAITING noop jobs due now, in one statement, and returns
// their job_key prefix.
func (e *Env) Seed(ctx context.Context, n int) (string, error) {
	e.seq++
	prefix := "b" + strconv.Itoa(e.seq) + "-"
	if n == 0 {
		return prefix, nil
	}
	return prefix, e.insertRows(ctx, n, prefix, "'WAITING'", "NOW(6)", "NULL", "noop")
}

// Reset deletes every job above BaseID and every execution row, so the
// next point starts from the pre-loaded table alone.
func (e *Env) Reset(ctx context.Context) error {
	var deleted int64
	for {
		res, err := e.Admin.ExecContext(ctx, "DELETE FROM job_queue WHERE id > ? LIMIT 50000", e.BaseID)
		if err != nil {
			return fmt.Errorf("reset: %w", err)
		}
		n, _ := res.RowsAffected()
		deleted += n
		if n < 50000 {
			break
		}
	}
	if _, err := e.Admin.ExecContext(ctx, "DELETE FROM job_execution"); err != nil {
		return fmt.Errorf("reset executions: %w", err)
	}
	if deleted > 0 {
		e.waitPurge(ctx)
	}
	return nil
}

// Purge wait bounds: the history list length counted as purged, how long
// to wait at most, and how often to look.
const (
	purgedHistory = 1000
	purgeWaitMax  = 15 * time.Second
	purgePoll     = 100 * time.Millisecond
)

// waitPurge waits (at most purgeWaitMax) until InnoDB purged the deleted
// rows: until then their delete-marked idx_scan entries sit in the WAITING
// range and every scan and claim walks over them, which would charge the
// next point for the previous one's leftovers. It reads the history list
// length (INNODB_METRICS trx_rseg_history_len, MySQL and MariaDB); the
// length is server-wide, so other clients' transactions can keep it up
// until the time bound. Servers without the metric are not waited for.
func (e *Env) waitPurge(ctx context.Context) {
	deadline := time.Now().Add(purgeWaitMax)
	for time.Now().Before(deadline) {
		var n int64
		err := e.Admin.QueryRowContext(ctx, `SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'`).Scan(&n)
		if err != nil || n < purgedHistory || !sleepCtx(ctx, purgePoll) {
			return
		}
	}
}

// Remaining counts SCHEDULED, WAITING or RUNNING jobs above BaseID.
func (e *Env) Remaining(ctx context.Context) (int, error) {
	var n int
	err := e.Admin.QueryRowContext(ctx, `SELECT COUNT(*) FROM job_queue WHERE status IN ('SCHEDULED', 'WAITING', 'RUNNING') AND id > ?`, e.BaseID).Scan(&n)
	return n, err
}

// Pickups returns started_at − run_at (database clock) of the terminal jobs
// whose job_key starts with prefix.
func (e *Env) Pickups(ctx context.Context, prefix string) ([]time.Duration, error) {
	rows, err := e.Admin.QueryContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, run_at, started_at) FROM job_queue
		WHERE job_key LIKE CONCAT(?, '%') AND started_at IS NOT NULL`, prefix)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []time.Duration
	for rows.Next() {
		var us int64
		if err := rows.Scan(&us); err != nil {
			return nil, err
		}
		out = append(out, time.Duration(us)*time.Microsecond)
	}
	return out, rows.Err()
}

// GlobalStatus is a snapshot of SHOW GLOBAL STATUS counters the report uses.
type GlobalStatus map[string]int64

// statusNames are the counters read: statements (Questions, Com_*), rows
// read through handlers (Handler_read_*) and by InnoDB (Innodb_rows_read),
// and row-lock waits (Innodb_row_lock_waits, Innodb_row_lock_time in ms).
var statusNames = []string{"Questions", "Com_select", "Com_update", "Com_insert", "Com_insert_select", "Com_delete",
	"Com_commit", "Com_begin", "Handler_read_first", "Handler_read_key", "Handler_read_next", "Handler_read_prev",
	"Handler_read_rnd", "Handler_read_rnd_next", "Innodb_rows_read", "Handler_commit",
	"Innodb_row_lock_waits", "Innodb_row_lock_time", "Innodb_data_fsyncs", "Innodb_deadlocks",
	"Innodb_buffer_pool_reads", "Innodb_buffer_pool_pages_flushed", "Innodb_log_waits", "Innodb_rows_updated", "Handler_update"}

// ReadStatus reads the global counters.
func ReadStatus(ctx context.Context, db *sql.DB) (GlobalStatus, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('"+strings.Join(statusNames, "','")+"')")
	if err != nil {
		return nil, fmt.Errorf("show global status: %w", err)
	}
	defer rows.Close()
	out := GlobalStatus{}
	for rows.Next() {
		var name, val string
		if err := rows.Scan(&name, &val); err != nil {
			return nil, err
		}
		v, _ := strconv.ParseInt(val, 10, 64)
		out[name] = v
	}
	return out, rows.Err()
}

// Sub returns s − before per counter.
func (s GlobalStatus) Sub(before GlobalStatus) GlobalStatus {
	out := GlobalStatus{}
	for k, v := range s {
		out[k] = v - before[k]
	}
	return out
}

// RowsExamined sums the Handler_read_* counters: index and table rows the
// server read.
func (s GlobalStatus) RowsExamined() int64 {
	var n int64
	for k, v := range s {
		if strings.HasPrefix(k, "Handler_read_") {
			n += v
		}
	}
	return n
}
