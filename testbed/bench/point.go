package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jobq/jobq/scheduler"
)

// PointSpec is one throughput measurement.
type PointSpec struct {
	// Group names the sweep the point belongs to: "headline" (every
	// strategy at its defaults, at every table size), "batch", "replicas",
	// "workers", "jitter", "poll".
	Group    string `json:"group"`
	Strategy string `json:"strategy"` // ceiling, classic, cas, skiplocked
	ReplicaConfig
	TableRows int  `json:"table_rows"` // terminal rows pre-loaded in job_queue
	Procs     bool `json:"procs"`      // replicas as `jobq serve` processes
}

// Label is a short human name of the point.
func (p PointSpec) Label() string {
	return fmt.Sprintf("%s %s r=%d w=%d b=%d poll=%s jitter=%s rows=%d", p.Group, p.Strategy, p.Replicas, p.Workers,
		p.BatchLimit, p.PollInterval, p.PollJitter, p.TableRows)
}

// Point is a measured PointSpec.
type Point struct {
	PointSpec
	// Throughput is completed jobs per second over the measurement window:
	// from Options.Warmup after the first completion until Options.Window
	// passed or 90% of the backlog was done.
	Throughput float64 `json:"throughput_jobs_per_s"`
	// VsCeiling and VsClassic are Throughput divided by the ceiling's and
	// the classic baseline's throughput at the same table size, measured in
	// this invocation (0 when there is no such baseline); for points
	// measured in rounds, the median of the per-round ratios (PairedRatio).
	VsCeiling float64 `json:"vs_ceiling"`
	VsClassic float64 `json:"vs_classic"`
	// ClaimSize is, for a headline ceiling point, the jobs per claim its
	// loops ran at: the claim size the skiplocked point measured just
	// before it in the same round used (0: the spec's BatchLimit). A
	// ceiling is compared with jobq only at the claim size jobq used.
	ClaimSize int `json:"claim_size,omitempty"`
	// Rounds are the throughputs of every round of a repeated point (see
	// Options.Rounds); Throughput is their median.
	Rounds []float64 `json:"rounds,omitempty"`
	// Completed and Seconds cover the whole run, start to stop.
	Completed int64    `json:"completed"`
	Seconds   float64  `json:"seconds"`
	Counters  Counters `json:"counters"`
	// StatementsPerJob is the runner's own statements (StmtCounter) per
	// completed job: exact.
	StatementsPerJob float64 `json:"statements_per_job"`
	// RowsWrittenPerJob is the rows the runner's writes changed (inserted,
	// updated, deleted; StmtCounter.Rows) per completed job: exact.
	RowsWrittenPerJob float64 `json:"rows_written_per_job"`
	// Server* are SHOW GLOBAL STATUS deltas over the run per completed job:
	// Questions, Handler_read_* (rows examined through indexes and table
	// scans) and Innodb_rows_read. Server-wide: other clients of a shared
	// server inflate them.
	ServerQuestionsPerJob    float64 `json:"server_questions_per_job"`
	ServerRowsExaminedPerJob float64 `json:"server_rows_examined_per_job"`
	ServerInnodbRowsPerJob   float64 `json:"server_innodb_rows_read_per_job"`
	// Diagnosis is where the run's time went (CPU, row-lock waits, claim
	// sizes).
	Diagnosis Diagnosis `json:"diagnosis"`
}

// newRunner builds the runner of a spec.
func (h *Harness) newRunner(spec PointSpec, withAPI bool) Runner {
	switch spec.Strategy {
	case StrategyCeiling, StrategyCeilingQueue:
		return newCeiling(h.env.DSN, spec.Replicas, spec.BatchLimit, spec.Strategy == StrategyCeilingQueue)
	case StrategyClassic:
		return newClassic(h.env.DSN, spec.Replicas, spec.Workers, spec.BatchLimit, spec.PollInterval, withAPI)
	}
	rc := spec.ReplicaConfig
	if rc.Strategy == "" {
		rc.Strategy = spec.Strategy
	}
	if spec.Procs {
		return newJobqProcs(h.opts.Binary, h.env.DSN, logDirFor(h.opts.Out), h.env.Admin, rc)
	}
	return newJobqInProc(h.env.DSN, rc, withAPI)
}

// measureThroughput seeds a backlog, runs the spec's runner against it and
// measures throughput, counters and DB cost per job.
func (h *Harness) measureThroughput(ctx context.Context, spec PointSpec) (Point, error) {
	pt := Point{PointSpec: spec}
	if spec.Strategy == StrategySkip || spec.Strategy == StrategyCAS {
		pt.ReplicaConfig.Strategy = spec.Strategy
	}
	if err := h.env.Reset(ctx); err != nil {
		return pt, err
	}
	backlog := h.opts.Backlog
	if spec.Strategy == StrategyClassic {
		// The classic loop is capped at Batch per replica per poll; a
		// window's worth (plus slack) is enough and keeps the reset cheap.
		backlog = min(backlog, int(float64(spec.Replicas*spec.BatchLimit)*(h.opts.Window+h.opts.Warmup).Seconds()/spec.PollInterval.Seconds())+2*spec.Replicas*spec.BatchLimit)
	}
	if _, err := h.env.Seed(ctx, backlog); err != nil {
		return pt, err
	}
	before, err := ReadStatus(ctx, h.env.Admin)
	if err != nil {
		return pt, err
	}
	r := h.newRunner(spec, false)
	if spec.Group == "headline" && spec.Strategy == StrategySkip && !spec.Procs && !h.profiled {
		h.profiled = true
		defer startCPUProfile(h.opts.Out, cpuProfileName)()
	}
	if h.profileAs != "" && !spec.Procs {
		defer startCPUProfile(h.opts.Out, h.profileAs)()
	}
	h.profileAs = ""
	cpu0 := takeCPU(0)
	start := time.Now()
	if err := r.Start(ctx); err != nil {
		_ = r.Stop()
		return pt, fmt.Errorf("%s: start: %w", spec.Label(), err)
	}
	stopAt := int64(float64(backlog) * 0.9)
	// The window opens Warmup after the first completion: a runner that
	// waits for its first poll tick is not charged for the wait.
	firstBy := time.Now().Add(spec.PollInterval + 10*time.Second)
	for r.Completed() == 0 && time.Now().Before(firstBy) && sleepCtx(ctx, 5*time.Millisecond) {
	}
	if !sleepCtx(ctx, h.opts.Warmup) {
		_ = r.Stop()
		return pt, ctx.Err()
	}
	c1, t1 := r.Completed(), time.Now()
	c2, t2 := c1, t1
	for ctx.Err() == nil {
		sleepCtx(ctx, 10*time.Millisecond)
		c2, t2 = r.Completed(), time.Now()
		if t2.Sub(t1) >= h.opts.Window || c2 >= stopAt {
			break
		}
	}
	if c1 >= stopAt || c2 == c1 {
		// Done (or stuck) within the warm-up: measure from the start.
		c1, t1 = 0, start
	}
	stopErr := r.Stop()
	elapsed := time.Since(start)
	cpu1 := takeCPU(cpu0.serverPID)
	after, err := ReadStatus(ctx, h.env.Admin)
	if err != nil {
		return pt, err
	}
	pt.Throughput = rate(c2-c1, t2.Sub(t1))
	pt.Completed = r.Completed()
	pt.Seconds = elapsed.Seconds()
	pt.Counters = r.Counters()
	d := after.Sub(before)
	pt.StatementsPerJob = perJob(pt.Counters.Statements, pt.Completed)
	pt.RowsWrittenPerJob = perJob(pt.Counters.RowsWritten, pt.Completed)
	pt.ServerQuestionsPerJob = perJob(d["Questions"], pt.Completed)
	pt.ServerRowsExaminedPerJob = perJob(d.RowsExamined(), pt.Completed)
	pt.ServerInnodbRowsPerJob = perJob(d["Innodb_rows_read"], pt.Completed)
	pt.Diagnosis = diagnose(cpu0, cpu1, d, pt.Completed)
	if cs, ok := r.(interface{ claimStats() (claims, jobs int64) }); ok {
		if claims, jobs := cs.claimStats(); claims > 0 {
			pt.Diagnosis.JobsPerClaim = float64(jobs) / float64(claims)
		}
	}
	if stopErr != nil {
		return pt, fmt.Errorf("%s: stop: %w", spec.Label(), stopErr)
	}
	return pt, ctx.Err()
}

// rate is n per second of d (0 for d ≤ 0).
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// perJob is n divided by jobs; -1 when n is not observable (< 0), 0 without jobs.
func perJob(n, jobs int64) float64 {
	if n < 0 {
		return -1
	}
	if jobs <= 0 {
		return 0
	}
	return float64(n) / float64(jobs)
}

// Ratio is x / base, or 0 when the base is missing (≤ 0). Every figure in
// the report is printed with its ratio to the ceiling and to the classic
// baseline measured in the same invocation.
func Ratio(x, base float64) float64 {
	if base <= 0 {
		return 0
	}
	return x / base
}

// defaultReplicaConfig is a replica at jobq's defaults with 3 replicas.
func defaultReplicaConfig(strategy string) ReplicaConfig {
	return ReplicaConfig{Strategy: strategy, Replicas: 3, Workers: scheduler.WorkersDefault,
		BatchLimit: scheduler.BatchLimitDefault, PollInterval: scheduler.PollIntervalDefault,
		PollJitter: scheduler.PollJitterDefault}
}

// MergeRounds folds points with the same spec into one: the round with the
// median throughput (the lower middle for an even count), with every
// round's throughput in Rounds. Order follows each spec's first round.
func MergeRounds(pts []Point) []Point {
	var order []PointSpec
	by := map[PointSpec][]Point{}
	for _, p := range pts {
		if _, ok := by[p.PointSpec]; !ok {
			order = append(order, p.PointSpec)
		}
		by[p.PointSpec] = append(by[p.PointSpec], p)
	}
	out := make([]Point, 0, len(order))
	for _, spec := range order {
		rs := by[spec]
		if len(rs) == 1 {
			out = append(out, rs[0])
			continue
		}
		sorted := slices.Clone(rs)
		slices.SortFunc(sorted, func(a, b Point) int { return cmp.Compare(a.Throughput, b.Throughput) })
		m := sorted[(len(sorted)-1)/2]
		m.Rounds = nil
		for _, r := range rs {
			m.Rounds = append(m.Rounds, r.Throughput)
		}
		out = append(out, m)
	}
	return out
}
