package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/jobtypes"
)

// The future-jobs axis: jobs parked in the future (SCHEDULED, due in a day)
// must cost the scan, the claim and an idle replica nothing, and must not
// slow the drain of due work. For each count in Options.FutureJobs the
// harness loads that many future jobs (priorities 0–9, due a day ahead),
// then measures the rows the idle probe, the skiplocked claim's locking
// read and the promoter's probe examine (session Handler_read_*), an idle
// replica's statements per second (promoter included), and the drain of
// futureDrainJobs due jobs of mixed priorities by the headline skiplocked
// replicas, each against the same figures at 0 future jobs.

// futureDrainJobs is the due backlog drained at each point of the axis
// (a variable so the smoke test can shrink it).
var futureDrainJobs = 10000

// FuturePoint is one point of the future-jobs axis.
type FuturePoint struct {
	FutureJobs int `json:"future_jobs"`
	TableRows  int `json:"table_rows"` // terminal rows pre-loaded next to them
	// ProbeRowsExamined, LockRowsExamined and PromoterProbeRowsExamined
	// are the session Handler_read_* sums of one JobScanAvailable (LIMIT 1,
	// the idle probe), one JobLockAvailable (LIMIT 50, in a rolled-back
	// transaction) and one JobScheduledNext, each on an empty due queue
	// and measured on its second run (the first also reads persistent
	// statistics of a freshly written table).
	ProbeRowsExamined         int64 `json:"probe_rows_examined"`
	LockRowsExamined          int64 `json:"lock_rows_examined"`
	PromoterProbeRowsExamined int64 `json:"promoter_probe_rows_examined"`
	// Idle is one idle replica's cost with the future jobs present.
	Idle IdlePoint `json:"idle"`
	// IdleRowsPerSecond is the rows of job_queue the server read per
	// second for one idle replica run as `jobq serve` runs it (scheduler,
	// API, backlog sampler, all defaults), every statement included, over
	// two backlog intervals (measureIdleRows). Target: ≤ 100 at 1,000,000
	// future jobs.
	IdleRowsPerSecond float64 `json:"idle_rows_read_per_s"`
	// DrainRounds are the drain throughputs (jobs/s from the first to the
	// last completion) of each round; DrainThroughput is their median.
	DrainRounds     []float64 `json:"drain_rounds"`
	DrainThroughput float64   `json:"drain_jobs_per_s"`
	// Pickup is started_at − run_at (database clock) of futurePickupJobs
	// jobs submitted through the replicas' HTTP APIs with run_at spread
	// over futurePickupSpread, among the future jobs; EarlyStarts counts
	// those that started before their run_at (must be 0).
	Pickup      Percentiles `json:"pickup"`
	EarlyStarts int64       `json:"early_starts"`
	// IdleVsEmpty and DrainVsEmpty divide by the point at 0 future jobs.
	IdleVsEmpty  float64 `json:"idle_vs_empty"`
	DrainVsEmpty float64 `json:"drain_vs_empty"`
}

// futureAxis measures every point of Options.FutureJobs at the current
// terminal-row table size and appends them to res.Future.
func (h *Harness) futureAxis(ctx context.Context, res *Result) error {
	o := h.opts
	base := h.env.BaseID
	defer func() { h.env.BaseID = base }()
	sizes := slices.Clone(o.FutureJobs)
	slices.Sort(sizes)
	for _, n := range sizes {
		h.step(fmt.Sprintf("future jobs %d", n))
		h.env.BaseID = base
		if err := h.env.Reset(ctx); err != nil {
			return err
		}
		if err := h.env.insertFuture(ctx, n); err != nil {
			return err
		}
		// The future rows sit below BaseID, so every Reset keeps them.
		if err := h.env.Admin.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM job_queue").Scan(&h.env.BaseID); err != nil {
			return err
		}
		fp := FuturePoint{FutureJobs: n, TableRows: h.env.TableRows}
		var err error
		if fp.ProbeRowsExamined, fp.LockRowsExamined, fp.PromoterProbeRowsExamined, err = h.futureRowsExamined(ctx); err != nil {
			return err
		}
		spec := h.headline(StrategySkip, h.env.TableRows)
		spec.Procs = false
		if fp.Idle, err = h.measureIdle(ctx, spec, o.IdleWindow); err != nil {
			return err
		}
		if fp.IdleRowsPerSecond, err = h.measureIdleRows(ctx); err != nil {
			return err
		}
		for range o.Rounds {
			tp, err := h.drainDue(ctx, spec, futureDrainJobs)
			if err != nil {
				return err
			}
			fp.DrainRounds = append(fp.DrainRounds, tp)
		}
		if fp.Pickup, fp.EarlyStarts, err = h.futurePickup(ctx, spec); err != nil {
			return err
		}
		sorted := slices.Clone(fp.DrainRounds)
		slices.Sort(sorted)
		fp.DrainThroughput = sorted[(len(sorted)-1)/2]
		h.done()
		o.Logger.Info("bench future jobs", "future_jobs", n, "probe_rows", fp.ProbeRowsExamined, "lock_rows", fp.LockRowsExamined,
			"promoter_probe_rows", fp.PromoterProbeRowsExamined, "idle_queries_per_s", fmt.Sprintf("%.2f", fp.Idle.QueriesPerSecond),
			"idle_rows_read_per_s", fmt.Sprintf("%.1f", fp.IdleRowsPerSecond),
			"drain_jobs_per_s", fmt.Sprintf("%.0f", fp.DrainThroughput), "drain_rounds", fmt.Sprint(roundAll(fp.DrainRounds)),
			"pickup_p50_ms", fp.Pickup.P50, "pickup_p99_ms", fp.Pickup.P99, "pickup_max_ms", fp.Pickup.Max, "early_starts", fp.EarlyStarts)
		res.Future = append(res.Future, fp)
	}
	if len(res.Future) > 0 && res.Future[0].FutureJobs == 0 {
		empty := res.Future[0]
		for i := range res.Future {
			res.Future[i].IdleVsEmpty = Ratio(res.Future[i].Idle.QueriesPerSecond, empty.Idle.QueriesPerSecond)
			res.Future[i].DrainVsEmpty = Ratio(res.Future[i].DrainThroughput, empty.DrainThroughput)
		}
	}
	h.env.BaseID = base
	return h.env.Reset(ctx)
}

func roundAll(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}

// insertFuture inserts n SCHEDULED noop jobs due a day ahead (one
// microsecond apart), priorities 0–9, with one INSERT … SELECT per
// 1,000,000 rows, and refreshes the table's statistics.
func (e *Env) insertFuture(ctx context.Context, n int) error {
	for off := 0; off < n; off += 1000000 {
		chunk := min(n-off, 1000000)
		q := `INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, max_retry,
			timeout_ms, run_at, create_time, update_time) ` + digits + `
			SELECT CONCAT('future-', k), 'noop', '{}', REPEAT('0', 64), 'SCHEDULED', k % 10, 3, 0,
			NOW(6) + INTERVAL 1 DAY + INTERVAL k MICROSECOND, NOW(6), NOW(6)
			FROM (SELECT a.n * 1000 + b.n + ? AS k FROM d a CROSS JOIN d b WHERE a.n * 1000 + b.n < ?) AS s`
		if _, err := e.Admin.ExecContext(ctx, q, off, chunk); err != nil {
			return fmt.Errorf("insert %d future jobs: %w", chunk, err)
		}
	}
	if _, err := e.Admin.ExecContext(ctx, "ANALYZE TABLE job_queue"); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	e.waitPurge(ctx)
	if n >= 100000 {
		e.waitFlushed(ctx)
	}
	return nil
}

// waitFlushed waits (at most a minute) until InnoDB has written back most
// dirty pages (Innodb_buffer_pool_pages_dirty < 1,000, server-wide): a
// million inserted rows leave the buffer pool dirty for tens of seconds,
// and the page cleaner's writes would otherwise be charged to the next
// measurement.
func (e *Env) waitFlushed(ctx context.Context) {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var name string
		var n int64
		err := e.Admin.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'").Scan(&name, &n)
		if err != nil || n < 1000 || !sleepCtx(ctx, 200*time.Millisecond) {
			return
		}
	}
}

// seedDue inserts n WAITING noop jobs due now with priorities 0–9.
func (e *Env) seedDue(ctx context.Context, n int) error {
	e.seq++
	q := `INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, max_retry,
		timeout_ms, run_at, create_time, update_time) ` + digits + `
		SELECT CONCAT(?, k), 'noop', '{}', REPEAT('0', 64), 'WAITING', k % 10, 3, 0, NOW(6), NOW(6), NOW(6)
		FROM (SELECT a.n * 1000 + b.n AS k FROM d a CROSS JOIN d b WHERE a.n * 1000 + b.n < ?) AS s`
	_, err := e.Admin.ExecContext(ctx, q, fmt.Sprintf("due%d-", e.seq), n)
	return err
}

// futureRowsExamined runs the idle probe, the skiplocked locking read and
// the promoter's probe on one connection and returns the Handler_read_*
// sum of each one's second run.
func (h *Harness) futureRowsExamined(ctx context.Context) (probe, lock, promoter int64, err error) {
	qs, err := SchedulerQueries()
	if err != nil {
		return 0, 0, 0, err
	}
	byName := map[string]string{}
	for _, q := range qs {
		byName[q.Name] = q.SQL
	}
	conn, err := h.env.Admin.Conn(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	defer conn.Close()
	measure := func(name, limit string, inTx bool) (int64, error) {
		text, err := Bind(byName[name], "", map[string]string{"?": limit})
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		var n int64
		for range 2 {
			if _, err := conn.ExecContext(ctx, "FLUSH STATUS"); err != nil {
				return 0, err
			}
			if inTx {
				if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
					return 0, err
				}
			}
			err := drainRows(conn.QueryContext(ctx, text))
			if inTx {
				if _, rerr := conn.ExecContext(ctx, "ROLLBACK"); err == nil {
					err = rerr
				}
			}
			if err != nil {
				return 0, fmt.Errorf("%s: %w", name, err)
			}
			if n, err = sessionRowsExamined(ctx, conn); err != nil {
				return 0, err
			}
		}
		return n, nil
	}
	if probe, err = measure("JobScanAvailable", "1", false); err != nil {
		return
	}
	if lock, err = measure("JobLockAvailable", "50", true); err != nil {
		return
	}
	promoter, err = measure("JobScheduledNext", "1", false)
	return
}

func drainRows(rows *sql.Rows, err error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
	}
	return rows.Err()
}

// sessionRowsExamined sums the session's Handler_read_* counters.
func sessionRowsExamined(ctx context.Context, conn *sql.Conn) (int64, error) {
	rows, err := conn.QueryContext(ctx, "SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, rows.Err()
}

// drainDue seeds n due jobs of mixed priorities, runs spec's replicas until
// all are done and returns the completions per second from the first to
// the last one.
func (h *Harness) drainDue(ctx context.Context, spec PointSpec, n int) (float64, error) {
	if err := h.env.Reset(ctx); err != nil {
		return 0, err
	}
	if err := h.env.seedDue(ctx, n); err != nil {
		return 0, err
	}
	r := h.newRunner(spec, false)
	if err := r.Start(ctx); err != nil {
		_ = r.Stop()
		return 0, fmt.Errorf("future drain: start: %w", err)
	}
	var c0 int64
	var t0, t1 time.Time
	deadline := time.Now().Add(2 * time.Minute)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		c := r.Completed()
		if t0.IsZero() && c > 0 {
			c0, t0 = c, time.Now()
		}
		if c >= int64(n) {
			t1 = time.Now()
			break
		}
		sleepCtx(ctx, 2*time.Millisecond)
	}
	if err := r.Stop(); err != nil {
		return 0, fmt.Errorf("future drain: stop: %w", err)
	}
	if t1.IsZero() {
		return 0, fmt.Errorf("future drain: %d of %d jobs done in 2 minutes", r.Completed(), n)
	}
	return rate(int64(n)-c0, t1.Sub(t0)), ctx.Err()
}

// WriteFuture writes the future-jobs axis as a Markdown section.
func WriteFuture(w io.Writer, res *Result) {
	if len(res.Future) == 0 {
		return
	}
	fmt.Fprintf(w, "## Future jobs (SCHEDULED, due in a day) next to %d terminal rows\n\n", res.Future[0].TableRows)
	fmt.Fprintf(w, "| future jobs | idle probe rows | claim lock read rows | promoter probe rows | idle queries/s | vs empty | idle rows read/s | drain %d due jobs/s (rounds) | vs empty | pickup p50 / p99 / max | started early |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n", futureDrainJobs)
	for _, f := range res.Future {
		fmt.Fprintf(w, "| %d | %d | %d | %d | %.2f | %s | %.1f | %.0f (%v) | %s | %.1f / %.1f / %.1f ms | %d |\n", f.FutureJobs, f.ProbeRowsExamined, f.LockRowsExamined,
			f.PromoterProbeRowsExamined, f.Idle.QueriesPerSecond, fmtRatio(f.IdleVsEmpty), f.IdleRowsPerSecond, f.DrainThroughput, roundAll(f.DrainRounds), fmtRatio(f.DrainVsEmpty),
			f.Pickup.P50, f.Pickup.P99, f.Pickup.Max, f.EarlyStarts)
	}
	fmt.Fprintf(w, "\nRows = session Handler_read_* of one statement on an empty due queue. Idle = one in-process skiplocked replica's own statements/s (promoter included). Idle rows read/s = rows of job_queue the server read per second for one idle replica as jobq serve runs it (scheduler, API, backlog sampler; defaults), all statements, over %s (MariaDB TABLE_STATISTICS or MySQL performance_schema). Drain = %d WAITING jobs of priorities 0–9 by the headline skiplocked replicas, first to last completion, median of the rounds. Pickup = started_at − run_at (database clock) of %d jobs submitted through the replicas' APIs with run_at spread over %s; started early = pickups < 0.\n\n", idleRowsWindow, futureDrainJobs, futurePickupJobs, futurePickupSpread)
}

// runFutureOnly pre-loads the smallest terminal-row table and measures the
// future-jobs axis alone (Options.FutureOnly).
func (h *Harness) runFutureOnly(ctx context.Context, res *Result) error {
	start := time.Now()
	if err := h.env.Preload(ctx, slices.Min(h.opts.TableSizes)); err != nil {
		return err
	}
	err := h.futureAxis(ctx, res)
	res.Duration = time.Since(start).Seconds()
	return err
}

// futurePickupJobs jobs are submitted with run_at spread evenly over
// futurePickupSpread, starting futurePickupLead after the submits begin
// (variables so the smoke test can shrink them).
var (
	futurePickupJobs   = 1000
	futurePickupSpread = 10 * time.Second
	futurePickupLead   = 5 * time.Second
)

// futurePickup submits futurePickupJobs jobs due at spread instants through
// spec's replicas' HTTP APIs (8 at a time), waits for all of them and
// returns their pickup latencies and how many started before run_at.
func (h *Harness) futurePickup(ctx context.Context, spec PointSpec) (Percentiles, int64, error) {
	if err := h.env.Reset(ctx); err != nil {
		return Percentiles{}, 0, err
	}
	r := h.newRunner(spec, true)
	defer r.Stop()
	if err := r.Start(ctx); err != nil {
		return Percentiles{}, 0, fmt.Errorf("future pickup: start: %w", err)
	}
	urls := r.APIs()
	if len(urls) == 0 {
		return Percentiles{}, 0, errors.New("future pickup: runner has no API")
	}
	clients := make([]*client.Client, len(urls))
	for i, u := range urls {
		clients[i] = client.New(u)
	}
	var now time.Time
	if err := h.env.Admin.QueryRowContext(ctx, "SELECT NOW(6)").Scan(&now); err != nil {
		return Percentiles{}, 0, err
	}
	first := now.UTC().Add(futurePickupLead)
	h.env.seq++
	prefix := fmt.Sprintf("fut%d-", h.env.seq)
	var wg sync.WaitGroup
	var failed atomic.Int64
	next := make(chan int)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%len(clients)]
			for i := range next {
				runAt := first.Add(time.Duration(i) * futurePickupSpread / time.Duration(futurePickupJobs)).Format(time.RFC3339Nano)
				if _, _, err := c.Submit(ctx, apitype.SubmitRequest{JobKey: fmt.Sprintf("%s%d", prefix, i), JobType: jobtypes.Noop, RunAt: &runAt}); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	for i := range futurePickupJobs {
		next <- i
	}
	close(next)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return Percentiles{}, 0, fmt.Errorf("future pickup: %d submits failed", n)
	}
	deadline := time.Now().Add(futurePickupLead + futurePickupSpread + 30*time.Second)
	for {
		left, err := h.env.Remaining(ctx)
		if err != nil {
			return Percentiles{}, 0, err
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return Percentiles{}, 0, fmt.Errorf("future pickup: %d jobs unfinished", left)
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	pickups, err := h.env.Pickups(ctx, prefix)
	if err != nil {
		return Percentiles{}, 0, err
	}
	hist := newHist()
	var early int64
	for _, p := range pickups {
		if p < 0 {
			early++
		}
		recordDur(hist, p)
	}
	return Summarize(hist), early, ctx.Err()
}
