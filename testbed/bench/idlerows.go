package bench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/metrics"
	"github.com/jobq/jobq/scheduler"
)

// idleRowsWindow is how long an idle replica's reads of job_queue are
// counted: two default backlog-sample intervals, so the window holds the
// sampler's statements at their real rate.
const idleRowsWindow = 2 * metrics.BacklogIntervalDefault

// measureIdleRows starts one in-process replica as `jobq serve` runs it
// (scheduler, API, console, metrics with the backlog sampler, all at their
// defaults) on the bench database as it stands, lets it settle, and
// returns the rows of job_queue the server read per second over
// idleRowsWindow, every statement of the replica included. The rows come
// from MariaDB's information_schema.TABLE_STATISTICS (userstat, switched on
// here) or MySQL's performance_schema table I/O summary; the harness itself
// does not touch job_queue meanwhile.
func (h *Harness) measureIdleRows(ctx context.Context) (float64, error) {
	cfg, err := mysql.ParseDSN(h.env.DSN)
	if err != nil {
		return 0, err
	}
	read, err := rowsReadFunc(ctx, h.env.Admin, cfg.DBName)
	if err != nil {
		return 0, fmt.Errorf("idle rows: %w", err)
	}
	// The CI subset (and a run with an idle window shorter than one sample
	// interval) has no room for 30 s: it counts over IdleWindow with the
	// sampler at twice per window, faster than its default, so its figure
	// is an upper bound of the default's.
	window, mo := idleRowsWindow, metrics.Options{}
	if h.opts.CI || h.opts.IdleWindow < metrics.BacklogIntervalDefault {
		window, mo.BacklogInterval = h.opts.IdleWindow, h.opts.IdleWindow/2
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := app.Start(ctx, app.Config{DSN: h.env.DSN, Listen: "127.0.0.1:0", Logger: quiet, Metrics: mo,
		Scheduler: scheduler.Config{ShutdownTimeout: 5 * time.Second, Logger: quiet}})
	if err != nil {
		return 0, fmt.Errorf("idle rows: start replica: %w", err)
	}
	defer r.Stop(context.Background())
	if !sleepCtx(ctx, 1500*time.Millisecond) { // start-up statements and the first sample
		return 0, ctx.Err()
	}
	r0, err := read()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if !sleepCtx(ctx, window) {
		return 0, ctx.Err()
	}
	r1, err := read()
	if err != nil {
		return 0, err
	}
	return float64(r1-r0) / time.Since(t0).Seconds(), nil
}

// rowsReadFunc returns a func reading how many rows of schema.job_queue the
// server has read so far, all sessions included.
func rowsReadFunc(ctx context.Context, db *sql.DB, schema string) (func() (int64, error), error) {
	var userstat sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.userstat").Scan(&userstat); err == nil {
		if userstat.String != "1" && userstat.String != "ON" {
			if _, err := db.ExecContext(ctx, "SET GLOBAL userstat = 1"); err != nil {
				return nil, fmt.Errorf("SET GLOBAL userstat = 1: %w", err)
			}
		}
		return func() (int64, error) {
			var n sql.NullInt64
			err := db.QueryRowContext(ctx, `SELECT SUM(ROWS_READ) FROM information_schema.TABLE_STATISTICS
				WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'job_queue'`, schema).Scan(&n)
			return n.Int64, err
		}, nil
	}
	return func() (int64, error) {
		var n sql.NullInt64
		err := db.QueryRowContext(ctx, `SELECT SUM(COUNT_FETCH) FROM performance_schema.table_io_waits_summary_by_table
			WHERE OBJECT_SCHEMA = ? AND OBJECT_NAME = 'job_queue'`, schema).Scan(&n)
		return n.Int64, err
	}, nil
}
