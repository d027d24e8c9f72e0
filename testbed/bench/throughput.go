package bench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/scheduler"
)

// The throughput report (`jobq bench --throughput`, issue #17) measures in
// one run, in interleaved rounds:
//
//   - drain of a backlog of no-op jobs by the raw SQL ceiling at each claim
//     size in ThroughputCeilingBatches (4 loops), the best of which is the
//     table's physical limit in that round; by jobq at its defaults (3
//     replicas); and by jobq at the "best flags" candidates;
//   - enqueue: raw single-row INSERTs from N connections against single
//     POST /v1/jobs from N concurrent HTTP clients (with p99), and raw
//     1,000-row INSERTs against POST /v1/jobs:batch;
//   - statements and rows written per job of every drain point.
//
// Every jobq figure is a ratio to its raw-SQL counterpart of the same round;
// the reported ratio is the median of the rounds' ratios.

// ThroughputCeilingBatches are the claim sizes the ceiling is measured at;
// its best is the physical limit jobq is compared with.
var ThroughputCeilingBatches = []int{200, 1000, 2000}

// throughputCeilingLoops is the ceiling's claimers (as in the issue).
const throughputCeilingLoops = 4

// EnqueueClients is the concurrency of the single-submit comparison.
const EnqueueClients = 32

// enqueueBatchClients is the concurrency of the batch comparison.
const enqueueBatchClients = 4

// enqueueWindow is how long each enqueue point submits.
const enqueueWindow = 3 * time.Second

// BestFlagsCandidates are the jobq configurations tried as "best flags";
// the report names the best one and its `jobq serve` flags.
func BestFlagsCandidates() []ReplicaConfig {
	base := func(replicas, workers, batch, queue int) ReplicaConfig {
		rc := defaultReplicaConfig(scheduler.StrategySkipLocked)
		rc.Replicas, rc.Workers, rc.BatchLimit, rc.RunQueue = replicas, workers, batch, queue
		return rc
	}
	twoClaims := base(1, 4000, 2000, -1) // two 2,000-job claims in flight
	twoClaims.ClaimsInFlight = 2
	return []ReplicaConfig{
		base(1, 2000, 1000, -1), // the River-like config
		base(1, 2000, 2000, -1), // the ceiling's best claim size
		base(1, 200, 1000, 2000),
		base(2, 200, 1000, 2000),
		twoClaims,
	}
}

// ReplicaScanCounts are the replica counts at jobq's defaults measured in
// every round with Options.ReplicaScan (3, the defaults point, among them):
// adding replicas must never lower the total throughput.
var ReplicaScanCounts = []int{1, 2, 3, 4, 8}

// DrainPoint is one drain configuration over the rounds.
type DrainPoint struct {
	Name   string `json:"name"`
	Flags  string `json:"flags,omitempty"` // `jobq serve` flags (jobq points)
	Spec   PointSpec
	Rounds []float64 `json:"rounds_jobs_per_s"`
	// Throughput is the median of Rounds; VsCeiling the median of the
	// per-round ratios to that round's best ceiling.
	Throughput        float64 `json:"jobs_per_s"`
	VsCeiling         float64 `json:"vs_best_ceiling"`
	StatementsPerJob  float64 `json:"statements_per_job"`
	RowsWrittenPerJob float64 `json:"rows_written_per_job"`
	JobsPerClaim      float64 `json:"jobs_per_claim"`
	// VsRiver is the median of the per-round ratios to the River peer's
	// jobs/s in the same round (0: the peer was not measured).
	VsRiver float64 `json:"vs_river,omitempty"`
}

// EnqueuePoint is one enqueue path over the rounds.
type EnqueuePoint struct {
	Name    string    `json:"name"`
	Clients int       `json:"clients"`
	Rounds  []float64 `json:"rounds_jobs_per_s"`
	// JobsPerSecond is the median of Rounds; P50Ms/P99Ms the request
	// latency of the median round (single submits only).
	JobsPerSecond float64 `json:"jobs_per_s"`
	P50Ms         float64 `json:"p50_ms,omitempty"`
	P99Ms         float64 `json:"p99_ms,omitempty"`
	// VsRaw is the median per-round ratio to its raw-SQL counterpart.
	VsRaw float64 `json:"vs_raw,omitempty"`
	// FsyncsPerJob is the server's Innodb_data_fsyncs delta per job
	// (server-wide: other clients inflate it): how many jobs share a
	// durable commit.
	FsyncsPerJob float64 `json:"fsyncs_per_job"`
	Errors       int64   `json:"errors"`
	// StatementsPerJob is the statements the path's own pool sent per job
	// (exact: a counting connector); BenchCPUMicrosPerJob this process's
	// CPU per job (client and, for the API, the in-process server);
	// ServerCPUMicrosPerJob the local database server's (-1 when it
	// cannot be told). Medians of the rounds.
	StatementsPerJob      float64 `json:"statements_per_job"`
	BenchCPUMicrosPerJob  float64 `json:"bench_cpu_us_per_job"`
	ServerCPUMicrosPerJob float64 `json:"server_cpu_us_per_job"`
}

// enqueueRound is one enqueue path's measurement in one round.
type enqueueRound struct {
	jobsPerS, p50, p99, fsyncs float64
	errs                       int64
	stmts, benchCPU, serverCPU float64 // per job; serverCPU -1 when unknown
}

// ThroughputResult is the throughput report.
type ThroughputResult struct {
	Rounds   int          `json:"rounds"`
	Ceilings []DrainPoint `json:"ceilings"`
	Best     DrainPoint   `json:"best_ceiling"` // the ceiling with the highest median
	Defaults DrainPoint   `json:"jobq_defaults"`
	// NoRunQueue is the defaults with --run-queue -1 (claims sized by free
	// workers, as before the run queue).
	NoRunQueue DrainPoint     `json:"jobq_defaults_without_run_queue"`
	BestFlags  []DrainPoint   `json:"jobq_best_flag_candidates"`
	Enqueue    []EnqueuePoint `json:"enqueue"`
	// River is the River peer (Options.River; nil when not asked for).
	River *RiverPoint `json:"river,omitempty"`
	// ReplicaScan is jobq at its defaults at each of ReplicaScanCounts
	// (Options.ReplicaScan; the 3-replica entry is Defaults), each with
	// VsBestCount, the median of the per-round ratios to that round's best
	// replica count.
	ReplicaScan []ScanPoint `json:"replica_scan,omitempty"`
	// DefaultsVsBestFlags and OneReplicaVsBestFlags are the medians of the
	// per-round ratios of the defaults (3 replicas; 1 replica, from the
	// replica scan: 0 without it) to the best flags candidate
	// (BestFlagsPoint) in the same round.
	DefaultsVsBestFlags   float64 `json:"defaults_vs_best_flags"`
	OneReplicaVsBestFlags float64 `json:"defaults_1_replica_vs_best_flags,omitempty"`
}

// ScanPoint is one replica count of the replica scan.
type ScanPoint struct {
	DrainPoint
	Replicas    int     `json:"replicas"`
	VsBestCount float64 `json:"vs_best_replica_count"`
}

// measureThroughputReport runs the rounds.
func (h *Harness) measureThroughputReport(ctx context.Context) (*ThroughputResult, error) {
	o := h.opts
	if len(o.ReplicaCounts) > 0 {
		return h.measureReplicaCounts(ctx)
	}
	tr := &ThroughputResult{Rounds: o.Rounds}
	ceil := make([]DrainPoint, len(ThroughputCeilingBatches))
	for i, b := range ThroughputCeilingBatches {
		rc := defaultReplicaConfig(StrategyCeiling)
		rc.Strategy, rc.PollJitter, rc.Replicas, rc.BatchLimit, rc.Workers = "", 0, throughputCeilingLoops, b, b
		ceil[i] = DrainPoint{Name: fmt.Sprintf("raw SQL ceiling, %d loops, %d-job claims", throughputCeilingLoops, b),
			Spec: PointSpec{Group: "throughput", Strategy: StrategyCeiling, ReplicaConfig: rc, TableRows: h.env.TableRows}}
	}
	def := DrainPoint{Name: "jobq defaults, 3 replicas", Spec: h.headline(StrategySkip, h.env.TableRows)}
	def.Spec.Group = "throughput"
	def.Flags = "(defaults)"
	// The defaults without the run queue: what the run queue is worth.
	noQueue := def
	noQueue.Spec.RunQueue, noQueue.Flags = -1, "--run-queue -1"
	var scan []DrainPoint // the replica scan's points but the defaults' own count
	if o.ReplicaScan {
		for _, n := range ReplicaScanCounts {
			if n == def.Spec.Replicas {
				continue
			}
			sp := def
			sp.Spec.Replicas = n
			sp.Name = fmt.Sprintf("jobq defaults, %d replica(s)", n)
			scan = append(scan, sp)
		}
	}
	var best []DrainPoint
	for _, rc := range BestFlagsCandidates() {
		p := PointSpec{Group: "throughput", Strategy: StrategySkip, ReplicaConfig: rc, TableRows: h.env.TableRows, Procs: o.Procs}
		flags := fmt.Sprintf("--workers %d --batch-limit %d --run-queue %d", rc.Workers, rc.BatchLimit, rc.RunQueue)
		if rc.ClaimsInFlight > 1 {
			flags += fmt.Sprintf(" --claims-in-flight %d", rc.ClaimsInFlight)
		}
		best = append(best, DrainPoint{Name: fmt.Sprintf("jobq, %d replica(s)", rc.Replicas), Spec: p, Flags: flags})
	}
	enq := []EnqueuePoint{
		{Name: "raw single-row INSERT (autocommit)", Clients: EnqueueClients},
		{Name: "POST /v1/jobs (1 replica)", Clients: EnqueueClients},
		{Name: "raw 1,000-row INSERT", Clients: enqueueBatchClients},
		{Name: "POST /v1/jobs:batch, 1,000 jobs (1 replica)", Clients: enqueueBatchClients},
	}
	ratios := map[string][]float64{}
	riverRatios := map[string][]float64{}
	var peer *riverPeer
	if o.River {
		tr.River = &RiverPoint{Name: "River, 1 client, 2,000 workers (PostgreSQL)"}
		h.step("throughput: build the River peer")
		var skip string
		peer, skip = prepareRiverPeer(ctx, o.RiverDir, o.RiverURL, o.Out)
		h.done()
		if skip != "" {
			tr.River.Skipped = skip
			fmt.Fprintln(o.Notice, skip)
		}
	}
	got := map[int][]enqueueRound{}
	profiles := map[string]string{} // jobq point → its profile file (first round)
	measure := func(dp *DrainPoint) (Point, error) {
		h.step("throughput: " + dp.Name)
		if o.ProfileDrain && dp.Spec.Strategy != StrategyCeiling {
			if _, done := profiles[dp.Name+dp.Flags]; !done {
				h.profileAs = fmt.Sprintf("cpu_drain_%d.pprof", len(profiles))
				profiles[dp.Name+dp.Flags] = h.profileAs
				o.Logger.Info("bench throughput CPU profile", "name", dp.Name, "flags", dp.Flags, "file", h.profileAs)
			}
		}
		pt, err := h.measureThroughput(ctx, dp.Spec)
		h.done()
		if err != nil {
			return pt, err
		}
		o.Logger.Info("bench throughput point", "name", dp.Name, "flags", dp.Flags, "jobs_per_s", fmt.Sprintf("%.0f", pt.Throughput),
			"statements_per_job", fmt.Sprintf("%.3f", pt.StatementsPerJob), "rows_written_per_job", fmt.Sprintf("%.3f", pt.RowsWrittenPerJob),
			"jobs_per_claim", fmt.Sprintf("%.1f", pt.Diagnosis.JobsPerClaim),
			"bench_cpu_cores", fmt.Sprintf("%.2f", pt.Diagnosis.BenchCPUCores), "server_cpu_cores", fmt.Sprintf("%.2f", pt.Diagnosis.ServerCPUCores),
			"row_lock_ms_per_1000_jobs", fmt.Sprintf("%.0f", pt.Diagnosis.RowLockMsPer1000))
		dp.Rounds = append(dp.Rounds, pt.Throughput)
		dp.StatementsPerJob, dp.RowsWrittenPerJob, dp.JobsPerClaim = pt.StatementsPerJob, pt.RowsWrittenPerJob, pt.Diagnosis.JobsPerClaim
		return pt, nil
	}
	for round := range o.Rounds {
		bestRound := 0.0
		for i := range ceil {
			pt, err := measure(&ceil[i])
			if err != nil {
				return tr, err
			}
			bestRound = max(bestRound, pt.Throughput)
		}
		riverRound := 0.0
		if peer != nil {
			h.step("throughput: River peer")
			r, err := peer.run(ctx, o.Backlog, o.Warmup, o.Window)
			h.done()
			switch {
			case ctx.Err() != nil:
				return tr, ctx.Err()
			case err != nil:
				// The peer is a comparison, not jobq: the run goes on without it.
				tr.River.Skipped = fmt.Sprintf("%sround %d failed: %v", riverSkipPrefix, round+1, err)
				fmt.Fprintln(o.Notice, tr.River.Skipped)
				peer = nil
			default:
				tr.River.add(r)
				riverRound = r.WindowJobsPerS
				o.Logger.Info("bench throughput point", "name", tr.River.Name, "river_version", r.RiverVersion,
					"jobs_per_s", fmt.Sprintf("%.0f", r.WindowJobsPerS), "drain_jobs_per_s", fmt.Sprintf("%.0f", r.JobsPerS),
					"insert_jobs_per_s", fmt.Sprintf("%.0f", r.InsertPerS))
			}
		}
		for _, dp := range append(append([]*DrainPoint{&def, &noQueue}, ptrs(best)...), ptrs(scan)...) {
			pt, err := measure(dp)
			if err != nil {
				return tr, err
			}
			ratios[dp.Name+dp.Flags] = append(ratios[dp.Name+dp.Flags], Ratio(pt.Throughput, bestRound))
			if riverRound > 0 {
				riverRatios[dp.Name+dp.Flags] = append(riverRatios[dp.Name+dp.Flags], Ratio(pt.Throughput, riverRound))
			}
		}
		if o.DrainOnly {
			continue
		}
		var rates [4]float64
		for i := range enq {
			h.step("throughput: enqueue " + enq[i].Name)
			er, err := h.measureEnqueue(ctx, i)
			h.done()
			if err != nil {
				return tr, err
			}
			o.Logger.Info("bench enqueue point", "name", enq[i].Name, "clients", enq[i].Clients, "jobs_per_s", fmt.Sprintf("%.0f", er.jobsPerS),
				"p50_ms", fmt.Sprintf("%.2f", er.p50), "p99_ms", fmt.Sprintf("%.2f", er.p99), "fsyncs_per_job", fmt.Sprintf("%.3f", er.fsyncs),
				"statements_per_job", fmt.Sprintf("%.2f", er.stmts), "bench_cpu_us_per_job", fmt.Sprintf("%.0f", er.benchCPU),
				"server_cpu_us_per_job", fmt.Sprintf("%.0f", er.serverCPU), "errors", er.errs)
			rates[i] = er.jobsPerS
			enq[i].Rounds = append(enq[i].Rounds, er.jobsPerS)
			enq[i].Errors += er.errs
			got[i] = append(got[i], er)
		}
		ratios["enq1"] = append(ratios["enq1"], Ratio(rates[1], rates[0]))
		ratios["enq3"] = append(ratios["enq3"], Ratio(rates[3], rates[2]))
	}
	for i := range ceil {
		ceil[i].Throughput = median(ceil[i].Rounds)
	}
	tr.Ceilings = ceil
	tr.Best = slices.MaxFunc(ceil, func(a, b DrainPoint) int { return cmpFloat(a.Throughput, b.Throughput) })
	for _, dp := range append(append([]*DrainPoint{&def, &noQueue}, ptrs(best)...), ptrs(scan)...) {
		dp.Throughput = median(dp.Rounds)
		dp.VsCeiling = median(ratios[dp.Name+dp.Flags])
		if tr.River != nil && tr.River.Skipped == "" {
			dp.VsRiver = median(riverRatios[dp.Name+dp.Flags])
		}
	}
	if tr.River != nil && tr.River.Skipped == "" {
		tr.River.finish()
	}
	tr.Defaults, tr.NoRunQueue, tr.BestFlags = def, noQueue, best
	tr.finishScan(scan)
	if o.DrainOnly {
		return tr, nil
	}
	for i := range enq {
		enq[i].JobsPerSecond = median(enq[i].Rounds)
		m := medianIndex(enq[i].Rounds)
		enq[i].P50Ms, enq[i].P99Ms = got[i][m].p50, got[i][m].p99
		field := func(f func(enqueueRound) float64) float64 {
			xs := make([]float64, len(got[i]))
			for j, r := range got[i] {
				xs[j] = f(r)
			}
			return median(xs)
		}
		enq[i].FsyncsPerJob = field(func(r enqueueRound) float64 { return r.fsyncs })
		enq[i].StatementsPerJob = field(func(r enqueueRound) float64 { return r.stmts })
		enq[i].BenchCPUMicrosPerJob = field(func(r enqueueRound) float64 { return r.benchCPU })
		enq[i].ServerCPUMicrosPerJob = field(func(r enqueueRound) float64 { return r.serverCPU })
	}
	enq[1].VsRaw, enq[3].VsRaw = median(ratios["enq1"]), median(ratios["enq3"])
	tr.Enqueue = enq
	return tr, nil
}

// measureReplicaCounts is the report narrowed to the replica scan at
// Options.ReplicaCounts: jobq at its defaults on each count, interleaved in
// every round, and each count's median ratio to the round's fastest count.
func (h *Harness) measureReplicaCounts(ctx context.Context) (*ThroughputResult, error) {
	o := h.opts
	tr := &ThroughputResult{Rounds: o.Rounds}
	pts := make([]ScanPoint, len(o.ReplicaCounts))
	for i, n := range o.ReplicaCounts {
		spec := h.headline(StrategySkip, h.env.TableRows)
		spec.Group, spec.Replicas = "throughput", n
		pts[i] = ScanPoint{DrainPoint: DrainPoint{Name: fmt.Sprintf("jobq defaults, %d replica(s)", n), Flags: "(defaults)", Spec: spec}, Replicas: n}
	}
	for range o.Rounds {
		for i := range pts {
			dp := &pts[i].DrainPoint
			h.step("throughput: " + dp.Name)
			pt, err := h.measureThroughput(ctx, dp.Spec)
			h.done()
			if err != nil {
				return tr, err
			}
			o.Logger.Info("bench throughput point", "name", dp.Name, "jobs_per_s", fmt.Sprintf("%.0f", pt.Throughput),
				"statements_per_job", fmt.Sprintf("%.3f", pt.StatementsPerJob), "rows_written_per_job", fmt.Sprintf("%.3f", pt.RowsWrittenPerJob),
				"jobs_per_claim", fmt.Sprintf("%.1f", pt.Diagnosis.JobsPerClaim),
				"bench_cpu_cores", fmt.Sprintf("%.2f", pt.Diagnosis.BenchCPUCores), "server_cpu_cores", fmt.Sprintf("%.2f", pt.Diagnosis.ServerCPUCores),
				"row_lock_waits_per_1000_jobs", fmt.Sprintf("%.1f", pt.Diagnosis.RowLockWaitsPer1000),
				"row_lock_ms_per_1000_jobs", fmt.Sprintf("%.0f", pt.Diagnosis.RowLockMsPer1000),
				"deadlocks", pt.Counters.Deadlocks, "lock_wait_timeouts", pt.Counters.LockWaits, "other_db_errors", pt.Counters.OtherErrors)
			dp.Rounds = append(dp.Rounds, pt.Throughput)
			dp.StatementsPerJob, dp.RowsWrittenPerJob, dp.JobsPerClaim = pt.StatementsPerJob, pt.RowsWrittenPerJob, pt.Diagnosis.JobsPerClaim
		}
	}
	for i := range pts {
		pts[i].Throughput = median(pts[i].Rounds)
	}
	tr.ReplicaScan = pts
	scanRatios(pts)
	return tr, nil
}

// scanRatios sets each point's VsBestCount: the median of its per-round
// ratios to the round's fastest count.
func scanRatios(pts []ScanPoint) {
	for i := range pts {
		var rs []float64
		for r := range pts[i].Rounds {
			bestRound := 0.0
			for _, p := range pts {
				if r < len(p.Rounds) {
					bestRound = max(bestRound, p.Rounds[r])
				}
			}
			rs = append(rs, Ratio(pts[i].Rounds[r], bestRound))
		}
		pts[i].VsBestCount = median(rs)
	}
}

// finishScan fills ReplicaScan from the scan's points and the defaults, in
// ReplicaScanCounts order, and the per-round ratios to the best flags.
func (tr *ThroughputResult) finishScan(scan []DrainPoint) {
	bf := tr.BestFlagsPoint()
	tr.DefaultsVsBestFlags = roundRatio(tr.Defaults.Rounds, bf.Rounds)
	if len(scan) == 0 {
		return
	}
	tr.ReplicaScan = nil
	for _, n := range ReplicaScanCounts {
		if n == tr.Defaults.Spec.Replicas {
			tr.ReplicaScan = append(tr.ReplicaScan, ScanPoint{DrainPoint: tr.Defaults, Replicas: n})
			continue
		}
		for _, d := range scan {
			if d.Spec.Replicas == n {
				tr.ReplicaScan = append(tr.ReplicaScan, ScanPoint{DrainPoint: d, Replicas: n})
			}
		}
	}
	scanRatios(tr.ReplicaScan)
	for i := range tr.ReplicaScan {
		if tr.ReplicaScan[i].Replicas == 1 {
			tr.OneReplicaVsBestFlags = roundRatio(tr.ReplicaScan[i].Rounds, bf.Rounds)
		}
	}
}

// roundRatio is the median of the per-round ratios xs[i] / base[i].
func roundRatio(xs, base []float64) float64 {
	var rs []float64
	for i := range min(len(xs), len(base)) {
		rs = append(rs, Ratio(xs[i], base[i]))
	}
	return median(rs)
}

// BestFlagsPoint returns the candidate with the highest ratio to the ceiling.
func (tr *ThroughputResult) BestFlagsPoint() DrainPoint {
	if len(tr.BestFlags) == 0 {
		return DrainPoint{}
	}
	return slices.MaxFunc(tr.BestFlags, func(a, b DrainPoint) int { return cmpFloat(a.VsCeiling, b.VsCeiling) })
}

func ptrs(ds []DrainPoint) []*DrainPoint {
	out := make([]*DrainPoint, len(ds))
	for i := range ds {
		out[i] = &ds[i]
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// medianIndex is the index in xs of the value median(xs) returns.
func medianIndex(xs []float64) int {
	m := median(xs)
	return max(0, slices.Index(xs, m))
}

// measureEnqueue runs enqueue path i (see measureThroughputReport's enq)
// for enqueueWindow and returns jobs/s, request p50/p99 (ms), log fsyncs
// per job, failed requests, statements and CPU per job. The table is reset
// before and after.
func (h *Harness) measureEnqueue(ctx context.Context, i int) (er enqueueRound, err error) {
	if err := h.env.Reset(ctx); err != nil {
		return er, err
	}
	defer func() {
		if rerr := h.env.Reset(ctx); err == nil {
			err = rerr
		}
	}()
	h.env.seq++
	prefix := fmt.Sprintf("e%d-", h.env.seq)
	var (
		done    atomic.Int64
		failed  atomic.Int64
		errOnce sync.Once
		seq     atomic.Int64
		mu      sync.Mutex
		hist    = hdrhistogram.New(1, 60_000_000, 3) // µs
		stmts   StmtCounter
		clients int
		work    func(ctx context.Context) error
		cleanup func()
	)
	record := func(d time.Duration) {
		mu.Lock()
		_ = hist.RecordValue(max(1, d.Microseconds()))
		mu.Unlock()
	}
	key := func() string { return prefix + fmt.Sprint(seq.Add(1)) }
	switch i {
	case 0, 2: // raw SQL
		rows := 1
		clients = EnqueueClients
		if i == 2 {
			rows, clients = 1000, enqueueBatchClients
		}
		db, err := OpenCountingDB(h.env.DSN, clients, &stmts)
		if err != nil {
			return er, err
		}
		cleanup = func() { db.Close() }
		work = func(ctx context.Context) error {
			var b strings.Builder
			b.WriteString(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, max_retry,
    timeout_ms, run_at, create_time, update_time) VALUES `)
			args := make([]any, 0, rows*3)
			for r := range rows {
				if r > 0 {
					b.WriteByte(',')
				}
				b.WriteString("(?, 'noop', ?, ?, IF(? > NOW(6), 'SCHEDULED', 'WAITING'), 0, 3, 0, COALESCE(?, NOW(6)), NOW(6), NOW(6))")
				args = append(args, key(), `{"n":1}`, strings.Repeat("0", 64), sql.NullTime{}, sql.NullTime{})
			}
			t0 := time.Now()
			_, err := db.ExecContext(ctx, b.String(), args...)
			if err == nil {
				record(time.Since(t0))
				done.Add(int64(rows))
			}
			return err
		}
	default: // the API
		// The pool `jobq serve` opens by default (--pool-max-open), counted.
		db, err := OpenCountingDB(h.env.DSN, scheduler.WorkersDefault/2+10, &stmts)
		if err != nil {
			return er, err
		}
		rep, err := startReplica(ctx, db, nil, true) // API only
		if err != nil {
			db.Close()
			return er, err
		}
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * EnqueueClients}, Timeout: 30 * time.Second}
		cleanup = func() { _ = rep.Stop(context.Background()); hc.CloseIdleConnections() }
		clients = EnqueueClients
		n, path := 1, "/v1/jobs"
		if i == 3 {
			clients, n, path = enqueueBatchClients, 1000, "/v1/jobs:batch"
		}
		work = func(ctx context.Context) error {
			var body []byte
			if n == 1 {
				body, _ = json.Marshal(apitype.SubmitRequest{JobKey: key(), JobType: "noop", Params: json.RawMessage(`{"n":1}`)})
			} else {
				jobs := make([]apitype.SubmitRequest, n)
				for j := range jobs {
					jobs[j] = apitype.SubmitRequest{JobKey: key(), JobType: "noop", Params: json.RawMessage(`{"n":1}`)}
				}
				body, _ = json.Marshal(apitype.SubmitBatchRequest{Jobs: jobs})
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, apiURL(rep)+path, bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			t0 := time.Now()
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
			}
			record(time.Since(t0))
			done.Add(int64(n))
			return nil
		}
	}
	defer cleanup()
	before, err := ReadStatus(ctx, h.env.Admin)
	if err != nil {
		return er, err
	}
	stmts0, cpu0 := stmts.Load(), takeCPU(0)
	wctx, cancel := context.WithTimeout(ctx, enqueueWindow)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				if err := work(wctx); err != nil && wctx.Err() == nil {
					failed.Add(1)
					errOnce.Do(func() { h.opts.Logger.Warn("bench enqueue: request failed", "path", i, "err", err) })
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, stmts1 := takeCPU(cpu0.serverPID), stmts.Load()
	after, err := ReadStatus(ctx, h.env.Admin)
	if err != nil {
		return er, err
	}
	d := after.Sub(before)
	n := done.Load()
	mu.Lock()
	er.p50, er.p99 = float64(hist.ValueAtQuantile(50))/1000, float64(hist.ValueAtQuantile(99))/1000
	mu.Unlock()
	er.jobsPerS, er.fsyncs, er.errs = rate(n, elapsed), perJob(d["Innodb_data_fsyncs"], n), failed.Load()
	er.stmts, er.serverCPU = perJob(stmts1-stmts0, n), -1
	if n > 0 {
		er.benchCPU = 1e6 * (cpu1.self - cpu0.self) / float64(n)
		if cpu0.serve >= 0 && cpu1.serve >= 0 && cpu0.serverPID == cpu1.serverPID {
			er.serverCPU = 1e6 * (cpu1.serve - cpu0.serve) / float64(n)
		}
	}
	return er, nil
}

// ThroughputTargets are the done-when ratios of issue #17, from one run.
func ThroughputTargets(tr *ThroughputResult) []Target {
	if tr == nil || len(tr.BestFlags) == 0 && len(tr.ReplicaScan) == 0 {
		return nil
	}
	var ts []Target
	add := func(name, goal string, v, want float64, lessIsBetter bool, unit string) {
		met := v >= want
		if lessIsBetter {
			met = v <= want && v > 0
		}
		t := Target{Name: name, Goal: goal, Value: v, Shown: fmt.Sprintf("%.2f%s", v, unit), Met: met, Measured: v > 0}
		if !met && v > 0 {
			t.Shortfall = shortfall(v, want, unit)
		}
		ts = append(ts, t)
	}
	if len(tr.BestFlags) == 0 { // narrowed to the replica scan (--replica-counts)
		last := tr.ReplicaScan[len(tr.ReplicaScan)-1]
		add(fmt.Sprintf("jobq defaults, %d replicas, vs the best replica count", last.Replicas), "≥ 0.90×", last.VsBestCount, 0.9, false, "×")
		return ts
	}
	add("jobq defaults (3 replicas) vs best ceiling", "≥ 0.60×", tr.Defaults.VsCeiling, 0.6, false, "×")
	bf := tr.BestFlagsPoint()
	add("jobq best flags ("+bf.Flags+", "+fmt.Sprint(bf.Spec.Replicas)+" replica(s)) vs best ceiling", "≥ 0.80×", bf.VsCeiling, 0.8, false, "×")
	// The defaults tune themselves: within 0.9× of the best flags the bench
	// finds, on 1 replica and on 3, and more replicas never drain slower.
	add("jobq defaults (3 replicas) vs best flags", "≥ 0.90×", tr.DefaultsVsBestFlags, 0.9, false, "×")
	if len(tr.ReplicaScan) > 0 {
		add("jobq defaults (1 replica) vs best flags", "≥ 0.90×", tr.OneReplicaVsBestFlags, 0.9, false, "×")
		last := tr.ReplicaScan[len(tr.ReplicaScan)-1]
		add(fmt.Sprintf("jobq defaults, %d replicas, vs the best replica count", last.Replicas), "≥ 0.90×", last.VsBestCount, 0.9, false, "×")
	}
	if tr.River != nil {
		// Medians of the per-round ratios to River in the same round;
		// "not measured" when the peer was skipped.
		add("jobq defaults (3 replicas) vs River (1 client, 2,000 workers, PostgreSQL)", "≥ 1.00×", tr.Defaults.VsRiver, 1.0, false, "×")
		add("jobq best flags ("+bf.Flags+", "+fmt.Sprint(bf.Spec.Replicas)+" replica(s)) vs River", "≥ 1.15×", bf.VsRiver, 1.15, false, "×")
	}
	if len(tr.Enqueue) == 4 {
		add("POST /v1/jobs:batch vs raw 1,000-row INSERT", "≥ 0.35×", tr.Enqueue[3].VsRaw, 0.35, false, "×")
		add(fmt.Sprintf("POST /v1/jobs, %d clients, vs raw single-row INSERT", EnqueueClients), "≥ 0.70×", tr.Enqueue[1].VsRaw, 0.7, false, "×")
		add(fmt.Sprintf("POST /v1/jobs, %d clients, p99", EnqueueClients), "≤ 50 ms", tr.Enqueue[1].P99Ms, 50, true, " ms")
	}
	return ts
}

// WriteThroughput renders the throughput report.
func WriteThroughput(w io.Writer, tr *ThroughputResult) {
	if len(tr.BestFlags) == 0 && len(tr.ReplicaScan) > 0 { // narrowed to the replica scan (--replica-counts)
		writeReplicaScan(w, tr)
		return
	}
	fmt.Fprintf(w, "## Throughput against the raw SQL at its best claim size\n\n")
	fmt.Fprintf(w, "%d interleaved rounds; each jobq ratio is the median of its per-round ratios to that round's best ceiling.\n\n", tr.Rounds)
	fmt.Fprintf(w, "| drain | flags | rounds (jobs/s) | median jobs/s | × best ceiling | × River | jobs/claim | stmts/job | rows written/job |\n|---|---|---|--:|--:|--:|--:|--:|--:|\n")
	row := func(d DrainPoint, ratio string) {
		fmt.Fprintf(w, "| %s | %s | %s | %.0f | %s | %s | %.1f | %s | %s |\n", d.Name, d.Flags, joinRounds(d.Rounds), d.Throughput, ratio,
			fmtRatio(d.VsRiver), d.JobsPerClaim, fmtPerJob(d.StatementsPerJob), fmtPerJob(d.RowsWrittenPerJob))
	}
	for _, c := range tr.Ceilings {
		mark := ""
		if c.Name == tr.Best.Name {
			mark = "best"
		}
		row(c, mark)
	}
	if rp := tr.River; rp != nil && rp.Skipped == "" {
		fmt.Fprintf(w, "| %s | River's bench settings | %s | %.0f | – (other database) | 1.00× | – | – | – |\n", rp.Name, joinRounds(rp.Rounds), rp.Throughput)
	}
	row(tr.Defaults, fmtRatio(tr.Defaults.VsCeiling))
	row(tr.NoRunQueue, fmtRatio(tr.NoRunQueue.VsCeiling))
	for _, b := range tr.BestFlags {
		row(b, fmtRatio(b.VsCeiling))
	}
	fmt.Fprintf(w, "\njobq defaults against the best flags (%s, %d replica(s)), median of the per-round ratios: 3 replicas %s",
		tr.BestFlagsPoint().Flags, tr.BestFlagsPoint().Spec.Replicas, fmtRatio(tr.DefaultsVsBestFlags))
	if len(tr.ReplicaScan) > 0 {
		fmt.Fprintf(w, ", 1 replica %s", fmtRatio(tr.OneReplicaVsBestFlags))
	}
	fmt.Fprintf(w, ".\n")
	writeReplicaScan(w, tr)
	fmt.Fprintf(w, "\nstmts/job and rows written/job: the runner's own statements (BEGIN and COMMIT included) and the rows its writes changed (RowsAffected: inserted, updated, deleted), per completed job, from the last round.\n\n")
	writeRiver(w, tr)
	if len(tr.Enqueue) == 0 {
		return
	}
	fmt.Fprintf(w, "| enqueue | clients | rounds (jobs/s) | median jobs/s | × raw | request p50 | request p99 | fsyncs/job | stmts/job | bench CPU/job | DB CPU/job | failed requests |\n|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, e := range tr.Enqueue {
		rs := make([]string, len(e.Rounds))
		for i, r := range e.Rounds {
			rs[i] = fmt.Sprintf("%.0f", r)
		}
		dbCPU := "–"
		if e.ServerCPUMicrosPerJob >= 0 {
			dbCPU = fmt.Sprintf("%.0f µs", e.ServerCPUMicrosPerJob)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f | %s | %.2f ms | %.2f ms | %.3f | %s | %.0f µs | %s | %d |\n", e.Name, e.Clients, strings.Join(rs, " / "),
			e.JobsPerSecond, fmtRatio(e.VsRaw), e.P50Ms, e.P99Ms, e.FsyncsPerJob, fmtPerJob(e.StatementsPerJob), e.BenchCPUMicrosPerJob, dbCPU, e.Errors)
	}
	fmt.Fprintf(w, "\nEnqueue: %s each, closed loop (each client sends its next request when the last is answered), no scheduler claiming; request latency is per INSERT or per HTTP request. fsyncs/job: Innodb_data_fsyncs delta per job (server-wide; MariaDB counts redo log flushes there) — below 1 means concurrent commits share a flush (group commit). stmts/job: the statements the path's own pool sent (exact). bench CPU/job: this process's CPU (user+sys) per job — the clients and, for the API, the in-process server; DB CPU/job: the local mariadbd/mysqld's (– when it cannot be told: remote, or several on the host); medians of the rounds.\n\n", enqueueWindow)
}

// writeReplicaScan renders the replica scan (nothing without it).
func writeReplicaScan(w io.Writer, tr *ThroughputResult) {
	if len(tr.ReplicaScan) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### Replica scan at the defaults\n\nEach × best count is the median of the per-round ratios to the round's fastest replica count.\n\n")
	fmt.Fprintf(w, "| replicas | median jobs/s (min–max) | rounds | × best count | × River | jobs/claim | stmts/job |\n|--:|--:|---|--:|--:|--:|--:|\n")
	for _, p := range tr.ReplicaScan {
		fmt.Fprintf(w, "| %d | %.0f%s | %s | %s | %s | %.1f | %s |\n", p.Replicas, p.Throughput, fmtSpread(p.Rounds), joinRounds(p.Rounds),
			fmtRatio(p.VsBestCount), fmtRatio(p.VsRiver), p.JobsPerClaim, fmtPerJob(p.StatementsPerJob))
	}
}

// writeRiver renders the River peer's paragraph and the jobq-vs-River
// table (nothing when the peer was not asked for).
func writeRiver(w io.Writer, tr *ThroughputResult) {
	rp := tr.River
	if rp == nil {
		return
	}
	fmt.Fprintf(w, "### jobq against River\n\n")
	if rp.Skipped != "" {
		fmt.Fprintf(w, "%s\n\n", rp.Skipped)
		return
	}
	fmt.Fprintf(w, "River %s (riverpgxv5) on PostgreSQL %s, one client, %d workers, FetchCooldown 2 ms, FetchPollInterval 20 ms (River's own benchmark settings), a backlog of no-op jobs inserted with InsertMany in 5,000-job batches, tables truncated before every round; "+
		"built from %s, its own module. Its jobs/s is jobq's window (warm-up after the first completion, then the window or 90 %% of the backlog); River's own figure (client start to last completion) and its InsertMany rate are beside it. "+
		"Each × River is the median of the per-round ratios to River in the same round.\n\n", rp.Version, rp.Postgres, rp.Workers, RiverDirDefault)
	fmt.Fprintf(w, "| drain | median jobs/s (min–max) | rounds | × River |\n|---|--:|---|--:|\n")
	fmt.Fprintf(w, "| %s | %.0f%s | %s | 1.00× |\n", rp.Name, rp.Throughput, fmtSpread(rp.Rounds), joinRounds(rp.Rounds))
	fmt.Fprintf(w, "| River, its own figure (start to last completion) | %.0f%s | %s | – |\n", rp.DrainThroughput, fmtSpread(rp.DrainRounds), joinRounds(rp.DrainRounds))
	for _, d := range append([]DrainPoint{tr.Defaults, tr.NoRunQueue}, tr.BestFlags...) {
		fmt.Fprintf(w, "| %s %s | %.0f%s | %s | %s |\n", d.Name, d.Flags, d.Throughput, fmtSpread(d.Rounds), joinRounds(d.Rounds), fmtRatio(d.VsRiver))
	}
	fmt.Fprintf(w, "\nRiver InsertMany (5,000-job batches, one call at a time): %s jobs/s.\n\n", joinRounds(rp.InsertRounds))
}
