// Package bench is jobq's throughput and pickup-latency harness (`jobq
// bench`, `make bench`): it measures the raw SQL ceiling, the classic design
// and jobq's claim strategies in one invocation, sweeps batch limit, jitter,
// poll interval, replicas, workers and table size, measures pickup latency
// under open-model load through the HTTP API, the database cost per job and
// of an idle replica, EXPLAINs every steady-state statement, and writes a
// Markdown report, bench.json and PNG plots. Every figure is a ratio to
// baselines measured in the same invocation, so results from a noisy shared
// machine stay comparable.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/jobq/jobq/testbed/dbprovider"
)

// Defaults for Options.
const (
	OutDefault             = "out/bench"
	BacklogDefault         = 60000
	WindowDefault          = 5 * time.Second
	WarmupDefault          = 300 * time.Millisecond
	LatencyDurationDefault = 4 * time.Second
	IdleWindowDefault      = 21 * time.Second
	SLODefault             = 50 * time.Millisecond
	TuneRateDefault        = 200
	ToleranceDefault       = 0.35
)

// Options configure a run. Zero fields take the defaults of a full
// `make bench` run (see WithDefaults); CI selects the ≤ 60 s subset.
type Options struct {
	// DSN is a server-level DSN (the --dsn flag); empty lets dbprovider
	// choose (JOBQ_DSN, Docker, a local server).
	DSN string
	// Out is the output directory for report.md, bench.json and the plots.
	// Defaults to out/bench.
	Out string
	// TableSizes are the terminal-row counts pre-loaded in job_queue, each
	// measured with every strategy at its defaults. Defaults to 0, 100k, 1M
	// (CI: 0 and 100k, headline points only at 0).
	TableSizes []int
	// Batches, Replicas, Workers, Jitters and Polls are the sweeps, run at
	// the smallest table size. Defaults: 10, 50, 200, 1000; 1, 2, 3, 4, 8;
	// 10, 50, 200; 0, 200ms, 500ms (at 4 replicas); 100ms, 250ms, 1s.
	Batches  []int
	Replicas []int
	Workers  []int
	Jitters  []time.Duration
	Polls    []time.Duration
	// FutureJobs are the future-jobs axis: SCHEDULED jobs due in a day,
	// loaded next to the smallest terminal-row table (future.go). Defaults
	// to 0, 100k, 1M (CI: 0 and 100k). FutureOnly measures that axis alone.
	FutureJobs []int
	FutureOnly bool
	// Rates are the open-model arrival rates (jobs/s) of the latency test.
	// Defaults to 50, 100, 200, 400.
	Rates []int
	// Rounds is how many times the headline points at each table size are
	// measured, interleaved (ceiling, skiplocked, cas, classic,
	// ceiling-queue, then again); each is reported as its median round and
	// its ratios as the median of per-round ratios (PairedRatio), so load
	// from other clients of a shared machine hits both sides of a ratio
	// alike. Defaults to 3 (CI: 2).
	Rounds int
	// Backlog is the WAITING jobs seeded for each throughput point.
	// Defaults to 60,000 (CI: 30,000): at ~11,000 jobs/s that outlasts the
	// window, so a point measures steady state, not start-up and tail.
	Backlog int
	// Window is how long a throughput point measures after Warmup (it ends
	// early once 90% of the backlog is done). Defaults to 5s (CI: 3s) and
	// 300ms. With 30,000 jobs and 3s the 3-replica ratio to the ceiling
	// swung 0.59–1.04 between rounds; 60,000 and 5s narrowed it to 0.83–1.05.
	Window, Warmup time.Duration
	// LatencyDuration is how long each rate is submitted. Defaults to 4s.
	LatencyDuration time.Duration
	// IdleWindow is how long an idle replica's statements are counted.
	// Defaults to 21s (two rescue intervals' worth of rescuer scans).
	IdleWindow time.Duration
	// Procs runs jobq replicas as `jobq serve` processes (Binary) instead
	// of in-process schedulers.
	Procs  bool
	Binary string
	// Tune searches batch limit, poll interval and jitter for the highest
	// throughput whose pickup p99 at TuneRate stays within SLO, instead of
	// the sweeps. Defaults: SLO 50ms, TuneRate 200 jobs/s.
	Tune     bool
	SLO      time.Duration
	TuneRate int
	// Throughput runs only the throughput report (issue #17, throughput.go):
	// drain by jobq at its defaults and at its best flags against the raw
	// SQL ceiling at its best claim size, enqueue rates against raw
	// INSERTs, statements and rows written per job — Rounds interleaved
	// rounds, at the smallest table size.
	Throughput bool
	// Capacity, when set, runs only the capacity model (capacity.go):
	// replicas × workers for a job mix on a database DBLatency away.
	Capacity *CapacityOptions
	// DrainOnly (with Throughput) measures the drain points alone: no
	// enqueue points, so no enqueue targets (faster iteration on drain).
	DrainOnly bool
	// ProfileDrain (with Throughput) writes a CPU profile of this process
	// while each jobq drain point of the first round runs (in-process
	// replicas only): cpu_drain_<n>.pprof in Out, n the point's index.
	ProfileDrain bool
	// ReplicaScan (with Throughput) adds jobq at its defaults on each of
	// ReplicaScanCounts replicas to every round (ThroughputResult.ReplicaScan).
	ReplicaScan bool
	// ReplicaCounts (with Throughput), when not empty, narrows the report
	// to the replica scan at these counts alone: jobq at its defaults on
	// each count in every round, no ceilings, River, best flags or enqueue
	// points (a few minutes, for work on how replicas share a backlog).
	ReplicaCounts []int
	// ClaimSlots, when not 0, is every jobq point's claim gate
	// (scheduler.Config.ClaimSlots; negative: no gate), for an A/B of the
	// gate across runs.
	ClaimSlots int
	// River (with Throughput) adds the River peer point (river.go) to every
	// round: River on PostgreSQL at RiverURL, built with `go build` from
	// the module in RiverDir, its jobs/s and jobq's ratios to it. When it
	// cannot run (no go toolchain, no PostgreSQL) one "river peer skipped:
	// …" line goes to Notice and into the report, and the rest runs.
	// Defaults: off here (the CLI's --river is on), RiverDirDefault,
	// RiverURLDefault.
	River    bool
	RiverDir string
	RiverURL string
	// Notice receives the lines a person running the bench must see (the
	// River peer's skip). Defaults to os.Stderr.
	Notice io.Writer
	// CI runs the ≤ 60 s subset and compares its ratios with Baseline
	// (bench/baseline.json) within Tolerance (relative, default 0.35).
	// WriteBaseline writes the measured ratios to Baseline instead.
	CI            bool
	Baseline      string
	Tolerance     float64
	WriteBaseline bool
	// Progress receives the progress bar (nil: none).
	Progress io.Writer
	// Logger receives one line per measured point. Defaults to slog.Default().
	Logger *slog.Logger
}

// WithDefaults fills zero fields.
func (o Options) WithDefaults() Options {
	if o.Out == "" {
		o.Out = OutDefault
	}
	orDefault(&o.TableSizes, o.CI, []int{0, 100000, 1000000}, []int{0, 100000})
	orDefault(&o.Batches, o.CI, []int{10, 50, 200, 1000}, []int{})
	orDefault(&o.Replicas, o.CI, []int{1, 2, 3, 4, 8}, []int{})
	orDefault(&o.Workers, o.CI, []int{10, 50, 200}, []int{})
	orDefault(&o.Jitters, o.CI, []time.Duration{0, 200 * time.Millisecond, 500 * time.Millisecond}, []time.Duration{})
	orDefault(&o.Polls, o.CI, []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, time.Second}, []time.Duration{})
	orDefault(&o.FutureJobs, o.CI, []int{0, 100000, 1000000}, []int{0, 100000})
	orDefault(&o.Rates, o.CI, []int{50, 100, 200, 400}, []int{200})
	zeroOr(&o.Rounds, o.CI, 3, 2)
	zeroOr(&o.Backlog, o.CI, BacklogDefault, 30000)
	zeroOr(&o.Window, o.CI, WindowDefault, 3*time.Second)
	zeroOr(&o.Warmup, o.CI, WarmupDefault, WarmupDefault)
	zeroOr(&o.LatencyDuration, o.CI, LatencyDurationDefault, 2*time.Second)
	zeroOr(&o.IdleWindow, o.CI, IdleWindowDefault, 6*time.Second)
	zeroOr(&o.SLO, o.CI, SLODefault, SLODefault)
	zeroOr(&o.TuneRate, o.CI, TuneRateDefault, TuneRateDefault)
	zeroOr(&o.Tolerance, o.CI, ToleranceDefault, ToleranceDefault)
	if o.Baseline == "" {
		o.Baseline = "testbed/bench/baseline.json"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RiverDir == "" {
		o.RiverDir = RiverDirDefault
	}
	if o.RiverURL == "" {
		o.RiverURL = RiverURLDefault
	}
	if o.Notice == nil {
		o.Notice = os.Stderr
	}
	return o
}

// zeroOr sets a zero *v to full, or to ci in a CI run.
func zeroOr[T comparable](v *T, isCI bool, full, ci T) {
	var zero T
	if *v != zero {
		return
	}
	*v = full
	if isCI {
		*v = ci
	}
}

// orDefault sets an empty *v to full, or to ci in a CI run.
func orDefault[T any](v *[]T, isCI bool, full, ci []T) {
	if len(*v) > 0 {
		return
	}
	*v = full
	if isCI {
		*v = ci
	}
}

// Result is everything a run measured; bench.json is its JSON.
type Result struct {
	Started time.Time      `json:"started"`
	Server  string         `json:"server"`
	Durable string         `json:"durability"` // innodb_flush_log_at_trx_commit / sync_binlog
	CPUs    int            `json:"cpus"`
	Options map[string]any `json:"options"`
	Points  []Point        `json:"throughput"`
	Latency []LatencyPoint `json:"latency"`
	Idle    []IdlePoint    `json:"idle"`
	Future  []FuturePoint  `json:"future,omitempty"`
	Plans   []Plan         `json:"explain"`
	Tune    *TuneResult    `json:"tune,omitempty"`
	// Capacity is the capacity model's answer (Options.Capacity).
	Capacity *CapacityResult `json:"capacity,omitempty"`
	// Throughput is the throughput report (Options.Throughput).
	Throughput *ThroughputResult `json:"throughput_report,omitempty"`
	Targets    []Target          `json:"targets"`
	CI         *CIComparison     `json:"ci,omitempty"`
	Duration   float64           `json:"duration_s"`
}

// Harness runs the measurements against one bench database.
type Harness struct {
	opts Options
	env  *Env
	bar  *progressbar.ProgressBar
	// profiled is set once the CPU profile of the first skiplocked
	// headline point has been started.
	profiled bool
	// profileAs, when set, names the CPU profile file of the next
	// measureThroughput (Options.ProfileDrain).
	profileAs string
}

// ErrPlanViolation is returned when a scan or claim statement does a full
// table scan, a full index scan or a filesort on the largest table.
var ErrPlanViolation = errors.New("bench: a scan or claim statement does not use an index")

// ErrTargetMissed is returned by CI runs whose ratios regressed beyond the
// tolerance of the baseline.
var ErrTargetMissed = errors.New("bench: regression against the baseline")

// Run provides a server (JOBQ_DSN, Docker or a local mariadbd), creates its
// own database, runs the measurements and writes the report. The Result is
// returned even when err is ErrPlanViolation or ErrTargetMissed.
func Run(ctx context.Context, opts Options) (*Result, error) {
	opts = opts.WithDefaults()
	if opts.Procs && opts.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.Binary = exe
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	srv, err := dbprovider.Provide(ctx, dbprovider.Options{DSN: opts.DSN})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	env, err := NewEnv(ctx, srv)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	h := &Harness{opts: opts, env: env}
	res, runErr := h.run(ctx)
	if res != nil {
		if err := WriteReport(opts.Out, res); err != nil {
			return res, errors.Join(runErr, err)
		}
	}
	return res, runErr
}

func (h *Harness) step(desc string) {
	if h.bar != nil {
		h.bar.Describe(desc)
	}
}

func (h *Harness) done() {
	if h.bar != nil {
		_ = h.bar.Add(1)
	}
}

func (h *Harness) run(ctx context.Context) (*Result, error) {
	o := h.opts
	res := &Result{Started: time.Now().UTC(), Server: h.env.Server.Description, CPUs: numCPU(),
		Options: map[string]any{"table_sizes": o.TableSizes, "backlog": o.Backlog, "window_s": o.Window.Seconds(),
			"warmup_s": o.Warmup.Seconds(), "rounds": o.Rounds, "latency_s": o.LatencyDuration.Seconds(), "idle_s": o.IdleWindow.Seconds(),
			"procs": o.Procs, "ci": o.CI, "tune": o.Tune}}
	var flush, binlog string
	_ = h.env.Admin.QueryRowContext(ctx, "SELECT @@innodb_flush_log_at_trx_commit, @@sync_binlog").Scan(&flush, &binlog)
	res.Durable = fmt.Sprintf("innodb_flush_log_at_trx_commit=%s sync_binlog=%s", flush, binlog)

	if o.FutureOnly {
		return res, h.runFutureOnly(ctx, res)
	}
	if o.Throughput {
		return h.runThroughput(ctx, res)
	}
	if o.Capacity != nil {
		if err := h.env.Preload(ctx, slices.Min(o.TableSizes)); err != nil {
			return res, err
		}
		return h.runCapacity(ctx, res)
	}
	specs := h.plan()
	// One step per throughput point, per table size's EXPLAIN, per latency
	// rate and strategy, and per idle strategy (CI: skiplocked only).
	steps := len(specs) + len(o.TableSizes)
	if !o.Tune {
		strats := 2
		if o.CI {
			strats = 1
		}
		steps += len(o.Rates)*strats + strats + len(o.FutureJobs)
	} else {
		steps += tuneMaxEvals
	}
	if o.Progress != nil {
		h.bar = progressbar.NewOptions(steps, progressbar.OptionSetWriter(o.Progress), progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30), progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish(),
			progressbar.OptionSetDescription("bench"))
		defer h.bar.Finish()
	}
	start := time.Now()
	var planErr error
	sizes := slices.Clone(o.TableSizes)
	slices.Sort(sizes)
	for _, size := range sizes {
		var skipClaim float64 // jobs per claim of the last headline skiplocked point
		h.step(fmt.Sprintf("pre-load %d terminal rows", size))
		if err := h.env.Preload(ctx, size); err != nil {
			return res, err
		}
		h.step(fmt.Sprintf("EXPLAIN at %d rows", size))
		// Plans are judged only on a table large enough for the optimizer
		// to care: below PlanJudgeMinRows a full scan can be its right
		// choice, and the plans are reported, not enforced.
		plans, err := h.explainAll(ctx, size == sizes[len(sizes)-1] && size >= PlanJudgeMinRows)
		if err != nil {
			return res, err
		}
		h.done()
		res.Plans = append(res.Plans, plans...)
		for _, p := range plans {
			if p.Enforced && len(p.Violations) > 0 {
				planErr = fmt.Errorf("%w: %s at %d rows: %v", ErrPlanViolation, p.Query, p.TableRows, p.Violations)
			}
		}
		for _, spec := range specs {
			if spec.TableRows != size {
				continue
			}
			h.step(spec.Label())
			run := spec
			claim := 0
			if spec.Group == "headline" && spec.Strategy == StrategyCeiling && skipClaim > 0 {
				// The ceiling at the claim size skiplocked just used.
				claim = max(1, int(math.Round(skipClaim)))
				run.BatchLimit = claim
			}
			pt, err := h.measureThroughput(ctx, run)
			if err != nil {
				return res, err
			}
			pt.PointSpec, pt.ClaimSize = spec, claim
			if spec.Group == "headline" && spec.Strategy == StrategySkip {
				skipClaim = pt.Diagnosis.JobsPerClaim
			}
			h.done()
			o.Logger.Info("bench point", "group", spec.Group, "strategy", spec.Strategy, "replicas", spec.Replicas,
				"workers", spec.Workers, "batch_limit", spec.BatchLimit, "table_rows", spec.TableRows,
				"throughput", fmt.Sprintf("%.0f", pt.Throughput), "claim_conflicts", pt.Counters.ClaimConflicts,
				"deadlocks", pt.Counters.Deadlocks, "statements_per_job", fmt.Sprintf("%.2f", pt.StatementsPerJob))
			res.Points = append(res.Points, pt)
		}
		if size == sizes[0] {
			if err := h.afterSmallest(ctx, res); err != nil {
				return res, err
			}
			if !o.Tune {
				if err := h.futureAxis(ctx, res); err != nil {
					return res, err
				}
			}
		}
	}
	res.Points = MergeRounds(res.Points)
	ApplyRatios(res)
	res.Targets = EvaluateTargets(res)
	res.Duration = time.Since(start).Seconds()
	if o.CI {
		cmp, err := h.compareBaseline(res)
		if err != nil {
			return res, err
		}
		res.CI = cmp
		if cmp != nil && !cmp.OK {
			return res, errors.Join(planErr, ErrTargetMissed)
		}
	}
	return res, planErr
}

// runThroughput runs the throughput report alone (Options.Throughput).
func (h *Harness) runThroughput(ctx context.Context, res *Result) (*Result, error) {
	o := h.opts
	start := time.Now()
	enqueue := 4
	if o.DrainOnly {
		enqueue = 0
	}
	river := 0
	if o.River {
		river = 1
	}
	scan := 0
	if o.ReplicaScan {
		scan = len(ReplicaScanCounts) - 1
	}
	steps := o.Rounds*(len(ThroughputCeilingBatches)+2+len(BestFlagsCandidates())+scan+enqueue+river) + river
	if len(o.ReplicaCounts) > 0 {
		steps = o.Rounds * len(o.ReplicaCounts)
	}
	if !o.DrainOnly && len(o.ReplicaCounts) == 0 {
		steps += 2 // pickup at 200 jobs/s, idle cost
	}
	if o.Progress != nil {
		h.bar = progressbar.NewOptions(steps, progressbar.OptionSetWriter(o.Progress), progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30), progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish(),
			progressbar.OptionSetDescription("bench --throughput"))
		defer h.bar.Finish()
	}
	if err := h.env.Preload(ctx, slices.Min(o.TableSizes)); err != nil {
		return res, err
	}
	// Pickup and the idle cost first, on the fresh table: measured after
	// the enqueue points (100k+ rows inserted and deleted) the same pickup
	// came out at 0.3–2.9 s p50 in smoke runs on a loaded machine, at
	// 13–25 ms before them; the cause is not known yet.
	var err error
	if !o.DrainOnly && len(o.ReplicaCounts) == 0 {
		err = h.pickupAndIdle(ctx, res)
	}
	var tr *ThroughputResult
	if err == nil {
		tr, err = h.measureThroughputReport(ctx)
	}
	res.Throughput = tr
	res.Targets = ThroughputTargets(tr)
	if len(o.ReplicaCounts) == 0 { // narrowed to the replica scan: no pickup or idle point
		res.Targets = append(res.Targets, pickupIdleTargets(res)...)
	}
	res.Duration = time.Since(start).Seconds()
	return res, err
}

// pickupAndIdle measures, before the throughput rounds, jobq's pickup
// latency at 200 jobs/s through the API and an idle replica's queries/s
// (skiplocked, 3 replicas at their defaults), so the throughput report
// shows what its drains cost neither.
func (h *Harness) pickupAndIdle(ctx context.Context, res *Result) error {
	o := h.opts
	spec := h.headline(StrategySkip, h.env.TableRows)
	h.step("throughput: pickup at 200 jobs/s")
	lp, err := h.measureLatency(ctx, spec, 200, o.LatencyDuration)
	h.done()
	if err != nil {
		return err
	}
	o.Logger.Info("bench latency", "strategy", StrategySkip, "rate", 200, "pickup_p50_ms", lp.Pickup.P50, "pickup_p99_ms", lp.Pickup.P99, "errors", lp.Errors)
	res.Latency = append(res.Latency, lp)
	h.step("throughput: idle cost")
	ip, err := h.measureIdle(ctx, spec, o.IdleWindow)
	h.done()
	if err != nil {
		return err
	}
	o.Logger.Info("bench idle", "strategy", StrategySkip, "queries_per_s", fmt.Sprintf("%.2f", ip.QueriesPerSecond))
	res.Idle = append(res.Idle, ip)
	return nil
}

// afterSmallest runs, on the smallest table, the latency test, the idle
// cost and (with Tune) the tuning search.
func (h *Harness) afterSmallest(ctx context.Context, res *Result) error {
	o := h.opts
	if o.Tune {
		tr, err := h.tune(ctx)
		if err != nil {
			return err
		}
		res.Tune = tr
		return nil
	}
	latency := []string{StrategyClassic, StrategySkip}
	if o.CI {
		latency = latency[1:] // the gated metrics need jobq's latency only
	}
	for _, strat := range latency {
		for _, rt := range o.Rates {
			spec := h.headline(strat, h.env.TableRows)
			h.step(fmt.Sprintf("latency %s at %d jobs/s", strat, rt))
			lp, err := h.measureLatency(ctx, spec, rt, o.LatencyDuration)
			if err != nil {
				return err
			}
			h.done()
			o.Logger.Info("bench latency", "strategy", strat, "rate", rt, "pickup_p50_ms", lp.Pickup.P50,
				"pickup_p99_ms", lp.Pickup.P99, "errors", lp.Errors)
			res.Latency = append(res.Latency, lp)
		}
	}
	idle := []string{StrategySkip, StrategyCAS}
	if o.CI {
		idle = idle[:1]
	}
	for _, strat := range idle {
		h.step(fmt.Sprintf("idle cost %s", strat))
		ip, err := h.measureIdle(ctx, h.headline(strat, h.env.TableRows), o.IdleWindow)
		if err != nil {
			return err
		}
		h.done()
		o.Logger.Info("bench idle", "strategy", strat, "queries_per_s", fmt.Sprintf("%.2f", ip.QueriesPerSecond))
		res.Idle = append(res.Idle, ip)
	}
	return nil
}

// headline is strategy strat at its defaults with 3 replicas. The ceiling
// runs 3 loops claiming min(BatchLimit, Workers) = 50 jobs per transaction,
// the most a jobq replica at its defaults claims at once (never more than
// its free worker slots); the classic design runs 3 replicas of 50 workers,
// LIMIT 200, a fixed 1 s poll.
func (h *Harness) headline(strat string, rows int) PointSpec {
	rc := defaultReplicaConfig(strat)
	rc.ClaimSlots = h.opts.ClaimSlots
	if !isJobq(strat) {
		rc.Strategy, rc.PollJitter = "", 0
	}
	if strat == StrategyCeiling || strat == StrategyCeilingQueue {
		rc.BatchLimit = min(rc.BatchLimit, rc.Workers)
	}
	return PointSpec{Group: "headline", Strategy: strat, ReplicaConfig: rc, TableRows: rows, Procs: h.opts.Procs && isJobq(strat)}
}

func isJobq(strat string) bool { return strat == StrategySkip || strat == StrategyCAS }

// plan lists the throughput points: the headline four at every table size,
// then the sweeps at the smallest.
func (h *Harness) plan() []PointSpec {
	o := h.opts
	var specs []PointSpec
	smallest := slices.Min(o.TableSizes)
	for _, size := range o.TableSizes {
		if o.CI && size != smallest {
			continue // CI: the bigger table is only EXPLAINed
		}
		for range o.Rounds {
			// The ceiling right after the skiplocked point it is compared
			// with, at the claim size that point used (Point.ClaimSize).
			for _, s := range []string{StrategySkip, StrategyCeiling, StrategyCAS, StrategyClassic, StrategyCeilingQueue} {
				if o.CI && s == StrategyCeilingQueue {
					continue // reference only; CI compares against the ceiling
				}
				specs = append(specs, h.headline(s, size))
			}
		}
	}
	if o.Tune {
		return specs
	}
	add := func(group, strat string, f func(*PointSpec)) {
		p := h.headline(strat, smallest)
		p.Group = group
		f(&p)
		if p.ReplicaConfig == h.headline(strat, smallest).ReplicaConfig {
			return // measured as a headline point
		}
		specs = append(specs, p)
	}
	for _, b := range o.Batches {
		for _, s := range []string{StrategyCeiling, StrategyClassic, StrategyCAS, StrategySkip} {
			// jobq never claims more than its free worker slots: give it
			// enough workers for the batch limit to matter.
			add("batch", s, func(p *PointSpec) { p.BatchLimit, p.Workers = b, max(p.Workers, b) })
		}
	}
	for _, r := range o.Replicas {
		for _, s := range []string{StrategyCAS, StrategySkip} {
			add("replicas", s, func(p *PointSpec) { p.Replicas = r })
		}
	}
	for _, w := range o.Workers {
		add("workers", StrategySkip, func(p *PointSpec) { p.Workers = w })
	}
	for _, j := range o.Jitters {
		for _, s := range []string{StrategyCAS, StrategySkip} {
			add("jitter", s, func(p *PointSpec) { p.Replicas, p.PollJitter = 4, j })
		}
	}
	for _, pi := range o.Polls {
		add("poll", StrategySkip, func(p *PointSpec) {
			p.PollInterval = pi
			p.PollJitter = min(p.PollJitter, pi/5)
		})
	}
	return specs
}

// outPath joins the output directory and name.
func outPath(dir, name string) string { return filepath.Join(dir, name) }
