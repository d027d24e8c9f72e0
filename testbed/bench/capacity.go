package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/rs/zerolog"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
)

// CapacityOptions is `jobq bench --capacity`: the job mix and the database
// round trip to plan for.
type CapacityOptions struct {
	// JobDuration is how long one job runs (--job-ms).
	JobDuration time.Duration
	// Rate is the arrival rate in jobs/s (--rate 20/m).
	Rate float64
	// RetryFraction is the share of jobs that run twice (--retries).
	RetryFraction float64
	// DBLatency is the round trip between replicas and the database
	// (--db-latency), added by a toxiproxy latency toxic on every replica's
	// link (the database's answers are delayed by it). Whole milliseconds.
	DBLatency time.Duration
	// WorkersPerReplica caps the workers a replica is planned with
	// (--max-workers). Defaults to 200.
	WorkersPerReplica int
	// MinReplicas is the fewest replicas planned (HA). Defaults to 2.
	MinReplicas int
	// CheckDuration is the compressed job duration of the check run.
	// Defaults to 2s.
	CheckDuration time.Duration
}

// ParseRate parses "20/m", "5/s", "300/h" or a bare number of jobs/s.
func ParseRate(s string) (float64, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) {
		return 0, fmt.Errorf("rate %q: want a positive number of jobs per s, m or h, e.g. 20/m", s)
	}
	if !ok {
		return v, nil
	}
	switch unit {
	case "s":
		return v, nil
	case "m":
		return v / 60, nil
	case "h":
		return v / 3600, nil
	}
	return 0, fmt.Errorf("rate %q: unit %q, want s, m or h", s, unit)
}

// CapacityResult is the answer, also written as capacity.json (for CI
// gates) and drawn in capacity.png.
type CapacityResult struct {
	Assumptions []string `json:"assumptions"`
	// Inputs.
	JobDurationS  float64 `json:"job_duration_s"`
	RateJobsPerS  float64 `json:"rate_jobs_per_s"`
	RetryFraction float64 `json:"retry_fraction"`
	DBLatencyMs   float64 `json:"db_latency_ms"`
	// Measured through the latency link.
	SaturationJobsPerS float64 `json:"saturation_jobs_per_s"` // no-op drain, 3 replicas: the database's (and link's) limit
	// DrainStatementsPerJob is the statements per job of that drain
	// (claims and completions batched); StatementsPerJob those of the
	// check run at the planned concurrency (sparse arrivals batch less),
	// used for the load at the planned rate.
	DrainStatementsPerJob float64 `json:"drain_statements_per_job"`
	StatementsPerJob      float64 `json:"statements_per_job"`
	ServerCPUSPerJob      float64 `json:"server_cpu_s_per_job"` // -1: not measurable (remote server)
	MeasuredPickupP99     float64 `json:"measured_pickup_p99_ms"`
	// The model.
	Concurrency       float64 `json:"mean_jobs_in_flight"`
	Workers           int     `json:"workers_total"`
	Replicas          int     `json:"replicas"`
	WorkersPerReplica int     `json:"workers_per_replica"`
	PredictedP99      float64 `json:"predicted_pickup_p99_ms"`
	DBLoadQPS         float64 `json:"db_statements_per_s"`
	DBCPUShare        float64 `json:"db_cpu_share"` // of one core; -1 unknown
	SaturationRate    float64 `json:"saturation_rate_jobs_per_s"`
	// The check: a time-compressed real run at the same concurrency.
	Check CapacityCheck `json:"check"`
}

// CapacityCheck is the real run that checks the predicted pickup p99.
type CapacityCheck struct {
	JobDurationS float64 `json:"job_duration_s"`
	RateJobsPerS float64 `json:"rate_jobs_per_s"`
	Jobs         int     `json:"jobs"`
	PickupP99    float64 `json:"pickup_p99_ms"`
	Factor       float64 `json:"factor"` // measured / predicted (or the inverse, whichever ≥ 1)
	// StatementsPerJob is the runners' statements over the check run per
	// job: jobs, heartbeats, probes and rescuer passes at this concurrency.
	StatementsPerJob float64 `json:"statements_per_job"`
	Within           bool    `json:"within_stated_factor"`
}

// CapacityCheckFactor is how far the check run's pickup p99 may be from the
// prediction (either way) for the model to count as confirmed; below
// CapacityCheckFloorMs both are "a few round trips" and count as equal.
const (
	CapacityCheckFactor  = 3.0
	CapacityCheckFloorMs = 10.0
)

// PoissonQuantile is the smallest n with P(N ≤ n) ≥ q for N ~ Poisson(mean):
// the jobs in flight of an M/G/∞ system with that mean (arrivals at random,
// any job-duration distribution).
func PoissonQuantile(mean, q float64) int {
	if mean <= 0 {
		return 0
	}
	p := math.Exp(-mean)
	if p == 0 { // large mean: normal approximation
		return int(math.Ceil(mean + 2.33*math.Sqrt(mean)))
	}
	cum := p
	n := 0
	for cum < q {
		n++
		p *= mean / float64(n)
		cum += p
	}
	return n
}

// PlanCapacity turns the inputs and the measurements into the answer (pure:
// tested with made-up measurements).
func PlanCapacity(o CapacityOptions, r *CapacityResult) {
	lease := scheduler.LeaseDefault
	rescue := scheduler.RescueIntervalDefault
	poll := scheduler.PollIntervalDefault
	per := max(o.WorkersPerReplica, 1)
	r.JobDurationS, r.RateJobsPerS, r.RetryFraction = o.JobDuration.Seconds(), o.Rate, o.RetryFraction
	r.DBLatencyMs = float64(o.DBLatency) / float64(time.Millisecond)
	runs := o.Rate * (1 + o.RetryFraction)
	r.Concurrency = runs * o.JobDuration.Seconds()
	r.Workers = max(PoissonQuantile(r.Concurrency, 0.999), 1)
	r.Replicas = max(o.MinReplicas, int(math.Ceil(float64(r.Workers)/float64(per))))
	// Every replica must still hold all the work when one is down (HA).
	if r.Replicas > 1 {
		r.WorkersPerReplica = int(math.Ceil(float64(r.Workers) / float64(r.Replicas-1)))
	} else {
		r.WorkersPerReplica = r.Workers
	}
	// Statements: per job (measured) plus heartbeats (one renewal per
	// replica per Lease/3 while it holds runs) plus idle probes and rescuer
	// passes of every replica.
	heartbeats := float64(r.Replicas) * 3 / lease.Seconds()
	idle := float64(r.Replicas) * (1/poll.Seconds() + 1/rescue.Seconds())
	r.DBLoadQPS = runs*r.StatementsPerJob + heartbeats + idle
	r.DBCPUShare = -1
	if r.ServerCPUSPerJob >= 0 && r.SaturationJobsPerS > 0 {
		r.DBCPUShare = runs * r.ServerCPUSPerJob
	}
	// The database saturates where the runs' statements (batched as in the
	// drain: at saturation arrivals are dense) plus the fixed load reach
	// what the no-op drain reached.
	if r.DrainStatementsPerJob > 0 && r.SaturationJobsPerS > 0 {
		budget := r.SaturationJobsPerS * r.DrainStatementsPerJob
		r.SaturationRate = max(budget-heartbeats-idle, 0) / r.DrainStatementsPerJob / (1 + o.RetryFraction)
	}
	// With workers at the 99.9th percentile of jobs in flight, a job waits
	// for a worker less than 0.1 % of the time: its pickup is the claim
	// path measured through the link.
	r.PredictedP99 = r.MeasuredPickupP99
	r.Assumptions = []string{
		"arrivals are random (Poisson) at the given rate; job durations are as given (any distribution with that mean)",
		fmt.Sprintf("workers = the 99.9th percentile of jobs in flight (M/G/∞: Poisson with mean rate × duration × (1 + retries) = %.1f), so a job waits for a worker < 0.1 %% of the time", r.Concurrency),
		fmt.Sprintf("replicas: at least %d (HA), at most %d workers each; each replica is sized to carry the load with one replica down", o.MinReplicas, per),
		fmt.Sprintf("the database is %s away (toxiproxy latency on every replica's link) and serves only jobq; its limit is the no-op drain rate measured through that link on this machine", o.DBLatency),
		fmt.Sprintf("jobq defaults: lease %s (a heartbeat per replica every %s), poll %s, rescue interval %s", lease, lease/3, poll, rescue),
		"predicted pickup p99 = the no-op pickup p99 measured through the link at the planned replicas (queueing for workers neglected, see above)",
		"database CPU share: the server's CPU seconds per job in the no-op drain (local server only) × runs/s",
	}
}

// runCapacity measures through a latency link, plans, checks the
// prediction with a time-compressed real run and writes capacity.json and
// capacity.png.
func (h *Harness) runCapacity(ctx context.Context, res *Result) (*Result, error) {
	o := *h.opts.Capacity
	o.WorkersPerReplica = cmp0(o.WorkersPerReplica, 200)
	o.MinReplicas = cmp0(o.MinReplicas, 2)
	if o.CheckDuration <= 0 {
		o.CheckDuration = 2 * time.Second
	}
	if o.DBLatency%time.Millisecond != 0 || o.DBLatency < 0 {
		return res, fmt.Errorf("capacity: db-latency must be whole milliseconds ≥ 0, got %s", o.DBLatency)
	}
	cr := &CapacityResult{JobDurationS: o.JobDuration.Seconds(), RateJobsPerS: o.Rate, RetryFraction: o.RetryFraction,
		DBLatencyMs: float64(o.DBLatency) / float64(time.Millisecond), ServerCPUSPerJob: -1}
	res.Capacity = cr
	// The link: every runner connects through a toxiproxy that delays the
	// database's answers by DBLatency.
	cfg, err := mysql.ParseDSN(h.env.DSN)
	if err != nil {
		return res, err
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	px := toxiproxy.NewProxy(srv, "db", "127.0.0.1:0", cfg.Addr)
	if err := px.Start(); err != nil {
		return res, fmt.Errorf("capacity: proxy: %w", err)
	}
	defer px.Stop()
	if o.DBLatency > 0 {
		body := fmt.Sprintf(`{"name":"rtt","type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":%d,"jitter":0}}`, o.DBLatency.Milliseconds())
		if _, err := px.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
			return res, fmt.Errorf("capacity: latency toxic: %w", err)
		}
	}
	direct := h.env.DSN
	cfg.Addr = px.Listen
	h.env.DSN = cfg.FormatDSN()
	defer func() { h.env.DSN = direct }()

	// 1. The database's limit through the link: the no-op drain.
	spec := h.headline(StrategySkip, h.env.TableRows)
	spec.Group = "capacity"
	h.step("capacity: no-op drain through the link")
	pt, err := h.measureThroughput(ctx, spec)
	if err != nil {
		return res, err
	}
	h.done()
	res.Points = append(res.Points, pt)
	cr.SaturationJobsPerS, cr.DrainStatementsPerJob, cr.StatementsPerJob = pt.Throughput, pt.StatementsPerJob, pt.StatementsPerJob
	if pt.Diagnosis.ServerCPUCores >= 0 && pt.Throughput > 0 {
		cr.ServerCPUSPerJob = pt.Diagnosis.ServerCPUCores / pt.Throughput
	}
	// 2. Plan the replicas, then measure the claim path's pickup p99
	// through the link at that many replicas (no-op jobs at a low rate: no
	// worker is ever short).
	PlanCapacity(o, cr)
	spec.Replicas, spec.Workers = cr.Replicas, cr.WorkersPerReplica
	h.step("capacity: pickup through the link")
	lp, err := h.measureLatency(ctx, spec, 20, 3*time.Second)
	if err != nil {
		return res, err
	}
	h.done()
	cr.MeasuredPickupP99 = lp.Pickup.P99
	PlanCapacity(o, cr)
	// 3. The check: the same jobs in flight, time-compressed: jobs of
	// CheckDuration at rate × JobDuration / CheckDuration, for the planned
	// replicas × workers.
	h.step("capacity: check run")
	chk, err := h.capacityCheck(ctx, spec, o, cr)
	if err != nil {
		return res, err
	}
	h.done()
	cr.Check = chk
	if chk.StatementsPerJob > 0 {
		cr.StatementsPerJob = chk.StatementsPerJob
		PlanCapacity(o, cr)
	}
	return res, nil
}

func cmp0(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// capacityCheck runs sleep jobs of o.CheckDuration arriving at random
// (Poisson) at the compressed rate for 4 check durations (at least 40
// jobs) and compares their pickup p99 with the prediction.
func (h *Harness) capacityCheck(ctx context.Context, spec PointSpec, o CapacityOptions, cr *CapacityResult) (CapacityCheck, error) {
	rate := o.Rate * o.JobDuration.Seconds() / o.CheckDuration.Seconds()
	n := max(40, int(rate*4*o.CheckDuration.Seconds()))
	chk := CapacityCheck{JobDurationS: o.CheckDuration.Seconds(), RateJobsPerS: rate, Jobs: n}
	if err := h.env.Reset(ctx); err != nil {
		return chk, err
	}
	r := h.newRunner(spec, true)
	defer r.Stop()
	if err := r.Start(ctx); err != nil {
		return chk, fmt.Errorf("capacity check: start: %w", err)
	}
	urls := r.APIs()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	h.env.seq++
	prefix := fmt.Sprintf("cap%d-", h.env.seq)
	params := []byte(fmt.Sprintf(`{"ms":%d}`, o.CheckDuration.Milliseconds()))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs int
	var firstErr error
	before := r.Counters()
	// Poisson arrivals, as the model assumes (seeded: a rerun replays them).
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	var at float64 // seconds since start
	for i := range n {
		at += rng.ExpFloat64() / rate
		intended := start.Add(time.Duration(at * float64(time.Second)))
		if !sleepCtx(ctx, time.Until(intended)) {
			break
		}
		c := client.New(urls[i%len(urls)])
		c.HTTP = &http.Client{Transport: tr, Timeout: 30 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := c.Submit(ctx, apitype.SubmitRequest{JobKey: fmt.Sprintf("%s%d", prefix, i), JobType: jobtypes.Sleep, Params: params}); err != nil {
				mu.Lock()
				errs++
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if errs > 0 {
		return chk, fmt.Errorf("capacity check: %d of %d submits failed, first: %w", errs, n, firstErr)
	}
	deadline := time.Now().Add(o.CheckDuration*3 + 30*time.Second)
	for {
		left, err := h.env.Remaining(ctx)
		if err != nil {
			return chk, err
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return chk, fmt.Errorf("capacity check: %d jobs unfinished", left)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	chk.StatementsPerJob = perJob(r.Counters().Sub(before).Statements, int64(n))
	pickups, err := h.env.Pickups(ctx, prefix)
	if err != nil {
		return chk, err
	}
	ph := newHist()
	for _, p := range pickups {
		recordDur(ph, p)
	}
	chk.PickupP99 = Summarize(ph).P99
	a, b := max(chk.PickupP99, CapacityCheckFloorMs), max(cr.PredictedP99, CapacityCheckFloorMs)
	chk.Factor = max(a/b, b/a)
	chk.Within = chk.Factor <= CapacityCheckFactor
	return chk, ctx.Err()
}

// WriteCapacity prints the answer with its assumptions.
func WriteCapacity(w io.Writer, c *CapacityResult) {
	fmt.Fprintf(w, "## Capacity: %.3g jobs/s (%.3g/min) of %s jobs, %.0f %% retried, database %.0f ms away\n\n",
		c.RateJobsPerS, c.RateJobsPerS*60, time.Duration(c.JobDurationS*float64(time.Second)), c.RetryFraction*100, c.DBLatencyMs)
	fmt.Fprintf(w, "**Answer: %d replicas × %d workers** (%d workers needed; %.1f jobs in flight on average).\n\n", c.Replicas, c.WorkersPerReplica, c.Workers, c.Concurrency)
	fmt.Fprintf(w, "| figure | value |\n|---|--:|\n")
	fmt.Fprintf(w, "| expected pickup p99 | %.1f ms |\n", c.PredictedP99)
	fmt.Fprintf(w, "| database statements/s at this load | %.1f |\n", c.DBLoadQPS)
	if c.DBCPUShare >= 0 {
		fmt.Fprintf(w, "| database CPU at this load | %.3f %% of a core |\n", c.DBCPUShare*100)
	} else {
		fmt.Fprintf(w, "| database CPU at this load | — (remote server: not measurable) |\n")
	}
	fmt.Fprintf(w, "| rate where the database saturates | %.0f jobs/s (%.0f/min) |\n", c.SaturationRate, c.SaturationRate*60)
	fmt.Fprintf(w, "| measured: no-op drain through the link | %.0f jobs/s, %.2f statements/job (batched) |\n", c.SaturationJobsPerS, c.DrainStatementsPerJob)
	fmt.Fprintf(w, "| measured: statements per job at this concurrency (check run) | %.2f |\n", c.StatementsPerJob)
	fmt.Fprintf(w, "| check: real run, %s jobs at %.1f jobs/s (same jobs in flight), %d jobs | pickup p99 %.1f ms: %.2f× the prediction — %s |\n",
		time.Duration(c.Check.JobDurationS*float64(time.Second)), c.Check.RateJobsPerS, c.Check.Jobs, c.Check.PickupP99, c.Check.Factor,
		map[bool]string{true: fmt.Sprintf("within %.0f×", CapacityCheckFactor), false: fmt.Sprintf("**outside %.0f×**", CapacityCheckFactor)}[c.Check.Within])
	fmt.Fprintf(w, "\nAssumptions:\n")
	for _, a := range c.Assumptions {
		fmt.Fprintf(w, "- %s\n", a)
	}
	fmt.Fprintln(w)
}

// WriteCapacityFiles writes capacity.json and capacity.png into dir.
func WriteCapacityFiles(dir string, c *CapacityResult) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(outPath(dir, "capacity.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return plotCapacity(outPath(dir, "capacity.png"), c)
}

// plotCapacity draws database load (statements/s) against arrival rate,
// the saturation rate and the planned rate.
func plotCapacity(path string, c *CapacityResult) error {
	if c.StatementsPerJob <= 0 || c.DrainStatementsPerJob <= 0 || c.SaturationRate <= 0 {
		return nil
	}
	p := newPlot("Database load vs arrival rate (model)", "arrival rate (jobs/s, log)", "database statements/s (log)", true)
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	fixed := c.DBLoadQPS - c.RateJobsPerS*(1+c.RetryFraction)*c.StatementsPerJob
	var sparse, batched plotter.XYs
	lo, hi := min(c.RateJobsPerS, c.SaturationRate)/10, max(c.RateJobsPerS, c.SaturationRate)*2
	if lo <= 0 || hi <= lo || math.IsInf(hi, 0) || math.IsNaN(lo+hi) {
		return fmt.Errorf("capacity plot: rates %g and %g", c.RateJobsPerS, c.SaturationRate)
	}
	for x := lo; x <= hi; x *= 1.25 {
		sparse = append(sparse, plotter.XY{X: x, Y: fixed + x*(1+c.RetryFraction)*c.StatementsPerJob})
		batched = append(batched, plotter.XY{X: x, Y: fixed + x*(1+c.RetryFraction)*c.DrainStatementsPerJob})
	}
	budget := c.SaturationJobsPerS * c.DrainStatementsPerJob
	if err := plotutil.AddLines(p, "load, sparse arrivals (check run's statements/job)", sparse,
		"load, dense arrivals (drain's statements/job)", batched); err != nil {
		return err
	}
	sat, err := plotter.NewLine(plotter.XYs{{X: lo, Y: budget}, {X: hi, Y: budget}})
	if err != nil {
		return err
	}
	sat.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(sat)
	p.Legend.Add(fmt.Sprintf("database limit (no-op drain): saturates at %.0f jobs/s", c.SaturationRate), sat)
	at, err := plotter.NewScatter(plotter.XYs{{X: c.RateJobsPerS, Y: c.DBLoadQPS}})
	if err != nil {
		return err
	}
	at.GlyphStyle.Radius = vg.Points(4)
	p.Add(at)
	p.Legend.Add(fmt.Sprintf("planned: %.3g jobs/s → %d×%d", c.RateJobsPerS, c.Replicas, c.WorkersPerReplica), at)
	return saveLegendOutside(p, 10*vg.Inch, 5*vg.Inch, path)
}
