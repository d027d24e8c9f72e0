package metrics_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/metrics"
	"github.com/jobq/jobq/scheduler"
)

// rowsReadCounter returns a func reading the rows of schema.job_queue the
// server has read so far, all sessions and statements: MariaDB's
// information_schema.TABLE_STATISTICS (userstat, switched on here), else
// MySQL's performance_schema table I/O summary.
func rowsReadCounter(t *testing.T, db *sql.DB, schema string) func() int64 {
	t.Helper()
	var userstat sql.NullString
	if err := db.QueryRow("SELECT @@GLOBAL.userstat").Scan(&userstat); err == nil {
		if userstat.String != "1" && userstat.String != "ON" {
			if _, err := db.Exec("SET GLOBAL userstat = 1"); err != nil {
				t.Fatalf("SET GLOBAL userstat = 1: %v", err)
			}
		}
		return func() int64 {
			var n sql.NullInt64
			if err := db.QueryRow(`SELECT SUM(ROWS_READ) FROM information_schema.TABLE_STATISTICS
				WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'job_queue'`, schema).Scan(&n); err != nil {
				t.Fatalf("table statistics: %v", err)
			}
			return n.Int64
		}
	}
	return func() int64 {
		var n sql.NullInt64
		if err := db.QueryRow(`SELECT SUM(COUNT_FETCH) FROM performance_schema.table_io_waits_summary_by_table
			WHERE OBJECT_SCHEMA = ? AND OBJECT_NAME = 'job_queue'`, schema).Scan(&n); err != nil {
			t.Fatalf("performance_schema table I/O (needs MariaDB userstat or MySQL performance_schema): %v", err)
		}
		return n.Int64
	}
}

// parkJobs inserts n SCHEDULED jobs due tomorrow, keys prefix1…prefixN.
func parkJobs(t *testing.T, db *sql.DB, prefix string, n int) {
	t.Helper()
	const batch = 10000
	for done := 0; done < n; done += batch {
		k := min(batch, n-done)
		args := []any{}
		q := "INSERT INTO job_queue (job_key, job_type, params, request_hash, status, run_at, create_time, update_time) " +
			"WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?) " +
			"SELECT CONCAT(?, i + ?), 'noop', '{}', '', 'SCHEDULED', UTC_TIMESTAMP(6) + INTERVAL 1 DAY, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM seq"
		args = append(args, k, prefix, done)
		if _, err := db.Exec("SET SESSION cte_max_recursion_depth = 100000"); err != nil {
			// MariaDB names it max_recursive_iterations.
			if _, err := db.Exec("SET SESSION max_recursive_iterations = 100000"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("park jobs: %v", err)
		}
	}
}

// An idle replica's reads of job_queue, every statement included (scan
// probe, promoter, rescuer, backlog sampler, ops refresh), do not grow
// with parked jobs: measured over the same window with 10,000 and then
// 100,000 SCHEDULED jobs due tomorrow, the rows read per second stay
// within 1.5× (+50) of each other, and below what one bounded backlog
// sample a second can read (3 × BacklogCountLimit) plus 200. The sampler
// runs every second here (15× its default rate) so each window holds
// several samples; at the default 15 s the same reads cost 1/15 as much.
// An exact count read every parked row per sample: 10,000 vs 100,000 rows
// a second.
func TestIdleReplicaReadsDoNotGrowWithParkedJobs(t *testing.T) {
	t.Parallel()
	dsn := testdb.DSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // the session variables of parkJobs stay on one connection
	defer db.Close()
	r, err := app.Start(context.Background(), app.Config{
		DSN: dsn, Listen: "127.0.0.1:0", Migrate: true, Logger: quietLog(),
		Scheduler: scheduler.Config{Owner: "idle", ShutdownTimeout: time.Second, Logger: quietLog()},
		Metrics:   metrics.Options{BacklogInterval: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	rowsRead := rowsReadCounter(t, db, cfg.DBName)

	measure := func(parked int) float64 {
		// One sample that sees the parked jobs, taken here (the sampler's own
		// statement) rather than waited for; then count 5 s, in which the
		// replica's sampler (every second) and its other passes run.
		if err := r.Metrics.SampleBacklog(context.Background(), r.Store.DB()); err != nil {
			t.Fatal(err)
		}
		if got, want := sum(t, r.Metrics.Registry, "jobq_backlog_jobs", map[string]string{"status": "SCHEDULED"}), float64(min(parked, metrics.BacklogCountLimitDefault)); got < want {
			t.Fatalf("jobq_backlog_jobs{status=SCHEDULED} = %v after parking %d, want ≥ %v", got, parked, want)
		}
		ours := sum(t, r.Metrics.Registry, "jobq_backlog_sample_timestamp_seconds", nil)
		r0, t0 := rowsRead(), time.Now()
		<-time.After(5 * time.Second) // the measurement window
		r1, el := rowsRead(), time.Since(t0)
		if ts := sum(t, r.Metrics.Registry, "jobq_backlog_sample_timestamp_seconds", nil); ts <= ours {
			t.Fatalf("no backlog sample of the replica's sampler in the 5 s window (last sample at %v, ours at %v)", ts, ours)
		}
		rate := float64(r1-r0) / el.Seconds()
		t.Logf("%d parked jobs: %d rows of job_queue read in %s = %.0f rows/s", parked, r1-r0, el.Round(time.Millisecond), rate)
		return rate
	}
	parkJobs(t, db, "a", 10000)
	small := measure(10000)
	parkJobs(t, db, "b", 90000)
	large := measure(100000)
	if bound := 3*float64(metrics.BacklogCountLimitDefault) + 200; small > bound || large > bound {
		t.Errorf("rows read per second %.0f (10k parked), %.0f (100k parked): want ≤ %.0f", small, large, bound)
	}
	if large > 1.5*small+50 {
		t.Errorf("rows read per second grew with parked jobs: %.0f at 10k, %.0f at 100k", small, large)
	}
	if got := sum(t, r.Metrics.Registry, "jobq_backlog_jobs", map[string]string{"status": "SCHEDULED"}); got != metrics.BacklogCountLimitDefault {
		t.Errorf("jobq_backlog_jobs{status=SCHEDULED} = %v with 100,000 parked, want the limit %d (at least that many)", got, metrics.BacklogCountLimitDefault)
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
