package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
)

// KeyDrain is what one drain of the concurrency-key bench measured besides
// its rate: where its replicas' round trips went (every statement timed by
// name, StmtProfile), its claims, the outcome writes retried, the server's
// deadlocks and row-lock waits over the drain (server-wide counters: other
// clients count too), and the jobs in each state about every second.
type KeyDrain struct {
	Keyed bool    `json:"keyed"`
	Rate  float64 `json:"jobs_per_s"`
	// Seconds is the drain's window (first started_at to last finished_at).
	Seconds      float64    `json:"seconds"`
	StmtsPerJob  float64    `json:"stmts_per_job"`
	Stmts        []StmtStat `json:"stmts"`
	Claims       int        `json:"claims"`
	JobsPerClaim float64    `json:"jobs_per_claim"`
	// Retries counts the outcome writes retried (EventDBRetry), by op.
	Retries       map[string]int `json:"retries"`
	Deadlocks     int64          `json:"innodb_deadlocks"`
	RowLockWaits  int64          `json:"innodb_row_lock_waits"`
	RowLockTimeMs int64          `json:"innodb_row_lock_time_ms"`
	Samples       []StateSample  `json:"samples"`
	// Server is the drain's delta of the server-wide counters ReadStatus
	// reads (buffer pool reads from disk, pages flushed, rows updated, …).
	Server GlobalStatus `json:"server"`
}

// StateSample counts the jobs of the drain per status at one moment (AtMs:
// milliseconds since the replicas were started).
type StateSample struct {
	AtMs   int64          `json:"at_ms"`
	States map[string]int `json:"states"`
}

// keyDrainRun drains like drainRate, on replicas whose pools are counted
// and timed, and returns the drain's KeyDrain.
func keyDrainRun(ctx context.Context, admin *store.Store, dsn string, n, replicas int, keyed bool) (*KeyDrain, error) {
	d := &KeyDrain{Keyed: keyed, Retries: map[string]int{}}
	prof := &StmtProfile{}
	counter := &StmtCounter{Profile: prof}
	var mu sync.Mutex
	obs := scheduler.ObserverFunc(func(e scheduler.Event) {
		switch e.Kind {
		case scheduler.EventScanned:
			if e.N > 0 {
				mu.Lock()
				d.Claims++
				d.JobsPerClaim += float64(e.N)
				mu.Unlock()
			}
		case scheduler.EventDBRetry:
			mu.Lock()
			d.Retries[e.Op]++
			mu.Unlock()
		}
	})
	before, err := ReadStatus(ctx, admin.DB())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for r := range max(replicas, 1) {
		db, err := OpenCountingDB(dsn, 40, counter)
		if err != nil {
			return nil, err
		}
		st, err := store.OpenDB(ctx, db)
		if err != nil {
			db.Close()
			return nil, err
		}
		defer st.Close()
		reg := scheduler.NewRegistry()
		jobtypes.Register(reg)
		s, err := scheduler.New(st, reg, scheduler.Config{Owner: fmt.Sprintf("bench-keys-%d", r+1), Logger: quietLogger(), Observer: obs}, st.Server.SkipLocked)
		if err != nil {
			return nil, err
		}
		if err := s.Start(context.WithoutCancel(ctx)); err != nil {
			return nil, err
		}
		defer s.Stop()
	}
	deadline := time.Now().Add(10 * time.Minute)
	next := time.Now()
	for {
		smp := StateSample{AtMs: time.Since(start).Milliseconds(), States: map[string]int{}}
		rows, err := admin.DB().QueryContext(ctx, "SELECT status, COUNT(*) FROM job_queue GROUP BY status")
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var s string
			var c int
			if err := rows.Scan(&s, &c); err != nil {
				rows.Close()
				return nil, err
			}
			smp.States[s] = c
		}
		rows.Close()
		d.Samples = append(d.Samples, smp)
		if smp.States["SUCCESS"] >= n {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("drain: %d of %d jobs done after 10 minutes", smp.States["SUCCESS"], n)
		}
		next = next.Add(time.Second)
		if !sleepCtx(ctx, time.Until(next)) {
			return nil, ctx.Err()
		}
	}
	after, err := ReadStatus(ctx, admin.DB())
	if err != nil {
		return nil, err
	}
	delta := after.Sub(before)
	d.Server = delta
	d.Deadlocks, d.RowLockWaits, d.RowLockTimeMs = delta["Innodb_deadlocks"], delta["Innodb_row_lock_waits"], delta["Innodb_row_lock_time"]
	var us int64
	if err := admin.DB().QueryRowContext(ctx,
		"SELECT TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at)) FROM job_queue WHERE status = 'SUCCESS'").Scan(&us); err != nil {
		return nil, err
	}
	d.Seconds = float64(us) / 1e6
	d.Rate = float64(n) / d.Seconds
	d.Stmts = prof.Stats()
	d.StmtsPerJob = float64(counter.Load()) / float64(n)
	mu.Lock()
	if d.Claims > 0 {
		d.JobsPerClaim /= float64(d.Claims)
	}
	mu.Unlock()
	return d, nil
}

// writeKeyDrain prints one drain's profile: its counters, its top
// statements by time and its state timeline.
func writeKeyDrain(w io.Writer, title string, d *KeyDrain, jobs, top int) {
	fmt.Fprintf(w, "%s: %.0f jobs/s over %.1f s; %.2f statements/job; %d claims of %.1f jobs; retried outcome writes %v; server deadlocks %d, row-lock waits %d (%d ms); server rows updated %d, buffer pool reads %d, pages flushed %d, log waits %d\n\n",
		title, d.Rate, d.Seconds, d.StmtsPerJob, d.Claims, d.JobsPerClaim, d.Retries, d.Deadlocks, d.RowLockWaits, d.RowLockTimeMs,
		d.Server["Innodb_rows_updated"], d.Server["Innodb_buffer_pool_reads"], d.Server["Innodb_buffer_pool_pages_flushed"], d.Server["Innodb_log_waits"])
	stats := d.Stmts
	if top > 0 && len(stats) > top {
		stats = stats[:top]
	}
	WriteStmtTable(w, stats, jobs)
	var b strings.Builder
	for _, s := range d.Samples {
		fmt.Fprintf(&b, " %.0fs W%d P%d R%d S%d;", float64(s.AtMs)/1000, s.States["WAITING"], s.States["PARKED"], s.States["RUNNING"], s.States["SUCCESS"])
	}
	fmt.Fprintf(w, "\nstates (W waiting, P parked, R running, S success):%s\n\n", b.String())
}
