// Package scenarios holds the chaos testbed's named scenarios: each sets
// the faults of a chaos.Config and leaves the workload (jobs, rate,
// duration, seed) to the caller — except lease-loss and cas-race, which
// also shape the jobs (run time, flaky share, workers, claim strategy) so
// that the race they provoke can happen.
package scenarios

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq/testbed/chaos"
)

// Scenario is one named fault pattern.
type Scenario struct {
	Name        string
	Description string
	// Apply sets cfg's faults (Faults, Rounds or Schedule); cfg.Duration
	// and cfg.Replicas are already set.
	Apply func(cfg *chaos.Config)
}

// Expect maps a scenario to the check it exists to show failing (a
// measured loss): such a run passes when that check reports a violation.
var Expect = map[string]string{"failover-async": "acknowledged_submit_missing"}

// All is every scenario, in the order `make chaos` runs them.
var All = []Scenario{
	{"kill-storm", "SIGKILL a random replica three times; each restarts after 2 s", faults(3, chaos.FaultKill)},
	{"zombie-pause", "SIGSTOP a replica for longer than the lease, twice: its runs are rescued and re-claimed, its late completions must be refused", faults(2, chaos.FaultPause)},
	{"db-restart", "SIGKILL the database and start it again (crash recovery) while replicas run", faults(1, chaos.FaultDBRestart)},
	{"partition", "blackhole one replica's database link for 2 leases, twice", faults(2, chaos.FaultPartition)},
	{"rolling-restart", "SIGTERM each replica in turn (graceful shutdown, restart), as a deploy does", rolling},
	{"graceful-shutdown", "SIGTERM a replica mid-job twice: in-flight runs finish or are released", faults(2, chaos.FaultTerm)},
	{"latency", "add 200 ms each way to one replica's database link, twice", faults(2, chaos.FaultLatency)},
	{"clock-skew", "restart a replica with its clocks offset by 1 h: the database clock decides", faults(1, chaos.FaultClockSkew)},
	{"lease-loss", "cut one replica's database link for 1.25 leases, twice, while jobs run up to 3 leases: its handlers must stop when their leases are lost", leaseLoss},
	{"cas-race", "cas claims, half the jobs flaky and short, +100 ms each way on one replica's link, twice: a re-queued job must never be claimed before its retry is due", casRace},
	{"conn-reset", "reset (TCP RST) every connection one replica sends on for lease/5, six times: every query is retried, no run is lost to it", faults(6, chaos.FaultReset)},
	{"future-jobs", "a fifth of the jobs due 0.5–3 s after their submit and a fifth flaky (each retry waits SCHEDULED for its backoff), one replica SIGKILLed twice: no attempt may start before it is due", futureJobs},
	{"poison-job", "one job SIGKILLs every replica that claims it: it must end FAILED after max_retry+1 claims while the others flow", poison},
	{"read-only", "SET GLOBAL read_only=1 on the database for lease/3, three times (a demoted primary; replicas have no SUPER): finished runs retry their outcome and end with it — never re-run, never FAILED after success", faults(3, chaos.FaultReadOnly)},
	{"slow-link", "+400 ms per round trip (200 ms each way) on one replica's database link for the whole run, lease 6 s: the replicas with a direct link lose no lease (no statement of theirs waits on the slow replica's locks), no overlap", slowLink},
	{"workflows-kill-storm", "kill-storm with the jobs submitted as random workflows (DAGs of 4–40, fan-out and fan-in): a child starts only after its parents succeeded, once, and none stays BLOCKED behind done parents", withWorkflows(faults(3, chaos.FaultKill))},
	{"workflows-zombie-pause", "zombie-pause with the jobs as random workflows: a zombie's late completion of a parent must unblock nothing", withWorkflows(faults(2, chaos.FaultPause))},
	{"workflows-partition", "partition with the jobs as random workflows", withWorkflows(faults(2, chaos.FaultPartition))},
	{"workflows-db-restart", "db-restart with the jobs as random workflows: a crash between a parent's completion and its commit loses the unblock with it", withWorkflows(faults(1, chaos.FaultDBRestart))},
	{"policy-kill-storm", "kill-storm with a third of the jobs of a type rate-limited to 3 starts per second per rate key (4 keys) across replicas: no window of a second holds more than 3 starts of one key", withKeyedRateLimit(withRateLimit(faults(3, chaos.FaultKill)))},
	{"policy-partition", "partition with a third of the jobs rate-limited to 20/s: a cut-off replica's claims count in the window like every other", withRateLimit(faults(2, chaos.FaultPartition))},
	{"keys-kill-storm", "kill-storm with the jobs on 100 concurrency keys (limit 1 or 2; a quarter unkeyed): never more runs of a key at once than its limit, through rescues", withKeys(faults(3, chaos.FaultKill))},
	{"keys-zombie-pause", "zombie-pause with the jobs on 100 concurrency keys: a frozen holder's slot is freed by its rescue, its late completion frees nothing", withKeys(faults(2, chaos.FaultPause))},
	{"keys-partition", "partition with the jobs on 100 concurrency keys", withKeys(faults(2, chaos.FaultPartition))},
	{"ci", "kill + pause + db-restart: the short CI scenario", faults(1, chaos.FaultKill, chaos.FaultPause, chaos.FaultDBRestart)},
}

// withWorkflows is apply with the run's jobs submitted as random workflows
// (Config.Workflows): the checker adds its four workflow checks.
func withWorkflows(apply func(*chaos.Config)) func(*chaos.Config) {
	return func(cfg *chaos.Config) {
		apply(cfg)
		cfg.Workflows = true
	}
}

// withRateLimit is apply with a third of the run's jobs of a rate-limited
// type (Config.RateLimited; 20 per second unless the caller set another
// limit): the checker adds rate_limit_exceeded.
func withRateLimit(apply func(*chaos.Config)) func(*chaos.Config) {
	return func(cfg *chaos.Config) {
		apply(cfg)
		if cfg.RateLimited == 0 {
			cfg.RateLimited = 1.0 / 3
		}
	}
}

// withKeyedRateLimit is apply with the rate limit made per key, over 4
// rate keys of 3 starts per second each unless the caller set others
// (Config.RateKeys, RateStarts): below each key's arrival rate, so every
// key's window fills and its jobs wait HELD, and rate_limit_exceeded
// counts each key's windows.
func withKeyedRateLimit(apply func(*chaos.Config)) func(*chaos.Config) {
	return func(cfg *chaos.Config) {
		apply(cfg)
		cfg.RateKeys = cmp.Or(cfg.RateKeys, 4)
		cfg.RateStarts = cmp.Or(cfg.RateStarts, 3)
	}
}

// withKeys is apply with the run's jobs on 100 concurrency keys
// (Config.ConcurrencyKeys): the checker judges concurrency_key_overlap.
func withKeys(apply func(*chaos.Config)) func(*chaos.Config) {
	return func(cfg *chaos.Config) {
		apply(cfg)
		cfg.ConcurrencyKeys = 100
	}
}

// Galera is the ha-galera set: a 3-node Galera cluster, one replica per
// node through its own link, lease 6 s (a node that vanishes stalls
// certification for up to evs.suspect_timeout, 2 s, on every node). Each
// scenario injects one fault, half-way through the workload: a node's
// rejoin (--wsrep-recover, start, IST) takes 10-25 s on a loaded 2-core
// machine, so a second fault would strike a drained, idle cluster.
var Galera = []Scenario{
	{Name: "galera-baseline", Description: "galera3, no fault: multi-master claims collide at commit (certification conflicts) and are retried",
		Apply: galera()},
	{Name: "galera-node-kill", Description: "galera3: SIGKILL a replica's node mid-run; down 3 s, it rejoins by IST after mariadbd --wsrep-recover",
		Apply: galera(chaos.FaultNodeKill)},
	{Name: "galera-node-restart", Description: "galera3: shut a replica's node down cleanly mid-run; down 3 s, it rejoins by IST",
		Apply: galera(chaos.FaultNodeRestart)},
	{Name: "galera-node-isolate", Description: "galera3: cut a replica's node off its peers (gmcast.isolate) for 2 leases mid-run: it goes non-primary (1047) and resyncs",
		Apply: galera(chaos.FaultNodeIsolate)},
	{Name: "galera-workflows", Description: "galera3, the jobs as random workflows, a replica's node SIGKILLed mid-run: a parent's completion and its children's unblock certify together, on whichever node",
		Apply: withWorkflows(galera(chaos.FaultNodeKill))},
}

// Failover is the ha-failover set: two mariadbd with GTID replication, one
// failover half-way through the run after replication was cut for 3 s.
var Failover = []Scenario{
	{Name: "failover-async", Description: "primary-replica, async replication: replication cut 3 s, then failover — acknowledged submits of the cut window are lost",
		Apply: failover(chaos.ReplicationAsync)},
	{Name: "failover-semisync", Description: "primary-replica, semi-sync (AFTER_SYNC, no async fallback): replication cut 3 s, then failover — commits block instead of being lost",
		Apply: failover(chaos.ReplicationSemiSync)},
}

// galeraLease is the ha-galera scenarios' minimum lease.
const galeraLease = 6 * time.Second

func galera(kinds ...string) func(*chaos.Config) {
	return func(cfg *chaos.Config) {
		cfg.Topology, cfg.Replicas = chaos.TopologyGalera3, 3
		cfg.Lease = max(cfg.Lease, galeraLease)
		cfg.RescueInterval = max(cfg.RescueInterval, time.Second)
		cfg.Faults, cfg.Rounds, cfg.Schedule = nil, 1, ""
		if len(kinds) > 0 {
			faults(1, kinds...)(cfg)
		}
	}
}

func failover(mode string) func(*chaos.Config) {
	return func(cfg *chaos.Config) {
		cfg.Topology, cfg.Replication = chaos.TopologyPrimaryReplica, mode
		cfg.Faults, cfg.Rounds = []string{chaos.FaultFailover}, 1
		cfg.Schedule = fmt.Sprintf("%s@%s", chaos.FaultFailover, cfg.Duration/2)
	}
}

// Policy is the policy set (`make chaos-policy`): a periodic schedule
// fires beside the workload and the fire checks judge its ledger.
var Policy = []Scenario{
	{Name: "policy-periodic-kill-storm", Description: "an every-second schedule (overlap skip) beside the workload, a replica SIGKILLed three times: every instant fired once or skipped with its reason (fire_missing, fire_doubled)",
		Apply: periodicKillStorm},
	{Name: "policy-fire-ledger", Description: "primary-replica (semi-sync), an @every 10s schedule for 10 minutes through six replica kills and one failover: exactly 60 instants in the ledger, each fired once or skipped with its reason",
		Apply: chaos.FireLedger},
}

func periodicKillStorm(cfg *chaos.Config) {
	faults(3, chaos.FaultKill)(cfg)
	cfg.Periodic, cfg.PeriodicOverlap = "@every 1s", "skip"
}

// Remote is the remote set (`make chaos-remote`): the workload runs on
// remote worker processes — the Go library, jobq work, the Python and Node
// libraries, one each — attached to the replicas, and the faults strike the
// workers, their links and acknowledgements, and the replicas they poll.
// Each worker fault strikes every worker once, in turn.
var Remote = []Scenario{
	{"worker-kill", "SIGKILL each worker mid-job in turn (its process group), restart it 2 s later: its runs are rescued and run again", remote(chaos.FaultWorkerKill)},
	{"worker-pause", "SIGSTOP each worker in turn past its lease, then SIGCONT: its runs are rescued and re-run elsewhere, its late completions must be refused", remote(chaos.FaultWorkerPause)},
	{"worker-partition", "blackhole every link of each worker in turn for 2 leases (bytes held, not reset)", remote(chaos.FaultWorkerPartition)},
	{"ack-loss", "for 3 leases per worker, each completion commits but its first answer is cut: the worker retries it and must be answered applied, once", remote(chaos.FaultAckLoss)},
	{"duplicate-complete", "for 3 leases per worker, every completion reaches the replica twice: the second is answered applied and changes nothing", remote(chaos.FaultDuplicate)},
	{"replica-kill", "SIGKILL two replicas in turn while the workers long-poll them: the Go worker moves to another replica, the others retry until it is back", replicaKill},
	{"mixed", "half the jobs remote, half in the replicas' handlers; a worker and a replica SIGKILLed", mixed},
}

// Sets are the named scenario sets `jobq chaos --scenario` accepts.
func Sets() map[string][]Scenario {
	return map[string][]Scenario{"standard": Standard(), "ha-galera": Galera, "ha-failover": Failover, "remote": Remote, "policy": Policy}
}

// remoteWorkload sets the remote executor, jobs long enough (0.2–1.5 s)
// that a fault strikes workers mid-job, a fifth of them flaky, and a lease
// of at least 3 s: a worker is a process of its own behind two proxies (its
// gateway and its link), and on a loaded 2-core machine a 2 s lease leaves
// a Python or Node worker's heartbeats too little margin (one such rescue
// with no fault was seen in 14 scenario runs at load average 30).
func remoteWorkload(cfg *chaos.Config) {
	if cfg.Executor == "" || cfg.Executor == chaos.ExecutorLocal {
		cfg.Executor = chaos.ExecutorRemote
	}
	cfg.Lease = max(cfg.Lease, 3*time.Second)
	cfg.Runtime = "uniform:200ms-1500ms"
	cfg.FlakyFraction = max(cfg.FlakyFraction, 0.2)
}

// remote strikes each worker once with kind, evenly over the duration.
func remote(kind string) func(*chaos.Config) {
	return func(cfg *chaos.Config) {
		remoteWorkload(cfg)
		n := max(len(cfg.RemoteWorkers), len(chaos.WorkerKinds))
		if len(cfg.RemoteWorkers) > 0 {
			n = len(cfg.RemoteWorkers)
		}
		var items []string
		for i := 1; i <= n; i++ {
			items = append(items, fmt.Sprintf("%s@%s:worker-%d", kind, cfg.Duration*time.Duration(i)/time.Duration(n+1), i))
		}
		cfg.Faults, cfg.Rounds, cfg.Schedule = []string{kind}, 1, strings.Join(items, ",")
	}
}

func replicaKill(cfg *chaos.Config) {
	remoteWorkload(cfg)
	cfg.Faults, cfg.Rounds, cfg.Schedule = []string{chaos.FaultReplicaKill}, 1,
		fmt.Sprintf("%s@%s:replica-1,%s@%s:replica-2", chaos.FaultReplicaKill, cfg.Duration/3, chaos.FaultReplicaKill, cfg.Duration*2/3)
}

func mixed(cfg *chaos.Config) {
	remoteWorkload(cfg)
	cfg.Executor = chaos.ExecutorMixed
	cfg.Faults, cfg.Rounds, cfg.Schedule = []string{chaos.FaultWorkerKill, chaos.FaultKill}, 1,
		fmt.Sprintf("%s@%s:worker-1,%s@%s:replica-2", chaos.FaultWorkerKill, cfg.Duration/3, chaos.FaultKill, cfg.Duration*2/3)
}

// Standard is the scenarios `make chaos` runs (every one but ci, which is
// their short union).
func Standard() []Scenario {
	return slices.DeleteFunc(slices.Clone(All), func(s Scenario) bool { return s.Name == "ci" })
}

func faults(rounds int, kinds ...string) func(*chaos.Config) {
	return func(cfg *chaos.Config) { cfg.Faults, cfg.Rounds, cfg.Schedule = kinds, rounds, "" }
}

// leaseLoss partitions a replica for longer than the lease while its
// handlers have seconds left to run (jobs of 0.25–3 leases, 100 workers per
// replica so throughput stays up): an honest replica cancels each handler
// before its lease expires; one that does not (--sabotage lease-cancel)
// writes its "end" effect long after the run was rescued.
func leaseLoss(cfg *chaos.Config) {
	lease := cmp.Or(cfg.Lease, chaos.LeaseDefault)
	faults(2, chaos.FaultPartition)(cfg)
	cfg.PartitionFor = lease * 5 / 4
	cfg.Runtime = fmt.Sprintf("uniform:%s-%s", lease/4, 3*lease)
	cfg.Workers = max(cfg.Workers, 100)
}

// casRace makes the cas claim's ABA race likely: a slowed replica reads
// candidates, then compare-and-sets them one round trip (+200 ms) apart,
// while the other replicas claim the same short flaky jobs, fail them and
// re-queue them with a retry backoff. With the attempt guard the slow CAS
// misses; without it (--sabotage cas-guard) it claims the re-queued job
// before its retry is due.
func casRace(cfg *chaos.Config) {
	faults(2, chaos.FaultLatency)(cfg)
	cfg.Strategy = "cas"
	cfg.FlakyFraction = max(cfg.FlakyFraction, 0.5)
	cfg.FlakyFailures = max(cfg.FlakyFailures, 3) // each re-queue is a chance for the race
	cfg.Runtime = "uniform:0ms-20ms"
	cfg.Latency = 100 * time.Millisecond
	cfg.LatencyFor = 4 * cmp.Or(cfg.Lease, chaos.LeaseDefault)
}

// slowLink slows one replica's database link by 400 ms per round trip (a replica
// in another zone) for the whole run, with a 6 s lease and jobs of 2–6 s (more than two replicas' workers can run, so
// the slow replica claims too, and runs need renewals):
// its peers must not wait on locks its transactions hold between round
// trips, so none of their runs loses its lease (a rescue of theirs would be
// unexplained: the latency fault excuses only the slow replica's runs).
func slowLink(cfg *chaos.Config) {
	cfg.Lease = max(cfg.Lease, 6*time.Second)
	cfg.Faults, cfg.Rounds = []string{chaos.FaultLatency}, 1
	cfg.Schedule = "latency@0s:replica-1"
	cfg.Latency = 200 * time.Millisecond // each way: +400 ms per round trip
	cfg.LatencyFor = max(cfg.Duration, 10*time.Second)
	cfg.Runtime = "uniform:2s-6s" // the queue backs up: the slow replica claims too, and runs need renewals
	cfg.Workers = max(cfg.Workers, 100)
}

// futureJobs mixes due, future (SCHEDULED) and flaky jobs and kills a
// replica, so the SCHEDULED jobs it accepted must be promoted by the
// others: a claim or promoter that ignores run_at starts some before they
// are due, which claimed_before_due reports.
func futureJobs(cfg *chaos.Config) {
	faults(2, chaos.FaultKill)(cfg)
	cfg.FutureFraction = max(cfg.FutureFraction, 0.2)
	cfg.FlakyFraction = max(cfg.FlakyFraction, 0.2)
}

func poison(cfg *chaos.Config) {
	cfg.Faults, cfg.Rounds, cfg.Schedule = nil, 1, ""
	cfg.PoisonJobs = max(cfg.PoisonJobs, 1)
}

func rolling(cfg *chaos.Config) {
	n := max(cfg.Replicas, 1)
	step := cfg.Duration / time.Duration(n+1)
	var items []string
	for i := 1; i <= n; i++ {
		items = append(items, fmt.Sprintf("%s@%s:replica-%d", chaos.FaultTerm, step*time.Duration(i), i))
	}
	cfg.Faults, cfg.Rounds, cfg.Schedule = []string{chaos.FaultTerm}, 1, strings.Join(items, ",")
}

// Get returns the named scenario.
func Get(name string) (Scenario, error) {
	for _, s := range slices.Concat(All, Galera, Failover, Remote, Policy) {
		if s.Name == name {
			return s, nil
		}
	}
	var names []string
	for _, s := range slices.Concat(All, Galera, Failover, Remote, Policy) {
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q (want standard, ha-galera, ha-failover, remote, policy or one of %s)", name, strings.Join(names, ", "))
}
