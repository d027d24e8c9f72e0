// Package metrics exports one jobq replica's Prometheus metrics on its own
// prometheus.Registry (never the global one, so several replicas can live in
// one process): job throughput by job type and outcome, claim conflicts,
// stale completions, rescues, pickup latency and run duration histograms,
// scans, worker slots, a sampled backlog, database errors by MySQL error
// number, heartbeat failures, the HTTP API, the database/sql pool, and the
// Go and process collectors. Every name starts with jobq_ (except the
// standard go_, process_ and go_sql_ families) and uses base units (seconds,
// bytes, jobs).
//
// Wiring (app.Start does this for `jobq serve`):
//
//	m := metrics.New(metrics.Options{})
//	cfg.Observer = scheduler.Observers(m, cfg.Observer) // before scheduler.New
//	s, _ := scheduler.New(st, db, reg, cfg, ok)
//	m.ObserveScheduler(s)                      // gauges and counters read from s
//	m.ObserveDB(db)                            // pool stats and the backlog sampler
//	svc := service.New(service.Options{Store: m.WrapServiceStore(st), KnownTypeFunc: known, WakeFunc: wake})
//	handler := m.Handler(apiHandler)           // adds GET /metrics
//	defer m.Close()
package metrics

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

// Defaults for Options.
const (
	// BacklogIntervalDefault is how often the backlog sampler runs its one
	// statement: 15s, i.e. about 0.07 queries/s per replica.
	BacklogIntervalDefault = 15 * time.Second
	// BacklogCountLimitDefault is the most jobs of one status a backlog
	// sample reads: 1000, so with any number of parked jobs a sample reads
	// at most 3,000 index entries (about 67 a second per status at the
	// default interval), where an exact count read them all.
	BacklogCountLimitDefault = 1000
	// Path is where Handler serves the metrics.
	Path = "/metrics"
)

// Outcome label values of jobq_jobs_completed_total and
// jobq_run_duration_seconds: what the committed completion did to the job.
const (
	OutcomeSuccess  = "success"  // → SUCCESS
	OutcomeRetry    = "retry"    // attempt failed, job back to WAITING after backoff (a retry)
	OutcomeFailed   = "failed"   // attempt failed with no retry left (or discarded) → FAILED
	OutcomeCanceled = "canceled" // cancel requested while running → CANCELED
	OutcomeReleased = "released" // handed back unfinished (at shutdown, or never started) → WAITING, no retry spent
)

// Outcomes lists every outcome label value, in that order.
var Outcomes = []string{OutcomeSuccess, OutcomeRetry, OutcomeFailed, OutcomeCanceled, OutcomeReleased}

// Options configure a replica's metrics. The zero value is ready to use.
type Options struct {
	// BacklogInterval is how often the backlog sampler counts non-terminal
	// jobs with one statement (jobq_backlog_*). Defaults to 15s; a negative
	// value turns the sampler off. The count is shared by every replica, so
	// dashboards take max() across replicas.
	BacklogInterval time.Duration
	// BacklogCountLimit is the most jobs of one status (SCHEDULED,
	// WAITING, RUNNING) a backlog sample reads; the counts stop there (see
	// jobq_backlog_count_limit). Defaults to BacklogCountLimitDefault (1000).
	BacklogCountLimit int
	// Logger receives the sampler's errors. Defaults to slog.Default().
	Logger *slog.Logger
}

// Metrics is one replica's metric set. Create with New; it is safe for
// concurrent use.
type Metrics struct {
	// Registry holds every metric of this replica; Handler serves it.
	Registry *prometheus.Registry

	opts Options
	log  *slog.Logger

	submitted      *prometheus.CounterVec // job_type
	claimed        *prometheus.CounterVec // job_type
	completed      *prometheus.CounterVec // job_type, outcome
	stale          *prometheus.CounterVec // job_type
	claimConflicts prometheus.Counter     //
	rescued        prometheus.Counter     //
	leaseLost      prometheus.Counter     //
	rateHeld       *prometheus.CounterVec // job_type
	slotWaits      *prometheus.CounterVec // outcome
	slotWait       prometheus.Histogram
	writeFailures  prometheus.Counter       //
	pickup         *prometheus.HistogramVec // job_type
	runDuration    *prometheus.HistogramVec // job_type, outcome
	scanDuration   prometheus.Histogram     //
	scanBatch      prometheus.Histogram     //
	dbErrors       *prometheus.CounterVec   // op, errno
	dbTransient    *prometheus.CounterVec   // op, cause
	httpRequests   *prometheus.CounterVec   // method, code
	httpDuration   *prometheus.HistogramVec // method
	fetches        *prometheus.CounterVec   // result
	fetchWait      prometheus.Histogram     //
	remoteComplete *prometheus.CounterVec   // result
	heartbeats     *prometheus.CounterVec   // state

	backlog *backlogGauges

	mu   sync.Mutex
	runs map[jobq.Fence]runInfo // claimed here, completion not yet seen

	stopOnce sync.Once
	stop     chan struct{}
	done     sync.WaitGroup
	alerts   alertDeliveries
}

type runInfo struct {
	jobType string
	claimed time.Time
}

// Histogram buckets, in seconds or jobs.
var (
	// PickupBuckets span 5ms (a local wake-up) to 10min (a deep backlog);
	// the idle poll interval (1s ± 200ms) falls between 1 and 2.5.
	PickupBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 1.5, 2.5, 5, 10, 30, 60, 120, 300, 600}
	// RunBuckets span 1ms to 1h of handler time.
	RunBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	// ScanBuckets span 0.5ms to 10s per scan (claim statements included).
	ScanBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}
	// BatchBuckets count the jobs one scan claimed (0 = an idle scan); the
	// default batch limit is 200.
	BatchBuckets = []float64{0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}
	// FetchWaitBuckets span 1ms (work was due) to 60s (the longest wait).
	FetchWaitBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60}
	// HTTPBuckets span 1ms to 10s per API request.
	HTTPBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}
)

// New returns a replica's metrics on a fresh registry that already holds
// the Go and process collectors.
func New(opts Options) *Metrics {
	if opts.BacklogInterval == 0 {
		opts.BacklogInterval = BacklogIntervalDefault
	}
	if opts.BacklogCountLimit <= 0 {
		opts.BacklogCountLimit = BacklogCountLimitDefault
	}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		opts:     opts,
		log:      cmp.Or(opts.Logger, slog.Default()).With("component", "metrics"),
		runs:     map[jobq.Fence]runInfo{},
		stop:     make(chan struct{}),
	}
	f := factory{m.Registry}
	m.submitted = f.counterVec("jobq_jobs_submitted_total",
		"Jobs created through this replica's API (a repeated submit of an existing job_key is not counted).", "job_type")
	m.claimed = f.counterVec("jobq_jobs_claimed_total", "Runs claimed by this replica.", "job_type")
	m.completed = f.counterVec("jobq_jobs_completed_total",
		"Completions this replica committed, by what they did to the job: success, retry (failed attempt re-queued with backoff), failed (no retry left), canceled, released (shutdown).",
		"job_type", "outcome")
	m.stale = f.counterVec("jobq_completions_stale_total",
		"Completions refused because the run had lost its lease (fenced by attempt); nothing was written.", "job_type")
	m.claimConflicts = f.counter("jobq_claim_conflicts_total", "Claim candidates another replica won (cas strategy: compare-and-set lost).")
	m.rescued = f.counter("jobq_leases_rescued_total", "Expired leases this replica's rescuer returned to WAITING or FAILED.")
	m.leaseLost = f.counter("jobq_leases_lost_total", "Handlers on this replica cancelled because their run lost its lease.")
	m.rateHeld = f.counterVec("jobq_rate_limit_held_total",
		"Probes of this replica's limited claim that found due jobs of the type held back by its full rate window, or by the full windows of all its rate keys with HELD jobs under a per-key limit (the scanner then wakes when the first window opens).", "job_type")
	m.slotWaits = f.counterVec("jobq_claim_slot_waits_total",
		"Claims of this replica that found every claim slot held (--claim-slots) and waited: outcome acquired (a slot came free) or timed_out (none within 1 s; the claim ran without one).", "outcome")
	m.slotWait = f.histogram("jobq_claim_slot_wait_seconds", "How long a claim of this replica waited for a claim slot (claims that took a free slot at once are not counted).", ScanBuckets)
	m.writeFailures = f.counter("jobq_completion_write_failures_total",
		"Completions that could not be written after retries; their leases expire and the jobs are rescued.")
	m.pickup = f.histogramVec("jobq_pickup_latency_seconds",
		"Time from a job being due and submitted (the later of run_at and create_time) to its handler's start: to its claim (started_at) on the database clock, plus the time it waited in the replica's run queue.", PickupBuckets, "job_type")
	m.runDuration = f.histogramVec("jobq_run_duration_seconds",
		"Time from this replica's claim to the committed completion (handler time plus the completion write).", RunBuckets, "job_type", "outcome")
	m.scanDuration = f.histogram("jobq_scan_duration_seconds", "Duration of one scan: the idle probe or the claim statements.", ScanBuckets)
	m.scanBatch = f.histogram("jobq_scan_batch_size", "Jobs claimed by one scan (0 for an idle or failed scan).", BatchBuckets)
	m.dbErrors = f.counterVec("jobq_db_errors_total",
		`Database errors on scheduler paths, retried or not, by operation and MySQL error number ("1213", "1205", …; "conn" for errors without a number such as a lost connection, "timeout" for a deadline).`,
		"op", "errno")
	m.dbTransient = f.counterVec("jobq_db_transient_errors_total",
		`Transient database errors on scheduler paths (each one is retried), by operation and cause: "deadlock" (1213, also a Galera certification conflict at commit), "lock_wait_timeout", "query_killed", "read_only", "wsrep_not_ready", "shutdown", "connection_lost", "replication_refused", "too_many_connections" (1040, 1203, 1226: no connection to be had)`,
		"op", "cause")
	m.httpRequests = f.counterVec("jobq_http_requests_total", "API requests answered, by method and status code.", "method", "code")
	m.httpDuration = f.histogramVec("jobq_http_request_duration_seconds", "API request latency.", HTTPBuckets, "method")
	m.fetches = f.counterVec("jobq_remote_fetches_total",
		`Remote workers' fetches answered by this replica, by result: "jobs" (it claimed jobs), "empty" (its wait passed), "canceled" (the client went away; its jobs were released), "error".`, "result")
	m.fetchWait = f.histogram("jobq_remote_fetch_wait_seconds", "How long a remote worker's fetch was open (its long-poll wait, the claim included).", FetchWaitBuckets)
	m.remoteComplete = f.counterVec("jobq_remote_completions_total",
		`Remote workers' completions answered by this replica, by result: "applied" (written now or a retried completion already written), "stale" (the attempt no longer held the job), "conflict" (a different outcome was applied), "forbidden" (wrong secret or scope). Only applied changes anything.`, "result")
	m.heartbeats = f.counterVec("jobq_remote_heartbeat_tokens_total",
		`Task tokens remote workers' heartbeats renewed or refused, by state: renewed, cancel_requested, lost.`, "state")
	for _, r := range []string{"jobs", "empty"} {
		m.fetches.WithLabelValues(r)
	}
	m.remoteComplete.WithLabelValues("applied")
	m.heartbeats.WithLabelValues("renewed")
	// Series for the API's main requests exist from the start, so the first
	// burst of submits shows in rate() (a series appearing with its value
	// already counted has no increase).
	for _, method := range []string{"get", "post"} {
		m.httpDuration.WithLabelValues(method)
	}
	m.httpRequests.WithLabelValues("get", "200")
	m.httpRequests.WithLabelValues("post", "201")
	m.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Observe records a scheduler event (Metrics is a scheduler.Observer):
// claims (a remote worker's fetch too), pickup latency up to the handler's
// start, completions by outcome, stale completions, run durations, write
// failures, rescues, lost leases, database errors, scans, and remote
// workers' fetches, heartbeats and completions. Install it as the scheduler's Config.Observer before
// scheduler.New (scheduler.Observers combines it with others).
func (m *Metrics) Observe(e scheduler.Event) {
	switch e.Kind {
	case scheduler.EventClaimed:
		m.onClaimed(e.Jobs, e.Conflicts)
	case scheduler.EventFetchClaimed:
		// Counted like the replica's own claims, but not kept for a run
		// duration: a worker's run may be completed through another replica.
		for _, j := range e.Jobs {
			m.claimed.WithLabelValues(j.JobType).Inc()
			m.pickup.WithLabelValues(j.JobType).Observe(PickupSeconds(j))
		}
	case scheduler.EventStarted:
		if e.Job != nil {
			m.pickup.WithLabelValues(e.Job.JobType).Observe(StartPickupSeconds(e.Job, e.Duration))
		}
	case scheduler.EventFetched:
		m.fetches.WithLabelValues(e.Result).Inc()
		m.fetchWait.Observe(e.Duration.Seconds())
	case scheduler.EventRemoteCompleted:
		m.remoteComplete.WithLabelValues(e.Result).Inc()
	case scheduler.EventRemoteHeartbeat:
		m.heartbeats.WithLabelValues(e.Result).Add(float64(e.N))
	case scheduler.EventCompleted:
		m.onCompleted(e.Completion, e.Applied)
	case scheduler.EventCompletionFailed:
		m.writeFailures.Inc()
		m.forget(e.Completion.Fence)
	case scheduler.EventRescued:
		m.rescued.Add(float64(len(e.Fences)))
	case scheduler.EventLeaseLost:
		m.leaseLost.Inc()
	case scheduler.EventRateHeld:
		m.rateHeld.WithLabelValues(e.Name).Inc()
	case scheduler.EventClaimSlotWait:
		m.slotWaits.WithLabelValues(e.Result).Inc()
		m.slotWait.Observe(e.Duration.Seconds())
	case scheduler.EventDBError:
		if errno := ErrnoLabel(e.Err); errno != "" {
			m.dbErrors.WithLabelValues(e.Op, errno).Inc()
		}
		if cause := store.Cause(e.Err); cause != "" {
			m.dbTransient.WithLabelValues(e.Op, cause).Inc()
		}
	case scheduler.EventScanned:
		m.scanDuration.Observe(e.Duration.Seconds())
		m.scanBatch.Observe(float64(e.N))
	}
}

// ErrnoLabel returns the errno label of jobq_db_errors_total for err: the
// MySQL error number in decimal, "timeout" for a context deadline, "conn"
// for any other error without a number — or "" for a cancelled context
// (shutdown), which is not counted.
func ErrnoLabel(err error) string {
	switch {
	case err == nil || errors.Is(err, context.Canceled):
		return ""
	case store.ErrorNumber(err) != 0:
		return strconv.Itoa(int(store.ErrorNumber(err)))
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "conn"
	}
}

func (m *Metrics) onClaimed(jobs []jobq.ClaimedJob, conflicts int) {
	if conflicts > 0 {
		m.claimConflicts.Add(float64(conflicts))
	}
	if len(jobs) == 0 {
		return
	}
	now := time.Now()
	m.mu.Lock()
	for _, j := range jobs {
		m.runs[j.Fence()] = runInfo{jobType: j.JobType, claimed: now}
	}
	m.mu.Unlock()
	for _, j := range jobs {
		m.claimed.WithLabelValues(j.JobType).Inc()
	}
}

// StartPickupSeconds is a started job's pickup latency, the value of
// jobq_pickup_latency_seconds: PickupSeconds up to its claim (database
// clock) plus queued, the time it then waited in the replica's run queue
// for a worker (the replica's monotonic clock). A job given back from the
// run queue unstarted is not observed; its next attempt's pickup counts
// from the same due time, so the wait is in it.
func StartPickupSeconds(job *scheduler.Job, queued time.Duration) float64 {
	return PickupSeconds(jobq.ClaimedJob{RunAt: job.RunAt, CreateTime: job.CreateTime, StartedAt: job.StartedAt}) + queued.Seconds()
}

// PickupSeconds is a claimed job's pickup latency up to its claim: from
// when it was both due and submitted to its claim, StartedAt − max(RunAt,
// CreateTime), all on the database clock. A submit may set run_at in the
// past (the job is due at once): measured from run_at alone, its pickup
// would count the time before it existed.
func PickupSeconds(j jobq.ClaimedJob) float64 {
	due := j.RunAt
	if j.CreateTime.After(due) {
		due = j.CreateTime
	}
	return max(0, j.StartedAt.Sub(due).Seconds())
}

// forget drops a run's record and returns it (ok false when this replica
// never saw the claim, e.g. metrics installed after it).
func (m *Metrics) forget(f jobq.Fence) (runInfo, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ri, ok := m.runs[f]
	delete(m.runs, f)
	return ri, ok
}

func (m *Metrics) onCompleted(c jobq.Completion, applied bool) {
	ri, ok := m.forget(c.Fence)
	jobType := ri.jobType
	if !ok {
		jobType = cmp.Or(c.JobType, "unknown")
	}
	if !applied {
		m.stale.WithLabelValues(jobType).Inc()
		return
	}
	outcome := OutcomeOf(c)
	m.completed.WithLabelValues(jobType, outcome).Inc()
	if ok {
		m.runDuration.WithLabelValues(jobType, outcome).Observe(time.Since(ri.claimed).Seconds())
	}
}

// OutcomeOf maps a committed completion to its outcome label.
func OutcomeOf(c jobq.Completion) string {
	switch c.Outcome {
	case jobq.OutcomeSuccess:
		return OutcomeSuccess
	case jobq.OutcomeCanceled:
		return OutcomeCanceled
	case jobq.OutcomeReleased:
		return OutcomeReleased
	}
	if c.Retry {
		return OutcomeRetry
	}
	return OutcomeFailed
}

// ObserveScheduler registers what is read from s at scrape time: worker
// slots, the replica's identity and the counters the scheduler keeps
// itself (heartbeat failures, claim errors, database retries), and creates
// the per-job-type series at zero for every registered job type so rates
// exist before the first event. Call it once, after scheduler.New.
func (m *Metrics) ObserveScheduler(s *scheduler.Scheduler) {
	cfg := s.Config()
	f := factory{m.Registry}
	f.gaugeFunc("jobq_worker_slots", "Worker pool size of this replica (--workers).", func() float64 { return float64(cfg.Workers) })
	f.gaugeFunc("jobq_worker_slots_in_flight", "Runs this replica holds: handlers running or completions not yet committed.",
		func() float64 { return float64(s.InFlight()) })
	f.gaugeFunc("jobq_worker_slots_free", "Idle workers of this replica.", func() float64 { return float64(s.FreeSlots()) })
	f.gaugeFunc("jobq_run_queue_jobs", "Claimed jobs waiting in this replica's run queue for a worker (RUNNING in job_queue, not started).",
		func() float64 { n, _ := s.Queued(); return float64(n) })
	f.gaugeFunc("jobq_run_queue_oldest_wait_seconds", "How long the oldest job in this replica's run queue has waited for a worker (0 when none waits).",
		func() float64 { _, d := s.Queued(); return d.Seconds() })
	f.counterFunc("jobq_run_queue_given_back_total", "Jobs the run queue released unstarted (to WAITING, no retry spent) because they waited longer than --run-queue-wait.",
		func() float64 { return float64(s.Stats().GivenBack) })
	f.counterFunc("jobq_heartbeat_failures_total", "Lease renewals (heartbeats) that failed after retries, or left runs with a running handler unrenewed because another transaction held their row (each logged as a WARN).",
		func() float64 { return float64(s.Stats().HeartbeatFails) })
	f.counterFunc("jobq_heartbeat_stalls_total", "Heartbeats that began later than scheduled by more than lease/5: the process was not run in time (CPU starvation, SIGSTOP, a long pause).",
		func() float64 { return float64(s.Stats().HeartbeatStalls) })
	f.counterFunc("jobq_claim_errors_total", "Scans whose claim failed after retries (never taken for an empty queue).",
		func() float64 { return float64(s.Stats().ClaimErrors) })
	f.counterFunc("jobq_jobs_promoted_total", "SCHEDULED jobs this replica's promoter made WAITING when their run_at came.",
		func() float64 { return float64(s.Stats().Promoted) })
	f.counterFunc("jobq_db_retries_total", "Database operations retried after a deadlock, lock wait timeout or lost connection.",
		func() float64 { return float64(s.Stats().DBRetries) })
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "jobq_replica_info",
		Help:        "Always 1; labels say who this replica is: owner (job_queue.owner) and claim strategy.",
		ConstLabels: prometheus.Labels{"owner": cfg.Owner, "strategy": cfg.Strategy},
	}, func() float64 { return 1 }))
	for _, t := range s.Registry().Types() {
		m.submitted.WithLabelValues(t)
		m.claimed.WithLabelValues(t)
		// The pickup SLO alert is a rate over the buckets: a type's first
		// pickups must not be its series' first sample.
		m.pickup.WithLabelValues(t)
		m.stale.WithLabelValues(t)
		for _, o := range Outcomes {
			m.completed.WithLabelValues(t, o)
		}
	}
}

// ObserveReady registers jobq_db_writable, read from writable (1 or 0) at
// each scrape; app passes its readiness cache, which checks at most once a
// second.
func (m *Metrics) ObserveReady(writable func() float64) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "jobq_db_writable",
		Help: "1 when the database takes this replica's writes (reachable; read_only, innodb_read_only, super_read_only off; Galera wsrep_ready=ON and Synced; schema at this binary's version), else 0 — what /readyz reports."},
		writable))
}

// ObserveDB registers the database/sql pool collector (go_sql_* with
// db_name="jobq") and starts the backlog sampler on db unless
// Options.BacklogInterval is negative. Close stops the sampler.
func (m *Metrics) ObserveDB(db *sql.DB) {
	m.Registry.MustRegister(collectors.NewDBStatsCollector(db, "jobq"))
	m.backlog = newBacklogGauges(m.Registry)
	if m.opts.BacklogInterval < 0 {
		return
	}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		m.runBacklogSampler(db)
	}()
}

// WrapServiceStore returns st with JobSubmit and JobSubmitMany counted in
// jobq_jobs_submitted_total (created jobs only).
func (m *Metrics) WrapServiceStore(st service.Store) service.Store { return countingStore{st, m} }

type countingStore struct {
	service.Store
	m *Metrics
}

func (c countingStore) JobSubmit(ctx context.Context, p jobq.SubmitParams) (jobq.Job, bool, error) {
	job, created, err := c.Store.JobSubmit(ctx, p)
	if err == nil && created {
		c.m.submitted.WithLabelValues(p.JobType).Inc()
	}
	return job, created, err
}

func (c countingStore) JobSubmitMany(ctx context.Context, ps []jobq.SubmitParams) ([]jobq.SubmitOutcome, error) {
	outs, err := c.Store.JobSubmitMany(ctx, ps)
	for i, o := range outs {
		if o.Created {
			c.m.submitted.WithLabelValues(ps[i].JobType).Inc()
		}
	}
	return outs, err
}

// Handler returns next with GET /metrics added (this replica's registry,
// Prometheus text or OpenMetrics by content negotiation) and every other
// request counted in jobq_http_requests_total and
// jobq_http_request_duration_seconds.
func (m *Metrics) Handler(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+Path, promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry, EnableOpenMetrics: true}))
	mux.Handle("/", promhttp.InstrumentHandlerDuration(m.httpDuration,
		promhttp.InstrumentHandlerCounter(m.httpRequests, next)))
	return mux
}

// Close stops the backlog sampler and waits for it. It is idempotent.
func (m *Metrics) Close() {
	m.stopOnce.Do(func() { close(m.stop) })
	m.done.Wait()
}

// factory registers metrics on one registry.
type factory struct{ r *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.r.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.r.MustRegister(c)
	return c
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.r.MustRegister(h)
	return h
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.r.MustRegister(h)
	return h
}

func (f factory) gaugeFunc(name, help string, fn func() float64) {
	f.r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}

func (f factory) counterFunc(name, help string, fn func() float64) {
	f.r.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn))
}
