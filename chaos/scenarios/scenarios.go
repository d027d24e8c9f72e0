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

	"github.com/jobq/jobq/chaos"
)

// Scenario is one named fault pattern.
type Scenario struct {
	Name        string
	Description string
	// Apply sets cfg's faults (Faults, Rounds or Schedule); cfg.Duration
	// and cfg.Replicas are already set.
	Apply func(cfg *chaos.Config)
}

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
	{"poison-job", "one job SIGKILLs every replica that claims it: it must end FAILED after max_retry+1 claims while the others flow", poison},
	{"ci", "kill + pause + db-restart: the short CI scenario", faults(1, chaos.FaultKill, chaos.FaultPause, chaos.FaultDBRestart)},
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
	for _, s := range All {
		if s.Name == name {
			return s, nil
		}
	}
	var names []string
	for _, s := range All {
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q (want standard or one of %s)", name, strings.Join(names, ", "))
}
