package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jobq/jobq/testbed/bench"
)

// BenchCmd runs the throughput and pickup-latency harness (package bench).
type BenchCmd struct {
	DSN             string          `help:"Server-level DSN to create the bench database on, e.g. root@tcp(127.0.0.1:3306)/. Without it: $JOBQ_DSN, else a Docker engine (mysql:8.4 through testcontainers), else a throwaway local mariadbd/mysqld." placeholder:"DSN"`
	Out             string          `help:"Output directory for report.md, bench.json and the PNG plots." default:"out/bench"`
	TableSizes      []int           `help:"Terminal rows pre-loaded in job_queue (default 0,100000,1000000; CI: throughput at 0, EXPLAIN at 0 and 100000)." name:"table-sizes"`
	Batches         []int           `help:"Batch-limit sweep (default 10,50,200,1000)."`
	Replicas        []int           `help:"Replica sweep (default 1,2,3,4,8)."`
	Workers         []int           `help:"Workers-per-replica sweep (default 10,50,200)."`
	Jitters         []time.Duration `help:"Poll-jitter sweep at 4 replicas (default 0,200ms,500ms)."`
	Polls           []time.Duration `help:"Poll-interval sweep (default 100ms,250ms,1s)."`
	Rates           []int           `help:"Open-model arrival rates in jobs/s for pickup latency (default 50,100,200,400)."`
	Rounds          int             `help:"Interleaved rounds of the headline points; ratios are the median per-round ratio (default 3, CI 2)."`
	Backlog         int             `help:"WAITING jobs seeded per throughput point (default 60000, CI 30000)."`
	Window          time.Duration   `help:"Measurement window per throughput point (default 5s, CI 3s)."`
	LatencyDuration time.Duration   `help:"How long each arrival rate is submitted (default 4s)." name:"latency-duration"`
	FutureJobs      []int           `help:"The future-jobs axis: SCHEDULED jobs due in a day loaded next to the smallest table (default 0,100000,1000000; CI 0,100000)." name:"future-jobs"`
	FutureOnly      bool            `help:"Measure only the future-jobs axis (rows examined, idle cost, drain of 10,000 due jobs)." name:"future-only"`
	IdleWindow      time.Duration   `help:"How long an idle replica's statements are counted (default 21s, CI 6s)." name:"idle-window"`
	Procs           bool            `help:"Run jobq replicas as 'jobq serve' processes instead of in-process."`
	Throughput      bool            `help:"Only the throughput report: jobq at its defaults and at its best-flag candidates against the raw SQL ceiling at its best claim size, enqueue rates (single submits from 32 clients, batch API, raw INSERTs), statements and rows written per job; --rounds interleaved rounds."`
	DrainOnly       bool            `help:"With --throughput: only the drain points (no enqueue points and targets)." name:"drain-only"`
	River           bool            `help:"With --throughput: add the River peer (River on the local PostgreSQL, one client, 2,000 workers, built from --river-dir with go build) to every round and print jobq's ratios to it; skipped with one line when go or PostgreSQL is absent. --no-river leaves it out." default:"true" negatable:""`
	ReplicaScan     bool            `help:"With --throughput: add jobq at its defaults on 1, 2, 4 and 8 replicas (3 is the defaults point) to every round, and the target that 8 replicas drain within 0.9× of the best count; --no-replica-scan leaves it out." default:"true" negatable:"" name:"replica-scan"`
	ClaimSlots      int             `help:"Every jobq point's claim gate, as jobq serve --claim-slots (0: the default; negative: no gate), for an A/B of the gate across runs." name:"claim-slots"`
	ReplicaCounts   []int           `help:"With --throughput: only the replica scan, jobq at its defaults on these replica counts (e.g. 1,3,8) in every round; no ceilings, River, best flags, enqueue, pickup or idle points." name:"replica-counts"`
	RiverDir        string          `help:"With --throughput: the River peer's module directory." default:"testbed/bench/riverpeer" name:"river-dir"`
	RiverURL        string          `help:"With --throughput: the River peer's PostgreSQL URL (its database is created when absent)." default:"postgres://postgres@127.0.0.1:5432/jobq_river_bench" name:"river-url"`
	ProfileDrain    bool            `help:"With --throughput: write a CPU profile of each jobq drain point's first round (in-process replicas) to --out/cpu_drain_<n>.pprof." name:"profile-drain"`
	Tune            bool            `help:"Search batch limit, poll interval and jitter for the highest throughput within --slo; print 'jobq serve' flags."`
	SLO             time.Duration   `help:"Pickup p99 SLO for --tune." default:"50ms" name:"slo"`
	TuneRate        int             `help:"Arrival rate (jobs/s) at which --tune measures p99." default:"200" name:"tune-rate"`
	CI              bool            `help:"Run the <= 60 s CI subset and compare with --baseline." name:"ci"`
	Baseline        string          `help:"Baseline file for --ci." default:"testbed/bench/baseline.json"`
	Tolerance       float64         `help:"Relative tolerance of --ci comparisons." default:"0.35"`
	WriteBaseline   bool            `help:"With --ci: write the measured ratios to --baseline instead of comparing." name:"write-baseline"`
	NoProgress      bool            `help:"No progress bar (it is drawn only when stderr is a terminal)." name:"no-progress"`
	Remote          []string        `help:"Only the remote points: drain and pickup of one replica's own handlers, then of each worker library (go, work, python, node) on remote no-op jobs, with the worker's CPU per job." sep:","`
	RemoteJobs      int             `help:"Jobs per remote drain point." default:"5000" name:"remote-jobs"`
	From            string          `help:"Re-render report.md and the plots into --out from an earlier bench.json; measure nothing." type:"existingfile"`
	Capacity        bool            `help:"Capacity model: replicas × workers for --job-ms jobs at --rate on a database --db-latency away; measures through a toxiproxy link, checks its pickup p99 with a time-compressed real run; writes capacity.json and capacity.png."`
	JobMs           int             `help:"With --capacity: job duration in ms." name:"job-ms" default:"1000"`
	Rate            string          `help:"With --capacity: arrival rate, e.g. 20/m, 5/s, 300/h." default:"1/s"`
	Retries         float64         `help:"With --capacity: fraction of jobs that run twice (0–1)." default:"0"`
	DBLatency       time.Duration   `help:"With --capacity: round trip to the database added on every replica's link (whole ms)." name:"db-latency" default:"0s"`
	MaxWorkers      int             `help:"With --capacity: most workers per replica." name:"max-workers" default:"200"`
	RateLimit       bool            `help:"Only the rate-limit bench: 3 replicas drain 2,000 no-op jobs of a type limited to 100 per 1s next to 20,000 unlimited ones, in --rounds interleaved rounds (each also drains the unlimited jobs alone); reports the most starts in any window, the achieved rate and the unlimited type's rate against alone; then, per key, 800 jobs on a hot rate key and 200 on each of 3 others under 100 per 1s for each key: each key's most starts in any window and when its last job started; writes ratelimit.json and ratelimit.md into --out (docs/bench.md). With --keys: both benches, keys first." name:"rate-limit"`
	Keys            bool            `help:"Only the concurrency-key bench: 3 in-process replicas drain 60,000 no-op jobs without keys and on 10,000 keys of limit 1, in --rounds interleaved rounds; prints the ratio and writes keys.json and keys.md into --out (docs/bench.md). With --rate-limit: both benches."`
	Workflows       bool            `help:"Only the workflow bench: unblock latency p50/p99 on an idle replica, and drains of 10,000 independent jobs, 10 × (1 → 1,000 → 1) and 100 chains of 100, in --rounds interleaved rounds; writes workflows.json and workflows.md into --out (docs/bench.md)."`
}

// Run runs the harness and prints the targets table.
func (c *BenchCmd) Run(g *Globals) error {
	// --keys and --rate-limit together run both policy benches, keys first,
	// in one invocation (each writes its own files into --out).
	if c.Keys || c.RateLimit {
		var errs []error
		if c.Keys {
			res, err := bench.RunKeys(g.Ctx, bench.KeyOptions{DSN: c.DSN, Out: c.Out, Rounds: c.Rounds, Log: os.Stderr})
			if res != nil {
				bench.WriteKeyTable(os.Stdout, res)
			}
			errs = append(errs, err)
		}
		if c.RateLimit {
			res, err := bench.RunRateLimit(g.Ctx, bench.RateLimitOptions{DSN: c.DSN, Out: c.Out, Rounds: c.Rounds, Log: os.Stderr})
			if res != nil {
				bench.WriteRateLimitTable(os.Stdout, res)
			}
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	if c.Workflows {
		res, err := bench.RunWorkflows(g.Ctx, bench.WorkflowOptions{DSN: c.DSN, Out: c.Out, Rounds: c.Rounds, Log: os.Stderr})
		if res != nil {
			bench.WriteWorkflowTable(os.Stdout, res)
		}
		return err
	}
	if c.From != "" {
		res, err := bench.ReadResult(c.From)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(c.Out, 0o755); err != nil {
			return err
		}
		return bench.WriteReport(c.Out, res)
	}
	if len(c.Remote) > 0 {
		bin, err := os.Executable()
		if err != nil {
			return err
		}
		pts, err := bench.RunRemote(g.Ctx, bench.RemoteOptions{DSN: c.DSN, Binary: bin, Kinds: c.Remote, Jobs: c.RemoteJobs,
			Out: filepath.Join(c.Out, "remote"), Log: g.Log})
		bench.WriteRemote(os.Stdout, pts)
		return err
	}
	opts := bench.Options{
		Out: c.Out, TableSizes: c.TableSizes, Batches: c.Batches, Replicas: c.Replicas, Workers: c.Workers,
		Jitters: c.Jitters, Polls: c.Polls, Rates: c.Rates, Rounds: c.Rounds, Backlog: c.Backlog, Window: c.Window,
		LatencyDuration: c.LatencyDuration, IdleWindow: c.IdleWindow, FutureJobs: c.FutureJobs, FutureOnly: c.FutureOnly, Procs: c.Procs, Throughput: c.Throughput, DrainOnly: c.DrainOnly, ProfileDrain: c.ProfileDrain,
		River: c.River, ReplicaScan: c.ReplicaScan, ReplicaCounts: c.ReplicaCounts, ClaimSlots: c.ClaimSlots, RiverDir: c.RiverDir, RiverURL: c.RiverURL, Tune: c.Tune, SLO: c.SLO,
		TuneRate: c.TuneRate, CI: c.CI, Baseline: c.Baseline, Tolerance: c.Tolerance, WriteBaseline: c.WriteBaseline,
		Logger: g.Log, DSN: c.DSN,
	}
	if c.Capacity {
		rate, err := bench.ParseRate(c.Rate)
		if err != nil {
			return err
		}
		if c.JobMs <= 0 || c.Retries < 0 || c.Retries > 1 || c.MaxWorkers < 1 || c.DBLatency < 0 {
			return fmt.Errorf("capacity: --job-ms must be > 0, --retries in [0, 1], --max-workers ≥ 1, --db-latency ≥ 0")
		}
		opts.Capacity = &bench.CapacityOptions{JobDuration: time.Duration(c.JobMs) * time.Millisecond, Rate: rate,
			RetryFraction: c.Retries, DBLatency: c.DBLatency, WorkersPerReplica: c.MaxWorkers}
		if len(opts.TableSizes) == 0 {
			opts.TableSizes = []int{0}
		}
	}
	if !c.NoProgress && isTerminal(os.Stderr) {
		// Per-point log lines would break the bar: only warnings and errors.
		opts.Progress = os.Stderr
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	res, err := bench.Run(g.Ctx, opts)
	if res != nil {
		if res.Capacity == nil {
			bench.WriteTargets(os.Stdout, res)
		}
		if res.Tune != nil {
			bench.WriteTune(os.Stdout, res.Tune)
		}
		if res.CI != nil {
			bench.WriteCI(os.Stdout, res.CI)
		}
		if res.Capacity != nil {
			bench.WriteCapacity(os.Stdout, res.Capacity)
		}
		fmt.Printf("report: %s\n", filepath.Join(c.Out, "report.md"))
	}
	return err
}
