// Command jobq-riverpeer is the River peer point of `jobq bench
// --throughput` (issue 34): it drains a backlog of no-op River jobs on
// PostgreSQL with River's own benchmark settings and prints one JSON line
// (Result) on stdout. It is its own module so that jobq's go.mod carries
// neither River nor pgx; the bench builds it with `go build` in this
// directory and runs it once per round.
//
// One run: create the database if it is absent, run River's migrations
// (rivermigrate), truncate River's tables and VACUUM FULL river_job, insert
// -jobs no-op jobs with Client.InsertMany in batches of -insert-batch, then
// start one client with -workers workers on the default queue and count
// completions through its event subscription until every job completed.
//
// With -check it only connects and prints {"postgres": VERSION}; when
// PostgreSQL does not answer it exits with ExitNoPostgres and one line on
// stderr, so the bench can skip the peer with a clear reason.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// ExitNoPostgres is the exit status when PostgreSQL does not answer at the
// database URL (the bench then prints "river peer skipped: …").
const ExitNoPostgres = 3

// Defaults of the flags. WorkersDefault, FetchCooldown, FetchPollInterval
// and InsertBatchDefault are the settings of River's own benchmark (`river
// bench`, cmd/river/riverbench): one client, 2,000 workers on the default
// queue, 2 ms fetch cooldown, 20 ms fetch poll interval, 5,000-job
// InsertMany batches.
const (
	DatabaseURLDefault = "postgres://postgres@127.0.0.1:5432/jobq_river_bench"
	JobsDefault        = 60000
	WorkersDefault     = 2000
	InsertBatchDefault = 5000
	FetchCooldown      = 2 * time.Millisecond
	FetchPollInterval  = 20 * time.Millisecond
)

// Result is the JSON line a run prints.
type Result struct {
	Peer          string  `json:"peer"`           // "river"
	RiverVersion  string  `json:"river_version"`  // the river module's version in this build
	Driver        string  `json:"driver"`         // "riverpgxv5"
	Postgres      string  `json:"postgres"`       // server_version
	Jobs          int     `json:"jobs"`           // completed jobs
	Workers       int     `json:"workers"`        // MaxWorkers of the default queue
	InsertBatch   int     `json:"insert_batch"`   // jobs per InsertMany call
	InsertSeconds float64 `json:"insert_seconds"` // the whole backlog's InsertMany calls
	InsertPerS    float64 `json:"insert_jobs_per_s"`
	// Seconds and JobsPerS are River's own figure: from Client.Start to the
	// last completion event.
	Seconds  float64 `json:"seconds"`
	JobsPerS float64 `json:"jobs_per_s"`
	// WindowJobsPerS is jobq's bench method on the same completions: from
	// -warmup after the first completion for -window or until 90 % of the
	// backlog completed (from the start when that is within the warm-up).
	WindowJobsPerS float64 `json:"window_jobs_per_s"`
	WindowSeconds  float64 `json:"window_seconds"`
	WindowJobs     int     `json:"window_jobs"`
}

func main() {
	var (
		dbURL   = flag.String("database-url", cmp.Or(os.Getenv("JOBQ_RIVER_URL"), DatabaseURLDefault), "PostgreSQL URL of the peer's database (created when absent); defaults to $JOBQ_RIVER_URL, which keeps a password off the command line")
		jobs    = flag.Int("jobs", JobsDefault, "no-op jobs in the backlog")
		workers = flag.Int("workers", WorkersDefault, "MaxWorkers of the client's default queue")
		batch   = flag.Int("insert-batch", InsertBatchDefault, "jobs per InsertMany call")
		warmup  = flag.Duration("warmup", 300*time.Millisecond, "window start after the first completion (jobq's bench method)")
		window  = flag.Duration("window", 5*time.Second, "window length (jobq's bench method)")
		timeout = flag.Duration("timeout", 5*time.Minute, "give up when the run takes longer")
		check   = flag.Bool("check", false, "only connect and print {\"postgres\": VERSION}")
	)
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *check {
		v, err := ensureDatabase(ctx, *dbURL)
		if err != nil {
			fail(err)
		}
		_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"postgres": v})
		return
	}
	if *jobs < 1 || *workers < 1 || *batch < 1 {
		fmt.Fprintln(os.Stderr, "riverpeer: -jobs, -workers and -insert-batch must be ≥ 1")
		os.Exit(2)
	}
	res, err := run(ctx, *dbURL, *jobs, *workers, *batch, *warmup, *window)
	if err != nil {
		fail(err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
}

// errNoPostgres marks a database URL where PostgreSQL did not answer.
var errNoPostgres = errors.New("PostgreSQL not reachable")

func fail(err error) {
	// One line: pgx spreads a failed dial over several.
	fmt.Fprintln(os.Stderr, "riverpeer:", strings.Join(strings.Fields(err.Error()), " "))
	if errors.Is(err, errNoPostgres) {
		os.Exit(ExitNoPostgres)
	}
	os.Exit(1)
}

// redacted is the URL without its password (never logged).
func redacted(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "(unparsable database URL)"
	}
	return u.Redacted()
}

// ensureDatabase connects to the URL's server through its maintenance
// database, creates the URL's database when absent and returns the
// server's version.
func ensureDatabase(ctx context.Context, dbURL string) (string, error) {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return "", fmt.Errorf("parse database URL %s: %w", redacted(dbURL), err)
	}
	name := cmpOr(cfg.Database, "jobq_river_bench")
	cfg.Database = "postgres"
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return "", fmt.Errorf("%w at %s: %v", errNoPostgres, redacted(dbURL), err)
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return "", fmt.Errorf("%w at %s: %v", errNoPostgres, redacted(dbURL), err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up database %s: %w", name, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", fmt.Errorf("create database %s: %w", name, err)
		}
	}
	return version, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// noopArgs are the peer's job arguments.
type noopArgs struct {
	Num int `json:"num"`
}

// Kind is the River job kind of the peer's jobs.
func (noopArgs) Kind() string { return "jobq_bench_noop" }

// noopWorker does nothing.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

func run(ctx context.Context, dbURL string, jobs, workers, batch int, warmup, window time.Duration) (*Result, error) {
	version, err := ensureDatabase(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %v", errNoPostgres, redacted(dbURL), err)
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return nil, fmt.Errorf("rivermigrate: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("rivermigrate up: %w", err)
	}
	// Every round starts from empty tables, as River's benchmark does.
	if err := driver.GetExecutor().TableTruncate(ctx, &riverdriver.TableTruncateParams{
		Table: driver.GetMigrationTruncateTables(riverdriver.MigrationLineMain, 0),
	}); err != nil {
		return nil, fmt.Errorf("truncate River's tables: %w", err)
	}
	if _, err := pool.Exec(ctx, "VACUUM FULL river_job"); err != nil {
		return nil, fmt.Errorf("vacuum river_job: %w", err)
	}

	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     FetchCooldown,
		FetchPollInterval: FetchPollInterval,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
		Logger:            quietLogger(),
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}

	t0 := time.Now()
	params := make([]river.InsertManyParams, 0, batch)
	for i := 0; i < jobs; {
		params = params[:0]
		for ; len(params) < batch && i < jobs; i++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{Num: i}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return nil, fmt.Errorf("InsertMany: %w", err)
		}
	}
	insert := time.Since(t0)

	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: jobs, // a dropped event would lose a completion
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer unsubscribe()
	done := make([]time.Time, 0, jobs)
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return nil, fmt.Errorf("river client start: %w", err)
	}
	var failed int
	for len(done)+failed < jobs {
		select {
		case <-ctx.Done():
			_ = client.Stop(context.Background())
			return nil, fmt.Errorf("drain: %d of %d jobs completed: %w", len(done), jobs, ctx.Err())
		case ev, ok := <-events:
			if !ok {
				return nil, fmt.Errorf("drain: subscription closed after %d of %d jobs", len(done), jobs)
			}
			if ev.Kind != river.EventKindJobCompleted {
				failed++
				continue
			}
			done = append(done, time.Now())
		}
	}
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return nil, fmt.Errorf("river client stop: %w", err)
	}
	if failed > 0 {
		return nil, fmt.Errorf("drain: %d of %d no-op jobs failed or were cancelled", failed, jobs)
	}
	res := &Result{Peer: "river", RiverVersion: moduleVersion("github.com/riverqueue/river"), Driver: "riverpgxv5",
		Postgres: version, Jobs: len(done), Workers: workers, InsertBatch: batch,
		InsertSeconds: insert.Seconds(), InsertPerS: float64(jobs) / insert.Seconds()}
	res.Seconds = done[len(done)-1].Sub(start).Seconds()
	res.JobsPerS = float64(len(done)) / res.Seconds
	n, d := Window(start, done, jobs, warmup, window)
	res.WindowJobs, res.WindowSeconds = n, d.Seconds()
	if d > 0 {
		res.WindowJobsPerS = float64(n) / d.Seconds()
	}
	return res, nil
}

// Window applies jobq's throughput window (testbed/bench measureThroughput)
// to completion times in order: it opens warmup after the first completion
// and closes after window or at the completion that reaches 90 % of
// backlog, whichever comes first; when 90 % was reached within the warm-up
// it measures from start instead. It returns the completions inside the
// window and its length.
func Window(start time.Time, done []time.Time, backlog int, warmup, window time.Duration) (int, time.Duration) {
	if len(done) == 0 {
		return 0, 0
	}
	stopAt := int(float64(backlog) * 0.9)
	t1 := done[0].Add(warmup)
	c1 := countUpTo(done, t1)
	t2 := t1.Add(window)
	if stopAt > 0 && stopAt <= len(done) && done[stopAt-1].Before(t2) {
		t2 = done[stopAt-1]
	}
	if c1 >= stopAt || !t2.After(t1) {
		t1, c1 = start, 0
		if stopAt > 0 && stopAt <= len(done) {
			t2 = done[stopAt-1]
		}
	}
	c2 := countUpTo(done, t2)
	return c2 - c1, t2.Sub(t1)
}

// countUpTo is how many of the ordered times are not after t.
func countUpTo(ts []time.Time, t time.Time) int {
	lo, hi := 0, len(ts)
	for lo < hi {
		m := (lo + hi) / 2
		if ts[m].After(t) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// moduleVersion is dep's version in this binary's build info.
func moduleVersion(dep string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == dep {
				return strings.TrimSpace(m.Version)
			}
		}
	}
	return "unknown"
}

// quietLogger logs River's warnings and errors to stderr, nothing else:
// stdout carries the result line alone.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
