package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jobq/jobq/testbed/chaos"
	"github.com/jobq/jobq/testbed/chaos/checker"
	"github.com/jobq/jobq/testbed/chaos/scenarios"
)

// ChaosCmd runs the HA and exactly-once testbed.
type ChaosCmd struct {
	DSN               string        `help:"Server-level DSN to create the run's database on, e.g. root@tcp(127.0.0.1:3306)/. Without it: $JOBQ_DSN, else a Docker engine (mysql:8.4 through testcontainers), else a throwaway local mariadbd/mysqld. Runs with db-restart always start their own mariadbd (they kill it)." placeholder:"DSN"`
	Scenario          string        `help:"Scenario name, or a set: 'standard' (every standard scenario in turn), 'remote' (remote workers), 'ha-galera', 'ha-failover', 'policy' (periodic schedules and their fire ledger) (overrides --faults/--schedule)." default:""`
	Faults            []string      `help:"Faults to inject in order, each once per round: kill, pause, term, db-restart, read-only, partition, latency, clock-skew, reset; with --executor remote or mixed also worker-kill, worker-pause, worker-partition, ack-loss, duplicate-complete, replica-kill." sep:","`
	Rounds            int           `help:"Repeat --faults this many times over --duration." default:"1"`
	Schedule          string        `help:"Explicit schedule, e.g. 'kill@5s:replica-2,pause@12s' (overrides --faults)."`
	FaultCmd          []string      `name:"fault-cmd" help:"A fault of your own, repeatable: 'name=N,start=CMD[,stop=CMD],at=OFFSET[,for=D][,kind=K][,timeout=D]' (commands run with sh -c; a comma starts a field only before a key=; kind read-only (default), failover, db-restart, latency or reset decides which rescues it excuses). Use with --dsn: your server, your failover." sep:"none"`
	Seed              uint64        `help:"Seed for fault times, targets and job run times (replay a failure with the same seed)." default:"42"`
	Duration          time.Duration `help:"Submission and fault window." default:"60s"`
	Jobs              int           `help:"Jobs to submit (effect, plus --flaky)." default:"5000"`
	Rate              float64       `help:"Open-loop arrival rate in jobs/s (default jobs/(0.8·duration))." default:"0"`
	Replicas          int           `help:"jobq serve processes." default:"3"`
	Runtime           string        `help:"Job run-time distribution: const:D, uniform:A-B or exp:MEAN." default:"uniform:20ms-300ms"`
	Flaky             float64       `help:"Fraction of flaky jobs (fail their first attempt)." default:"0"`
	Future            float64       `help:"Fraction of jobs submitted with run_at 0.5–3 s ahead (SCHEDULED until due)." default:"0"`
	Poison            int           `help:"Poison jobs among --jobs: each SIGKILLs the replica that claims it (the harness restarts it)." default:"0"`
	Workflows         bool          `help:"Submit the jobs as random workflows (DAGs of 4–40 jobs with fan-out and fan-in, POST /v1/workflows); the checker adds child_before_parent_success, child_run_twice, stuck_waiting_on_done_parents and ran_after_parent_failed."`
	Periodic          string        `help:"Add a periodic schedule with this cron expression beside the workload (effect jobs of 50 ms; removed after --duration); the checker adds fire_missing and fire_doubled over its ledger." placeholder:"@every 10s"`
	PeriodicOverlap   string        `help:"Overlap policy of the --periodic schedule: allow, skip, queue_one or cancel_previous." enum:"allow,skip,queue_one,cancel_previous," default:"" name:"periodic-overlap"`
	RateLimited       float64       `help:"Fraction of jobs of a rate-limited type (effect-limited, --rate-starts per --rate-period across replicas); the checker adds rate_limit_exceeded." default:"0"`
	RateStarts        int           `help:"Starts of the rate-limited type (of each rate key, with --rate-keys) allowed in any window of --rate-period (default 20; 3 per key in policy-kill-storm)." default:"0"`
	RatePeriod        time.Duration `help:"The rate limit's window." default:"1s"`
	RateKeys          int           `help:"Make the rate limit per key and spread the rate-limited jobs over this many rate keys, each allowed --rate-starts per --rate-period; the checker counts each key's windows. 0: one limit for the type (policy-kill-storm defaults to 4 keys)." default:"0"`
	Keys              int           `help:"Spread the jobs over this many concurrency keys (every fourth job unkeyed; limit 1 for even keys, 2 for odd); the checker adds concurrency_key_overlap. 0: no keys." default:"0"`
	MaxRetry          int           `help:"Each job's max_retry." default:"5"`
	Strategy          string        `help:"Claim strategy: skiplocked or cas (default: the replicas' default)." enum:"skiplocked,cas," default:""`
	Executor          string        `help:"Who runs the jobs: local (the replicas' handlers), remote (worker processes: remote-effect, remote-flaky through the worker protocol) or mixed (every other job remote)." enum:"local,remote,mixed," default:""`
	RemoteWorkers     []string      `help:"Worker processes of a remote or mixed run, one per entry: go (client.Worker, every replica's address), work (jobq work), python, node (sdk/python, sdk/node)." sep:"," default:"go,work,python,node"`
	WorkerConcurrency int           `help:"Each worker's concurrency." default:"8"`
	TestbedFlags
	Lease          time.Duration `help:"Replica lease." default:"2s"`
	RescueInterval time.Duration `help:"Replica rescue interval." default:"500ms"`
	Workers        int           `help:"Worker pool size per replica." default:"20"`
	DrainTimeout   time.Duration `help:"How long to wait after --duration for every job to be terminal." default:"60s"`
	Out            string        `help:"Output folder (one sub-folder per scenario with --scenario standard)." default:"out/chaos"`
	Keep           bool          `help:"Keep the run's database."`
	ExpectInvalid  bool          `help:"Succeed only if every run reports a violation (for sabotaged builds)."`
	Topology       string        `help:"Database topology: single, galera3 (3-node Galera cluster the harness starts) or primary-replica (MariaDB replication, failover fault); scenarios of ha-galera/ha-failover set it." enum:"single,galera3,primary-replica," default:""`
	Replication    string        `help:"primary-replica replication: async or semisync." enum:"async,semisync," default:""`
	FailoverCut    time.Duration `help:"primary-replica: how long the failover fault cuts replication before it demotes the primary." default:"3s"`
}

// Run runs the chosen scenario(s), prints a verdict table and fails on any
// violation (or, with --expect-invalid, on any run without one).
func (c *ChaosCmd) Run(g *Globals) error {
	var runs []scenarios.Scenario
	switch c.Scenario {
	case "":
		runs = []scenarios.Scenario{{Name: "custom", Apply: func(*chaos.Config) {}}}
	case "standard", "ha-galera", "ha-failover", "remote", "policy":
		runs = scenarios.Sets()[c.Scenario]
	default:
		s, err := scenarios.Get(c.Scenario)
		if err != nil {
			return err
		}
		runs = []scenarios.Scenario{s}
	}
	var cmds []chaos.FaultCmd
	for _, v := range c.FaultCmd {
		fc, err := chaos.ParseFaultCmd(v)
		if err != nil {
			return err
		}
		cmds = append(cmds, fc)
	}
	var results []*chaos.ResultFile
	var failed []string
	for _, s := range runs {
		cfg := chaos.Config{
			Name: s.Name, Replicas: c.Replicas, Jobs: c.Jobs, Duration: c.Duration, Rate: c.Rate, Runtime: c.Runtime,
			FlakyFraction: c.Flaky, FutureFraction: c.Future, PoisonJobs: c.Poison, Workflows: c.Workflows, ConcurrencyKeys: c.Keys,
			Periodic: c.Periodic, PeriodicOverlap: c.PeriodicOverlap, MaxRetry: c.MaxRetry,
			RateLimited: c.RateLimited, RateStarts: c.RateStarts, RatePeriod: c.RatePeriod, RateKeys: c.RateKeys, Faults: c.Faults, Rounds: c.Rounds, Schedule: c.Schedule, Seed: c.Seed,
			Strategy: c.Strategy, Lease: c.Lease, RescueInterval: c.RescueInterval,
			Workers: c.Workers, DrainTimeout: c.DrainTimeout, Keep: c.Keep, Log: g.Log, DSN: c.DSN,
			Executor: c.Executor, RemoteWorkers: c.RemoteWorkers, WorkerConcurrency: c.WorkerConcurrency,
			OutDir: c.Out, Topology: c.Topology, Replication: c.Replication, FailoverCut: c.FailoverCut,
			FaultCmds: cmds,
		}
		if len(runs) > 1 || c.Scenario != "" {
			cfg.OutDir = filepath.Join(c.Out, s.Name)
		}
		c.applyChaos(&cfg)
		s.Apply(&cfg)
		rf, err := chaos.Run(g.Ctx, cfg)
		switch {
		case rf == nil:
			return fmt.Errorf("scenario %s: %w", s.Name, err)
		case err != nil && !errors.Is(err, chaos.ErrInvalid):
			return fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		results = append(results, rf)
		switch {
		case scenarios.Expect[s.Name] != "":
			want := scenarios.Expect[s.Name]
			if !slices.ContainsFunc(rf.Result.Violations, func(v checker.Violation) bool { return v.Check == want }) {
				failed = append(failed, s.Name+" (expected "+want+", not observed)")
			}
		case rf.Valid == c.ExpectInvalid:
			failed = append(failed, s.Name)
		}
	}
	PrintChaosTable(os.Stdout, results)
	for _, rf := range results {
		caught := Caught(rf)
		switch {
		case scenarios.Expect[rf.Name] != "" && !rf.Valid:
			fmt.Printf("%s: INVALID, which is what this scenario measures (caught: %s)\n", rf.Name, caught)
		case c.ExpectInvalid && !rf.Valid:
			fmt.Printf("%s: INVALID, as expected (caught: %s)\n", rf.Name, caught)
		case c.ExpectInvalid:
			fmt.Printf("%s: VALID, but --expect-invalid wanted a violation (sabotage %s went unnoticed)\n", rf.Name, strings.Join(c.switches(), ","))
		case !rf.Valid:
			fmt.Printf("%s: INVALID (caught: %s; see %s)\n", rf.Name, caught, filepath.Join(rf.OutDir, "report.md"))
		}
	}
	if len(failed) > 0 {
		if c.ExpectInvalid {
			return fmt.Errorf("chaos: no violation found in %s (expected one from --sabotage %s)", strings.Join(failed, ", "), strings.Join(c.switches(), ","))
		}
		return fmt.Errorf("chaos: violations in %s (see report.md in %s)", strings.Join(failed, ", "), c.Out)
	}
	return nil
}

// Caught names every violated check of a run with its count, and the fault
// errors that also make a run invalid: "lost 6, stuck 6".
func Caught(rf *chaos.ResultFile) string {
	var parts []string
	for _, v := range rf.Result.Violations {
		parts = append(parts, fmt.Sprintf("%s %d", strings.ReplaceAll(v.Check, "_", " "), v.Count))
	}
	if n := len(rf.FaultErrors); n > 0 {
		parts = append(parts, fmt.Sprintf("fault errors %d", n))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// workflowCount is the count of a workflow check's violations in a run
// with workflows ("0" when it found none), "-" in a run without; for
// concurrency_key_overlap, in a run with concurrency keys.
func workflowCount(rf *chaos.ResultFile, check string) string {
	return checkCount(rf, rf.Config.Workflows, check)
}

// checkCount is the count of check's violations in a run whose workload
// has what the check judges (on; "0" when it found none), "-" otherwise.
func checkCount(rf *chaos.ResultFile, on bool, check string) string {
	if !on {
		return "-"
	}
	for _, v := range rf.Result.Violations {
		if v.Check == check {
			return strconv.Itoa(v.Count)
		}
	}
	return "0"
}

// PrintChaosTable prints one line per run: verdict, every check that can
// make a run invalid (lost … unexpl release; phantom and poison are named by
// Caught), then the figures reported alongside.
func PrintChaosTable(w *os.File, results []*chaos.ResultFile) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tverdict\tacked\tcompleted\tlost\tacked missing\tstuck\ttx dup\toverlap\tstale acc\tearly\tafter loss\tunexpl rescue\tunexpl release\trerun after success\tfailed after success\tchild early\tchild twice\tstuck blocked\tran after fail\trate over\tkey overlap\tlate acc\tapplied twice\tworker overlap\tlost after ack\tstale refused\tlate refused\tacks retried\tdup completes\tworker lapses\trescued\tnon-tx dup\tpickup p99\tmax unavail\tmax re-pick\t")
	for _, rf := range results {
		r := rf.Result
		c := r.Counts
		verdict := "VALID"
		if !rf.Valid {
			verdict = "INVALID"
		}
		var unavail, repick float64
		for _, f := range r.Faults {
			unavail, repick = max(unavail, f.Unavailability), max(repick, f.RePickMax)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0fms\t%.1fs\t%.1fs\t\n", rf.Name, verdict, c.Acknowledged, c.Completed,
			c.Lost, c.AckedMissing, c.Stuck, c.TxEffectDuplicates, c.OverlappingLeases, c.StaleCompletionsAccepted, c.ClaimedBeforeDue,
			c.WorkAfterLeaseLost, c.UnexplainedRescues, c.UnexplainedReleases, c.RerunAfterSuccess, c.FailedAfterSuccess,
			workflowCount(rf, checker.CheckChildBeforeParentSuccess), workflowCount(rf, checker.CheckChildRunTwice),
			workflowCount(rf, checker.CheckStuckWaitingOnDoneParents), workflowCount(rf, checker.CheckRanAfterParentFailed),
			checkCount(rf, rf.Config.RateLimited > 0, checker.CheckRateLimitExceeded),
			checkCount(rf, rf.Config.ConcurrencyKeys > 0, checker.CheckKeyOverlap),
			c.LateCompletionsAccepted, c.CompletionsAppliedTwice, c.WorkerOverlaps, c.LostAfterAck,
			c.StaleCompletionsRefused, c.LateCompletionsRefused, c.AcksRetried, c.DuplicateCompletions,
			c.WorkerLapses, c.Rescued, r.NonTx.DuplicatedJobs, r.Pickup.P99, unavail, repick)
	}
	tw.Flush()
}
