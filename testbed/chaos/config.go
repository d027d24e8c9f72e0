// Package chaos is jobq's HA and exactly-once testbed (`jobq chaos`, `make
// chaos`): it starts N real `jobq serve` processes, each talking to the
// database through its own in-process toxiproxy link, submits an open-loop
// workload of `effect` jobs across their APIs, injects faults on a schedule
// or at random from a seed, drains, and judges the database's own record with
// chaos/checker. A run writes result.json, history.ndjson, report.md and
// timeline.png into its output folder and is valid only when the checker
// found no violation.
package chaos

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cronplan"
)

// Fault kinds.
const (
	FaultKill      = "kill"       // SIGKILL a replica, restart it after KillRestartDelay
	FaultPause     = "pause"      // SIGSTOP a replica for PauseFor (> lease), then SIGCONT: the zombie
	FaultTerm      = "term"       // SIGTERM a replica mid-job (graceful shutdown), restart it after KillRestartDelay
	FaultDBRestart = "db-restart" // SIGKILL the database, start it again after DBDownFor
	FaultPartition = "partition"  // blackhole one replica's database link for PartitionFor
	FaultLatency   = "latency"    // add Latency to one replica's database link for LatencyFor
	FaultClockSkew = "clock-skew" // restart one replica in a time namespace offset by ClockSkew
	FaultReset     = "reset"      // reset every connection one replica sends on for ResetFor (TCP RST)
	FaultReadOnly  = "read-only"  // SET GLOBAL read_only=1 on the run's own database for ReadOnlyFor (replicas connect without SUPER)
	// Topology faults (see topology.go).
	FaultNodeKill    = "node-kill"    // galera3: SIGKILL the targeted replica's node, rejoin it (IST) after NodeDownFor
	FaultNodeRestart = "node-restart" // galera3: shut the targeted replica's node down cleanly, rejoin it after NodeDownFor
	FaultNodeIsolate = "node-isolate" // galera3: cut the targeted replica's node off its peers for IsolateFor
	FaultFailover    = "failover"     // primary-replica: cut replication for FailoverCut, demote the primary, promote the replica, switch the proxy
)

// FaultKinds lists every fault kind.
var FaultKinds = []string{FaultKill, FaultPause, FaultTerm, FaultDBRestart, FaultPartition, FaultLatency, FaultClockSkew, FaultReset, FaultReadOnly,
	FaultNodeKill, FaultNodeRestart, FaultNodeIsolate, FaultFailover,
	FaultWorkerKill, FaultWorkerPause, FaultWorkerPartition, FaultAckLoss, FaultDuplicate, FaultReplicaKill}

// topologyFaults maps each topology fault kind to the topology it needs.
var topologyFaults = map[string]string{
	FaultNodeKill: TopologyGalera3, FaultNodeRestart: TopologyGalera3, FaultNodeIsolate: TopologyGalera3,
	FaultFailover: TopologyPrimaryReplica,
}

// databaseFault reports whether kind targets the database rather than a
// replica (its planned Target is -1).
func databaseFault(kind string) bool {
	return kind == FaultDBRestart || kind == FaultFailover || kind == FaultReadOnly
}

// ownDBFault reports whether kind needs the run's own mariadbd (it kills
// the server or changes its global settings).
func ownDBFault(kind string) bool { return kind == FaultDBRestart || kind == FaultReadOnly }

// Defaults for Config.
const (
	ReplicasDefault       = 3
	JobsDefault           = 5000
	DurationDefault       = 60 * time.Second
	RuntimeDefault        = "uniform:20ms-300ms"
	LeaseDefault          = 2 * time.Second
	RescueIntervalDefault = 500 * time.Millisecond
	WorkersDefault        = 20
	KillRestartDefault    = 2 * time.Second
	DBDownDefault         = 3 * time.Second
	LatencyDefault        = 200 * time.Millisecond
	ClockSkewDefault      = time.Hour
	MaxRetryDefault       = 5
	NodeDownDefault       = 3 * time.Second
	FailoverCutDefault    = 3 * time.Second
)

// Config configures one chaos run. The zero value of each field means its
// default; call WithDefaults then Validate.
type Config struct {
	// Name labels the run in the report (a scenario name). Defaults to "custom".
	Name string
	// Replicas is how many `jobq serve` processes run. Defaults to 3.
	Replicas int
	// Jobs is how many jobs the workload submits. Defaults to 5000.
	Jobs int
	// Duration is the submission and fault window. Defaults to 60s.
	Duration time.Duration
	// Rate is the open-loop arrival rate in jobs/s. Defaults to Jobs /
	// (0.8·Duration), so submission ends before the last fault window.
	Rate float64
	// Runtime is the effect jobs' run-time distribution: "const:D",
	// "uniform:A-B" or "exp:MEAN" (capped at 10·MEAN). Defaults to
	// "uniform:20ms-300ms".
	Runtime string
	// FlakyFraction of the jobs are `flaky` (fail their first attempt)
	// instead of `effect`. Defaults to 0.
	FlakyFraction float64
	// FlakyFailures is how many first attempts each flaky job fails.
	// Defaults to 1.
	FlakyFailures int
	// FutureFraction of the jobs are submitted with a run_at ahead of their
	// send time, uniform in [FutureMaxDelay/6, FutureMaxDelay] (on the
	// database clock): they wait SCHEDULED and must never start before it
	// (claimed_before_due). Defaults to 0.
	FutureFraction float64
	// FutureMaxDelay is the longest run_at lead of a future job. Defaults
	// to 3s.
	FutureMaxDelay time.Duration
	// PoisonJobs of the jobs are `poison` (each SIGKILLs the replica that
	// claims it), spread evenly over the workload. The harness restarts a
	// replica that died on its own and logs a "crash" fault. Defaults to 0.
	PoisonJobs int
	// Workflows submits the jobs as random workflows (DAGs with fan-out and
	// fan-in, POST /v1/workflows) instead of one by one, and the checker
	// checks their dependencies too. Defaults to false.
	Workflows bool
	// Periodic, when set, is the cron expression of a periodic schedule
	// (PeriodicName, effect jobs of 50 ms) the run adds at its start,
	// beside the workload, and removes after Duration once its cursor has
	// passed its first instant + Duration; the checker's fire checks judge
	// its ledger over that window. Defaults to none.
	Periodic string
	// PeriodicOverlap is that schedule's overlap policy. Defaults to allow.
	PeriodicOverlap string
	// RateLimited of the jobs are `effect-limited` instead of `effect`: a
	// job type under the rate limit RateLimit (set before the replicas
	// start), so the checker counts its starts per window
	// (rate_limit_exceeded). Defaults to 0.
	RateLimited float64
	// RateLimit is the rate limit of the rate-limited jobs: RateStarts
	// starts in any window of RatePeriod. Default to 20 per 1s.
	RateStarts int
	RatePeriod time.Duration
	// RateKeys, when positive, makes that rate limit per key and spreads
	// the rate-limited jobs over this many rate keys (rate_key "rk-<i>"),
	// each with its own RateStarts per RatePeriod; the checker then counts
	// each key's windows. Defaults to 0: one limit for the whole type.
	RateKeys int
	// ConcurrencyKeys spreads the jobs over this many concurrency keys
	// (docs/operations.md, "Concurrency keys"): every fourth job carries no
	// key, the others key i mod ConcurrencyKeys, whose limit is 1 for even
	// keys and 2 for odd ones; the checker's concurrency_key_overlap then
	// judges them. Not with Workflows (workflow jobs take no key).
	// Defaults to 0 (no keys).
	ConcurrencyKeys int
	// MaxRetry is each job's max_retry. Defaults to 5.
	MaxRetry int
	// Faults are the kinds to inject, in order, each once per round. Empty
	// with no Schedule means a fault-free baseline.
	Faults []string
	// Rounds repeats Faults this many times across Duration. Defaults to 1.
	Rounds int
	// FaultCmds are user-supplied faults (--fault-cmd), injected at their
	// own offsets alongside the Schedule or Faults.
	FaultCmds []FaultCmd
	// Schedule, when set, replaces Faults/Rounds: comma-separated
	// "kind@offset[:replica-N]", e.g. "kill@5s:replica-2,pause@12s".
	Schedule string
	// Seed drives fault times, targets and job run times, so a failing run
	// can be replayed. Defaults to 1.
	Seed uint64
	// Strategy is the replicas' claim strategy (skiplocked or cas); "" lets
	// each replica pick its default.
	Strategy string
	// Sabotage switches passed to every replica (`jobq serve --sabotage`):
	// fencing, cas-guard, rescuer, deadlock-retry, lease-cancel, outcome-retry.
	Sabotage []string
	// Executor is who runs the workload's jobs: local (the replicas'
	// handlers), remote (remote workers: remote-effect, remote-flaky) or
	// mixed (every other job remote). Defaults to local.
	Executor string
	// RemoteWorkers are the worker processes of a remote or mixed run, one
	// per entry: go, work, python, node. Defaults to all four.
	RemoteWorkers []string
	// WorkerConcurrency is each worker's concurrency. Defaults to 8.
	WorkerConcurrency int
	// RepoDir is the repository root, where the Python and Node workers'
	// scripts are (testbed/chaos/workers). Defaults to ".".
	RepoDir string
	// AckFaultFor is how long an ack-loss or duplicate-complete fault
	// lasts. Defaults to 3·Lease.
	AckFaultFor time.Duration
	// Lease is the replicas' lease. Defaults to 2s.
	Lease time.Duration
	// RescueInterval is the replicas' rescue interval. Defaults to 500ms.
	RescueInterval time.Duration
	// PollInterval is the replicas' idle scan interval. Defaults to 500ms.
	PollInterval time.Duration
	// Workers is each replica's worker pool size. Defaults to 20.
	Workers int
	// KillRestartDelay is how long a killed or terminated replica stays
	// down. Defaults to 2s.
	KillRestartDelay time.Duration
	// PauseFor is how long a paused replica stays stopped. Defaults to
	// 2.5·Lease + 2·RescueInterval (longer than the lease, so its runs are
	// rescued and re-claimed while it sleeps).
	PauseFor time.Duration
	// DBDownFor is how long the database stays down. Defaults to 3s.
	DBDownFor time.Duration
	// ReadOnlyFor is how long a read-only fault keeps the database
	// refusing writes (read_only=1, a demoted primary). Defaults to Lease/3,
	// short of the 7·Lease/15 (Lease − Lease/3 − Lease/5) after which a
	// refusal may cost a running handler its lease.
	ReadOnlyFor time.Duration
	// PartitionFor is how long a cut link stays cut. Defaults to 2·Lease.
	PartitionFor time.Duration
	// Latency is the delay added to one link, each way. Defaults to 200ms.
	Latency time.Duration
	// LatencyFor is how long the latency lasts. Defaults to 3·Lease.
	LatencyFor time.Duration
	// ResetFor is how long a reset fault resets every connection on which
	// its replica sends (each query sent in the window fails with a lost
	// connection; jobq must retry it). Defaults to Lease/5.
	ResetFor time.Duration
	// ClockSkew is the clock offset of a clock-skew replica. Defaults to 1h.
	ClockSkew time.Duration
	// ShutdownTimeout is the replicas' --shutdown-timeout. Defaults to Lease.
	ShutdownTimeout time.Duration
	// DrainTimeout bounds the wait, after Duration, for every acknowledged
	// job to be terminal. Defaults to 60s.
	DrainTimeout time.Duration
	// DSN is a server-level DSN (the --dsn flag); empty lets dbprovider
	// choose (JOBQ_DSN, Docker, a local server). Ignored with OwnDB.
	DSN string
	// OwnDB starts a throwaway mariadbd for the run (implied by db-restart
	// and read-only); its replicas connect as a user without SUPER, so
	// read_only applies to them.
	OwnDB bool
	// Topology is the database: single (the provider's server, or OwnDB),
	// galera3 or primary-replica (both started by the harness as the
	// system user mysql, from Debian's mariadb-server and galera-4).
	// Defaults to single.
	Topology string
	// Replication is the primary-replica topology's replication: async or
	// semisync. Defaults to async.
	Replication string
	// FailoverCut is how long a failover fault cuts replication before it
	// demotes the primary, so that the replica is behind when it is
	// promoted. Defaults to 3s.
	FailoverCut time.Duration
	// NodeDownFor is how long a node-kill or node-restart node stays down.
	// Defaults to 3s.
	NodeDownFor time.Duration
	// IsolateFor is how long a node-isolate node is cut off. Defaults to
	// 2·Lease.
	IsolateFor time.Duration
	// Keep keeps the run's database (its DSN is printed).
	Keep bool
	// OutDir receives result.json, history.ndjson, report.md, timeline.png
	// and the replicas' logs. Defaults to out/chaos/<name>-<seed>.
	OutDir string
	// Binary is the jobq executable to start. Defaults to this process's.
	Binary string
	// Log receives the harness's progress. Defaults to slog.Default().
	Log *slog.Logger
	// Progress, when set, receives progress bars.
	Progress io.Writer
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Name = cmp.Or(c.Name, "custom")
	c.Replicas = cmp.Or(c.Replicas, ReplicasDefault)
	c.Jobs = cmp.Or(c.Jobs, JobsDefault)
	c.Duration = cmp.Or(c.Duration, DurationDefault)
	if c.Rate == 0 {
		c.Rate = float64(c.Jobs) / (0.8 * c.Duration.Seconds())
	}
	c.Runtime = cmp.Or(c.Runtime, RuntimeDefault)
	c.MaxRetry = cmp.Or(c.MaxRetry, MaxRetryDefault)
	c.FlakyFailures = cmp.Or(c.FlakyFailures, 1)
	c.FutureMaxDelay = cmp.Or(c.FutureMaxDelay, 3*time.Second)
	c.RateStarts = cmp.Or(c.RateStarts, 20)
	c.RatePeriod = cmp.Or(c.RatePeriod, time.Second)
	c.Rounds = cmp.Or(c.Rounds, 1)
	c.Seed = cmp.Or(c.Seed, 1)
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	c.RescueInterval = cmp.Or(c.RescueInterval, RescueIntervalDefault)
	c.PollInterval = cmp.Or(c.PollInterval, 500*time.Millisecond)
	c.Workers = cmp.Or(c.Workers, WorkersDefault)
	c.KillRestartDelay = cmp.Or(c.KillRestartDelay, KillRestartDefault)
	c.PauseFor = cmp.Or(c.PauseFor, c.Lease*5/2+2*c.RescueInterval)
	c.DBDownFor = cmp.Or(c.DBDownFor, DBDownDefault)
	c.ReadOnlyFor = cmp.Or(c.ReadOnlyFor, c.Lease/3)
	c.PartitionFor = cmp.Or(c.PartitionFor, 2*c.Lease)
	c.Latency = cmp.Or(c.Latency, LatencyDefault)
	c.LatencyFor = cmp.Or(c.LatencyFor, 3*c.Lease)
	c.ResetFor = cmp.Or(c.ResetFor, c.Lease/5)
	c.ClockSkew = cmp.Or(c.ClockSkew, ClockSkewDefault)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, c.Lease)
	c.Executor = cmp.Or(c.Executor, ExecutorLocal)
	if c.Executor != ExecutorLocal && len(c.RemoteWorkers) == 0 {
		c.RemoteWorkers = slices.Clone(WorkerKinds)
	}
	c.WorkerConcurrency = cmp.Or(c.WorkerConcurrency, 8)
	c.RepoDir = cmp.Or(c.RepoDir, ".")
	c.AckFaultFor = cmp.Or(c.AckFaultFor, 3*c.Lease)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, 60*time.Second)
	c.Topology = cmp.Or(c.Topology, TopologySingle)
	if c.Topology == TopologyPrimaryReplica {
		c.Replication = cmp.Or(c.Replication, ReplicationAsync)
	}
	c.FailoverCut = cmp.Or(c.FailoverCut, FailoverCutDefault)
	c.NodeDownFor = cmp.Or(c.NodeDownFor, NodeDownDefault)
	c.IsolateFor = cmp.Or(c.IsolateFor, 2*c.Lease)
	c.OutDir = cmp.Or(c.OutDir, fmt.Sprintf("out/chaos/%s-%d", c.Name, c.Seed))
	if c.Log == nil {
		c.Log = slog.Default()
	}
	for _, k := range []string{FaultDBRestart, FaultReadOnly} {
		if c.Topology == TopologySingle && (slices.Contains(c.Faults, k) || strings.Contains(c.Schedule, k)) {
			c.OwnDB = true
		}
	}
	return c
}

// Validate reports every invalid setting of a defaulted Config.
func (c Config) Validate() error {
	var errs []error
	if c.Replicas < 1 || c.Replicas > 32 {
		errs = append(errs, fmt.Errorf("replicas: must be in [1, 32], got %d", c.Replicas))
	}
	if c.Jobs < 1 {
		errs = append(errs, fmt.Errorf("jobs: must be at least 1, got %d", c.Jobs))
	}
	if c.Rate <= 0 || math.IsInf(c.Rate, 0) {
		errs = append(errs, fmt.Errorf("rate: must be a positive number of jobs/s, got %g", c.Rate))
	}
	if _, err := ParseRuntime(c.Runtime); err != nil {
		errs = append(errs, err)
	}
	if c.PoisonJobs < 0 || c.PoisonJobs > c.Jobs {
		errs = append(errs, fmt.Errorf("poison jobs: must be in [0, jobs], got %d", c.PoisonJobs))
	}
	if c.PoisonJobs > 0 && c.Replicas < 2 {
		errs = append(errs, errors.New("replicas: poison jobs need at least 2 replicas"))
	}
	if c.ConcurrencyKeys < 0 {
		errs = append(errs, fmt.Errorf("concurrency keys: must be at least 0, got %d", c.ConcurrencyKeys))
	}
	if c.ConcurrencyKeys > 0 && c.Workflows {
		errs = append(errs, errors.New("concurrency keys: not with workflows (workflow jobs take no key)"))
	}
	if c.FlakyFraction < 0 || c.FlakyFraction > 1 {
		errs = append(errs, fmt.Errorf("flaky fraction: must be in [0, 1], got %g", c.FlakyFraction))
	}
	if c.RateKeys < 0 {
		errs = append(errs, fmt.Errorf("rate keys: must be at least 0, got %d", c.RateKeys))
	}
	if c.RateLimited < 0 || c.RateLimited > 1 {
		errs = append(errs, fmt.Errorf("rate-limited fraction: must be in [0, 1], got %g", c.RateLimited))
	}
	if c.RateLimited > 0 && c.Executor != ExecutorLocal {
		errs = append(errs, fmt.Errorf("rate-limited jobs: run on the replicas' own handlers only (executor local), got %q", c.Executor))
	}
	if c.FutureFraction < 0 || c.FutureFraction > 1 {
		errs = append(errs, fmt.Errorf("future fraction: must be in [0, 1], got %g", c.FutureFraction))
	}
	if c.Periodic != "" {
		if _, err := cronplan.Parse(c.Periodic); err != nil {
			errs = append(errs, fmt.Errorf("periodic: %q is not a cron expression: %w", c.Periodic, err))
		}
	}
	if c.PeriodicOverlap != "" && !slices.Contains(jobq.OverlapPolicies, c.PeriodicOverlap) {
		errs = append(errs, fmt.Errorf("periodic overlap: must be one of %s, got %q", strings.Join(jobq.OverlapPolicies, ", "), c.PeriodicOverlap))
	}
	if c.FutureMaxDelay < 6*time.Millisecond {
		errs = append(errs, fmt.Errorf("future max delay: must be at least 6ms, got %s", c.FutureMaxDelay))
	}
	for _, f := range c.Faults {
		if !slices.Contains(FaultKinds, f) {
			errs = append(errs, fmt.Errorf("faults: unknown kind %q (want one of %s)", f, strings.Join(FaultKinds, ", ")))
		}
	}
	if c.Schedule != "" {
		if _, err := parseSchedule(c.Schedule, c.Replicas); err != nil {
			errs = append(errs, err)
		}
	}
	for _, fc := range c.FaultCmds {
		if fc.Name == "" || strings.TrimSpace(fc.Start) == "" || fc.At < 0 || fc.For < 0 || fc.Timeout <= 0 || !slices.Contains(FaultCmdKinds, fc.Kind) {
			errs = append(errs, fmt.Errorf("fault-cmd %q: needs a name, a start command, at ≥ 0, for ≥ 0, timeout > 0 and kind one of %s", fc.Name, strings.Join(FaultCmdKinds, ", ")))
		}
	}
	if c.Strategy != "" && c.Strategy != "skiplocked" && c.Strategy != "cas" {
		errs = append(errs, fmt.Errorf("strategy: must be skiplocked or cas, got %q", c.Strategy))
	}
	if c.Executor != ExecutorLocal && c.Executor != ExecutorRemote && c.Executor != ExecutorMixed {
		errs = append(errs, fmt.Errorf("executor: must be local, remote or mixed, got %q", c.Executor))
	}
	for _, k := range c.RemoteWorkers {
		if !slices.Contains(WorkerKinds, k) {
			errs = append(errs, fmt.Errorf("remote workers: unknown kind %q (want %s)", k, strings.Join(WorkerKinds, ", ")))
		}
	}
	if c.Executor != ExecutorLocal && len(c.RemoteWorkers) == 0 {
		errs = append(errs, errors.New("remote workers: a remote or mixed executor needs at least one worker"))
	}
	if c.Executor != ExecutorLocal && c.PoisonJobs > 0 {
		errs = append(errs, errors.New("poison jobs: run only with --executor local"))
	}
	if c.PauseFor <= c.Lease {
		errs = append(errs, fmt.Errorf("pause: must last longer than the lease %s to make a zombie, got %s", c.Lease, c.PauseFor))
	}
	if !slices.Contains(Topologies, c.Topology) {
		errs = append(errs, fmt.Errorf("topology: must be one of %s, got %q", strings.Join(Topologies, ", "), c.Topology))
	}
	if c.Topology == TopologyPrimaryReplica && c.Replication != ReplicationAsync && c.Replication != ReplicationSemiSync {
		errs = append(errs, fmt.Errorf("replication: must be async or semisync, got %q", c.Replication))
	}
	kinds := slices.Clone(c.Faults)
	if p, err := parseSchedule(c.Schedule, c.Replicas); err == nil && c.Schedule != "" {
		kinds = kinds[:0]
		for _, pf := range p {
			kinds = append(kinds, pf.Kind)
		}
	}
	for _, k := range kinds {
		if remoteFault(k) && c.Executor == ExecutorLocal {
			errs = append(errs, fmt.Errorf("faults: %s needs --executor remote or mixed", k))
		}
		if want, ok := topologyFaults[k]; ok && c.Topology != want {
			errs = append(errs, fmt.Errorf("faults: %s needs --topology %s, got %s", k, want, c.Topology))
		}
		if ownDBFault(k) && c.Topology != TopologySingle {
			errs = append(errs, fmt.Errorf("faults: %s needs the single topology; %s has node faults", k, c.Topology))
		}
	}
	if c.Topology == TopologyGalera3 && c.Replicas != 3 {
		errs = append(errs, fmt.Errorf("replicas: galera3 runs one replica per node: want 3, got %d", c.Replicas))
	}
	needsTwo := slices.ContainsFunc(c.Faults, func(f string) bool { return !databaseFault(f) && f != FaultLatency })
	if needsTwo && c.Replicas < 2 {
		errs = append(errs, errors.New("replicas: replica faults need at least 2 replicas so the others can rescue"))
	}
	return errors.Join(errs...)
}

// Runtime is a job run-time distribution.
type Runtime struct {
	Kind     string // const, uniform or exp
	Min, Max time.Duration
	Mean     time.Duration
}

// ParseRuntime parses "const:100ms", "uniform:20ms-300ms" or "exp:200ms".
func ParseRuntime(s string) (Runtime, error) {
	kind, arg, _ := strings.Cut(s, ":")
	bad := fmt.Errorf("runtime: want const:D, uniform:A-B or exp:MEAN, got %q", s)
	switch kind {
	case "const", "exp":
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 {
			return Runtime{}, bad
		}
		return Runtime{Kind: kind, Min: d, Max: d, Mean: d}, nil
	case "uniform":
		a, b, ok := strings.Cut(arg, "-")
		lo, err1 := time.ParseDuration(a)
		hi, err2 := time.ParseDuration(b)
		if !ok || err1 != nil || err2 != nil || lo < 0 || hi < lo {
			return Runtime{}, bad
		}
		return Runtime{Kind: kind, Min: lo, Max: hi, Mean: (lo + hi) / 2}, nil
	}
	return Runtime{}, bad
}

// Sample draws one run time.
func (r Runtime) Sample(rng *rand.Rand) time.Duration {
	switch r.Kind {
	case "uniform":
		return r.Min + time.Duration(rng.Int64N(int64(r.Max-r.Min)+1))
	case "exp":
		return min(time.Duration(rng.ExpFloat64()*float64(r.Mean)), 10*r.Mean)
	}
	return r.Min
}

// plannedFault is one fault the harness will inject.
type plannedFault struct {
	Kind   string
	At     time.Duration // offset from the workload start
	Target int           // replica index (0-based); -1 for the database
	Cmd    *FaultCmd     // a user-supplied fault (Kind is its kind)
}

func parseSchedule(s string, replicas int) ([]plannedFault, error) {
	var out []plannedFault
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		kind, rest, ok := strings.Cut(item, "@")
		if !ok || !slices.Contains(FaultKinds, kind) {
			return nil, fmt.Errorf("schedule: %q: want kind@offset[:replica-N] with kind one of %s", item, strings.Join(FaultKinds, ", "))
		}
		off, target, _ := strings.Cut(rest, ":")
		d, err := time.ParseDuration(off)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("schedule: %q: bad offset %q", item, off)
		}
		pf := plannedFault{Kind: kind, At: d, Target: 0}
		if databaseFault(kind) {
			pf.Target = -1
		} else if workerFaults[kind] && target != "" {
			n, err := strconv.Atoi(strings.TrimPrefix(target, "worker-"))
			if err != nil || n < 1 {
				return nil, fmt.Errorf("schedule: %q: target must be worker-N (the N-th of --remote-workers)", item)
			}
			pf.Target = n - 1
		} else if target != "" {
			n, err := strconv.Atoi(strings.TrimPrefix(target, "replica-"))
			if err != nil || n < 1 || n > replicas {
				return nil, fmt.Errorf("schedule: %q: target must be replica-1 … replica-%d", item, replicas)
			}
			pf.Target = n - 1
		}
		out = append(out, pf)
	}
	slices.SortStableFunc(out, func(a, b plannedFault) int { return cmp.Compare(a.At, b.At) })
	return out, nil
}

// plan returns the faults to inject: the Schedule, or Faults×Rounds spread
// evenly over Duration with times jittered by ±20 % of the spacing and
// random targets, both from Seed.
func (c Config) plan() []plannedFault {
	out := c.builtinPlan()
	for i := range c.FaultCmds {
		fc := &c.FaultCmds[i]
		out = append(out, plannedFault{Kind: fc.Kind, At: fc.At, Target: -1, Cmd: fc})
	}
	slices.SortStableFunc(out, func(a, b plannedFault) int { return cmp.Compare(a.At, b.At) })
	return out
}

// builtinPlan is the plan of the built-in faults (see plan).
func (c Config) builtinPlan() []plannedFault {
	if c.Schedule != "" {
		p, _ := parseSchedule(c.Schedule, c.Replicas)
		return p
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x6a6f6271))
	n := len(c.Faults) * c.Rounds
	var out []plannedFault
	spacing := c.Duration / time.Duration(n+1)
	for i := 0; i < n; i++ {
		kind := c.Faults[i%len(c.Faults)]
		jitter := time.Duration((rng.Float64()*0.4 - 0.2) * float64(spacing))
		targets := c.Replicas
		if workerFaults[kind] {
			targets = max(len(c.RemoteWorkers), 1)
		}
		pf := plannedFault{Kind: kind, At: spacing*time.Duration(i+1) + jitter, Target: rng.IntN(targets)}
		if databaseFault(kind) {
			pf.Target = -1
		}
		out = append(out, pf)
	}
	return out
}
