package scheduler

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"crypto/rand"
	"encoding/hex"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/storeerr"
)

// Claim strategies.
const (
	// StrategySkipLocked claims a batch in one transaction with
	// SELECT … FOR UPDATE SKIP LOCKED and one UPDATE … WHERE id IN (…).
	StrategySkipLocked = "skiplocked"
	// StrategyCAS reads candidates without locks, then compare-and-sets each
	// row (status AND attempt) — the classic design, kept for comparison and
	// for servers without SKIP LOCKED.
	StrategyCAS = "cas"
)

// Defaults for Config.
const (
	PollIntervalDefault = time.Second
	// PollJitterDefault is the jitter WithDefaults gives the default
	// PollInterval: PollInterval/5 (pollJitterFor), 200ms.
	PollJitterDefault = PollIntervalDefault / 5
	// BatchLimitDefault and RunQueueDefault let a replica at its defaults
	// claim up to 2,000 jobs under a backlog of short jobs, the claim size
	// at which the raw SQL ceiling drains fastest and the one of the best
	// measured flags (`--workers 2000 --batch-limit 2000 --run-queue -1`).
	// The run queue is adaptive: it offers no more places than this
	// replica's workers start within 100ms at the mean time of the handlers
	// that just returned, so a claim follows the backlog (it is short when
	// the queue is) and the handlers' speed (long handlers: no more than
	// the free workers), whatever the replica count. Measured in
	// docs/bench.md, "Defaults that follow the backlog": 3 replicas at
	// 500 / 500 claimed ~200 jobs per claim, at 2,000 / 2,000 ~1,500.
	BatchLimitDefault = 2000
	RunQueueDefault   = 2000
	// WorkersDefault is the default Config.Workers: at most 50 handlers run
	// at once; with the run queue in front of them 50 goroutines start
	// short handlers as fast as 2,000 would (no-op jobs: the claim and the
	// completion are the work, see BatchLimitDefault).
	WorkersDefault        = 50
	LeaseDefault          = 30 * time.Second
	RescueIntervalDefault = 10 * time.Second
	RescueBatchDefault    = 1000
	PromoteBatchDefault   = 1000
	// CompleteBatchMin and CompleteBatchMax bound the default
	// Config.CompleteBatch, which follows the batch limit: a full claim of
	// no-op jobs is written in one completion transaction (2,000 at the
	// default batch limit), at least 250 and at most 2,000 completions.
	// Measured (docs/bench.md, "Completion batches that follow the batch
	// limit"): at --batch-limit 2000, 2,000-completion batches drained
	// 5–25 % faster than 250 in each of 6 paired rounds; 4,000 was slower.
	CompleteBatchMin = 250
	CompleteBatchMax = 2000
	// CompleteFlushersDefault is the default Config.CompleteFlushers.
	CompleteFlushersDefault = 4
	// ClaimsInFlightDefault is the default Config.ClaimsInFlight: one
	// claim at a time. At the default 50 workers two claims in flight split
	// the slots: claims halved in size and the 3-replica drain fell by a
	// third (docs/bench.md, "A second claim in flight"; measured before the
	// completion's fence was made linear, not since). With twice the slots
	// (--workers 4000 --batch-limit 2000) two in flight are the best
	// measured flags since then (docs/bench.md, "Per-job database work").
	ClaimsInFlightDefault = 1
	// ClaimSlotsDefault is the default Config.ClaimSlots: at most 4
	// skiplocked claims at once across the replicas of one database. On the
	// 2-core bench machine 8 replicas, each claiming whenever its workers
	// were free, drained 0.67–0.80× of the fastest replica count: their
	// concurrent 2,000-row claims each took 1.6–2.0 s against 235 ms alone
	// (docs/bench.md, "Replicas that share a backlog" and "A claim gate").
	// Up to 4 replicas (or 2 with 2 claims in flight) never wait for a slot.
	ClaimSlotsDefault = 4
	// DrainWaitDefault and CompleteLingerDefault trade a few milliseconds
	// under load for fewer, fuller transactions: on the 2-core bench machine
	// they cut the statements per no-op job from 0.25 to 0.15 (claims of
	// 46–50 jobs instead of ~27) and raised 3-replica throughput from
	// 0.64–0.73× to 0.80–0.97× of the raw SQL ceiling (`jobq bench --ci`
	// and `make bench`, see docs/bench.md).
	DrainWaitDefault        = 3 * time.Millisecond
	CompleteLingerDefault   = 2 * time.Millisecond
	RetryBackoffBaseDefault = time.Second
	RetryBackoffMaxDefault  = time.Hour
	RetryJitterDefault      = 0.25
	ShutdownTimeoutDefault  = 30 * time.Second
)

// Config configures one Scheduler (one replica). The zero value of each
// field means its default; call WithDefaults then Validate.
type Config struct {
	// Owner identifies this replica in job_queue.owner and job_execution.
	// Defaults to "<hostname>-<pid>-<4 random hex bytes>".
	Owner string
	// Strategy is StrategySkipLocked or StrategyCAS. Defaults to skiplocked
	// when the server supports SKIP LOCKED (MySQL ≥ 8.0.1, MariaDB ≥ 10.6),
	// else cas.
	Strategy string
	// PollInterval is how often an idle replica scans job_queue. Defaults to
	// 1s; each tick gets ±PollJitter.
	PollInterval time.Duration
	// PollJitter spreads replicas' scans uniformly over
	// [PollInterval-PollJitter, PollInterval+PollJitter]. Defaults to
	// PollInterval/5 (200ms for the default 1s);
	// set NoJitter for exactly PollInterval.
	PollJitter time.Duration
	// NoJitter disables PollJitter (for the classic-design baseline).
	NoJitter bool
	// BatchLimit caps the jobs one claim takes; a claim never takes more than
	// the free worker slots (workers and run-queue places) either, and asks
	// for twice what the last claim took (at least Workers) — after a full
	// claim no less than the limit before it, nor than the due jobs the
	// probe after a quiet spell saw (it reads up to BatchLimit ids) — so its
	// size follows the backlog and the handlers' speed up to this cap.
	// Defaults to BatchLimitDefault (2,000: the raw SQL ceiling's best
	// claim size on the bench machine, see BatchLimitDefault).
	BatchLimit int
	// RunQueue is how many claimed jobs a replica may hold beyond its busy
	// workers, queued locally until a worker frees, so that a long queue is
	// claimed in batches sized by the backlog rather than by the handlers
	// that just returned: a claim takes min(BatchLimit, free workers + free
	// queue places). The queue is adaptive: it offers at most as many places
	// as this replica is expected to start within 100ms — the jobs it
	// finished in the last 100ms, capped by Workers × 100ms / their mean
	// handler time — so a replica running long handlers claims no more than
	// its free workers, and one running short handlers under a backlog
	// claims up to RunQueue ahead. Queued jobs start in claim order
	// (priority, then run_at, then id); one that waits longer than
	// RunQueueWait is given back.
	// Queued jobs are RUNNING in job_queue (owner set, lease renewed by the
	// heartbeat like running ones); at shutdown they are released to
	// WAITING without spending a retry. Completions waiting to be written
	// beyond one CompleteBatch take places from it. Defaults to
	// RunQueueDefault (2,000: one default claim's worth); negative disables
	// it (claims never exceed the free workers).
	RunQueue int
	// RunQueueWait is how long a claimed job may wait in the run queue for
	// a worker while the queue does not move: one that waited longer, when
	// no worker took a queued job for as long either, is given back
	// (released to WAITING without spending a retry, for any replica to
	// claim), together with every queued job ranked after it, so a replica
	// never holds jobs it cannot start soon — long jobs claimed right after
	// short ones — while a peer could run them. A queue that moves (a
	// backlog of short jobs) gives nothing back. The queue is checked every
	// RunQueueWait/4, so a stuck queue holds no job more than 1.25 ×
	// RunQueueWait. Defaults to
	// PollInterval/4 (250ms), at least 200ms (twice the 100ms the queue is
	// sized for): given back within 312ms, its release written
	// and claimed at a peer's next scan, a job is not held locally for one
	// poll interval even on a loaded replica (at PollInterval/2 the release
	// write under load made some wait 1.4s). Negative: never give back.
	RunQueueWait time.Duration
	// Workers is the worker pool size: at most this many handlers run at
	// once on this replica. Defaults to 50.
	Workers int
	// Lease is how long a claim or heartbeat holds a job, on the database
	// clock. Defaults to 30s.
	Lease time.Duration
	// HeartbeatInterval is how often in-flight leases are renewed. Defaults
	// to Lease/3.
	HeartbeatInterval time.Duration
	// RescueInterval is how often this replica returns expired leases to
	// WAITING. A job stays RUNNING at most Lease + RescueInterval after its
	// replica dies. Defaults to 10s.
	RescueInterval time.Duration
	// RescueBatch caps the expired runs one rescue pass reads. Defaults to 1000.
	RescueBatch int
	// PromoteInterval is the longest an idle promoter waits between two
	// reads of the earliest SCHEDULED run_at (one index-only statement).
	// It wakes sooner when that run_at comes, and when a submit or retry on
	// this replica is due sooner, so the interval only bounds how late a
	// job is promoted when the replica that scheduled it died before its
	// run_at (or it was written by other means). Each wait gets
	// ±PromoteInterval/5. Defaults to 5 × PollInterval (5s): at
	// PollInterval it doubled an idle replica's statements (2.05/s against
	// 1.05/s, `jobq bench --future-only`).
	PromoteInterval time.Duration
	// PromoteBatch caps the SCHEDULED jobs one promotion statement makes
	// WAITING; a pass repeats it while batches come back full. Defaults to 1000.
	PromoteBatch int
	// CompleteBatch caps the completions written in one transaction. It
	// is also how many completions may wait unwritten before the run queue
	// shrinks by each further one, so a replica whose completions fall
	// behind claims no faster than they are written (measured: 8 replicas
	// of 2,000-job claims drained ~800 jobs/s without that bound, 6,500
	// with it; docs/bench.md, "Defaults that follow the backlog").
	// Defaults to BatchLimit, at least CompleteBatchMin (250) and at most
	// CompleteBatchMax (2,000): 2,000 at the default batch limit.
	CompleteBatch int
	// CompleteFlushers is how many completion batches this replica writes
	// at once, each in its own transaction, so that a replica draining a
	// long queue is not held to one commit at a time. Defaults to
	// CompleteFlushersDefault; 1 writes one batch at a time.
	CompleteFlushers int
	// ClaimsInFlight is how many claims a draining replica (its last claim
	// filled its batch: the queue is long) keeps running at once, each on
	// its own connection and its own reservation of worker and run-queue
	// slots, so its handlers are not held to one claim round trip at a
	// time. A replica that is not draining sends one claim per scan, and
	// the idle cost is unchanged. The cas strategy always claims one at a
	// time (concurrent cas claims of one replica would race for the same
	// candidates). Claims in flight together take the next jobs in
	// priority order between them but may answer in either order. 0 means
	// ClaimsInFlightDefault (1); must be in [1, 16].
	ClaimsInFlight int
	// ClaimSlots is the claim gate of the skiplocked strategy: a claim
	// first takes one of the cluster's claim slots below ClaimSlots (a row
	// lock on claim_gate, migration 020, held until its transaction ends),
	// so at most that many claims run at once across every replica of the
	// database (each Galera node has its own slots); a claim that finds all
	// taken waits for one, at most store.ClaimSlotWait (1 s), then claims
	// without one. Replicas of one cluster should use the same value. The
	// idle probe, the cas strategy, the limited-type claim and remote
	// fetches take no slot. 0 means ClaimSlotsDefault (4); negative: no
	// gate; at most jobq.ClaimSlotsMax (64).
	ClaimSlots int
	// DrainWait is how long a draining scan (the last claim filled its
	// batch, so the queue is long) waits for as many free worker slots as
	// the last claim took (at most min(Workers, BatchLimit)) before it claims
	// fewer jobs. Slots free one by one as handlers return; claiming at each
	// free slot means many small claim transactions, each costing the
	// database as much as a big one. Only a scan following a claim that
	// filled its batch waits, at most this long per claim; after a short
	// claim (a short queue) the next scan claims at once. Slots held by
	// long-running handlers are not waited for, but a claimed batch mixing
	// short and long handlers makes the next claim wait all of DrainWait.
	// 0 means the default, 3ms; negative disables it.
	DrainWait time.Duration
	// CompleteLinger is how long the completer, holding fewer than
	// CompleteBatch completions while handlers are still running on this
	// replica, waits for them to add to the batch before it commits. It
	// stops waiting as soon as no handler is running, so a lone job's
	// completion is written at once. 0 means the default, 2ms; negative
	// disables it.
	CompleteLinger time.Duration
	// RetryBackoffBase is the backoff before the first retry of a failed
	// job; retry n waits RetryBackoffBase·2^n, capped at RetryBackoffMax,
	// times a uniform factor in [1-RetryJitter, 1+RetryJitter]. Defaults to 1s.
	RetryBackoffBase time.Duration
	// RetryBackoffMax caps the retry backoff. Defaults to 1h.
	RetryBackoffMax time.Duration
	// RetryJitter is the relative jitter of retry backoff, in [0, 1).
	// Defaults to 0.25 (±25%).
	RetryJitter float64
	// ShutdownTimeout is how long Stop lets in-flight handlers finish (while
	// heartbeats go on) before cancelling them and releasing their jobs.
	// Defaults to 30s.
	ShutdownTimeout time.Duration
	// DBRetry retries deadlocks (1213), lock wait timeouts (1205) and lost
	// connections on every path. Defaults: 10ms doubling to 2s.
	DBRetry storeerr.RetryPolicy
	// Logger receives structured logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Observer receives every event of this replica's scheduler (see
	// Event), after Stats has counted it: the metrics, the testbed and
	// tests observe through it; Observers combines several. Defaults to
	// nil: only Stats counts.
	Observer Observer
	// Ops configures concurrency limits, periodic schedules and retention
	// (see OpsConfig for each default).
	Ops OpsConfig
	// RemoteTypes are the job types run by remote workers
	// (docs/workers.md): their jobs are never claimed by this replica's
	// scan; workers fetch them. A remote type must have no handler in the
	// Registry (New refuses). Defaults to none.
	RemoteTypes []string
	// RemoteScanInterval is the longest a waiting fetch of a remote worker
	// goes without its own claim (±20%): work made due on another replica
	// is found within it; work made due on this one wakes the fetch at once.
	// Defaults to 1s.
	RemoteScanInterval time.Duration
}

// pollJitterFor is the default PollJitter for interval: interval/5, so
// replicas' scans spread over 80–120% of the interval.
func pollJitterFor(interval time.Duration) time.Duration { return interval / 5 }

// WithDefaults returns c with every zero field set to its default. It is
// idempotent, and the one place defaults are applied: the owner id is drawn
// here once, so call it once (jobq serve does, before the scheduler and the
// metrics see the Config) and pass the result on.
func (c Config) WithDefaults() Config {
	if c.Owner == "" {
		c.Owner = DefaultOwner()
	}
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	if c.NoJitter {
		c.PollJitter = 0
	} else {
		c.PollJitter = cmp.Or(c.PollJitter, pollJitterFor(c.PollInterval))
	}
	c.BatchLimit = cmp.Or(c.BatchLimit, BatchLimitDefault)
	c.Workers = cmp.Or(c.Workers, WorkersDefault)
	c.RunQueue = cmp.Or(c.RunQueue, RunQueueDefault)
	c.RunQueueWait = cmp.Or(c.RunQueueWait, max(c.PollInterval/4, 2*runQueueHorizon))
	c.Lease = cmp.Or(c.Lease, LeaseDefault)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, heartbeatIntervalFor(c.Lease))
	c.RescueInterval = cmp.Or(c.RescueInterval, RescueIntervalDefault)
	c.RescueBatch = cmp.Or(c.RescueBatch, RescueBatchDefault)
	c.PromoteInterval = cmp.Or(c.PromoteInterval, 5*c.PollInterval)
	c.PromoteBatch = cmp.Or(c.PromoteBatch, PromoteBatchDefault)
	c.CompleteBatch = cmp.Or(c.CompleteBatch, min(max(c.BatchLimit, CompleteBatchMin), CompleteBatchMax))
	c.CompleteFlushers = cmp.Or(c.CompleteFlushers, CompleteFlushersDefault)
	c.DrainWait = cmp.Or(c.DrainWait, DrainWaitDefault)
	c.ClaimsInFlight = cmp.Or(c.ClaimsInFlight, ClaimsInFlightDefault)
	c.ClaimSlots = cmp.Or(c.ClaimSlots, ClaimSlotsDefault)
	c.CompleteLinger = cmp.Or(c.CompleteLinger, CompleteLingerDefault)
	c.RetryBackoffBase = cmp.Or(c.RetryBackoffBase, RetryBackoffBaseDefault)
	c.RetryBackoffMax = cmp.Or(c.RetryBackoffMax, RetryBackoffMaxDefault)
	if c.RetryJitter == 0 {
		c.RetryJitter = RetryJitterDefault
	}
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, ShutdownTimeoutDefault)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Ops = c.Ops.WithDefaults()
	c.RemoteScanInterval = cmp.Or(c.RemoteScanInterval, RemoteScanInterval)
	return c
}

// claimsInFlight is the effective ClaimsInFlight: 1 for the cas strategy.
func (c Config) claimsInFlight() int {
	if c.Strategy == StrategyCAS {
		return 1
	}
	return max(c.ClaimsInFlight, 1)
}

// claimSlots is the effective ClaimSlots (0 when the gate is off, and for
// the cas strategy, whose claims take no slot).
func (c Config) claimSlots() int {
	if c.Strategy == StrategyCAS {
		return 0
	}
	return max(c.ClaimSlots, 0)
}

// runQueue is the effective RunQueue (0 when disabled).
func (c Config) runQueue() int { return max(c.RunQueue, 0) }

// runQueueWait is the effective RunQueueWait (0: never give back).
func (c Config) runQueueWait() time.Duration { return max(c.RunQueueWait, 0) }

// Validate reports every invalid setting of a defaulted Config, joined.
func (c Config) Validate() error {
	var errs []error
	if c.Strategy != "" && c.Strategy != StrategySkipLocked && c.Strategy != StrategyCAS {
		errs = append(errs, fmt.Errorf("strategy: must be %q or %q, got %q", StrategySkipLocked, StrategyCAS, c.Strategy))
	}
	if c.PollInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("poll interval: must be at least 1ms, got %s", c.PollInterval))
	}
	if c.PollJitter < 0 || c.PollJitter >= c.PollInterval {
		errs = append(errs, fmt.Errorf("poll jitter: must be in [0, poll interval), got %s", c.PollJitter))
	}
	if c.BatchLimit < 1 || c.BatchLimit > 10000 {
		errs = append(errs, fmt.Errorf("batch limit: must be in [1, 10000], got %d", c.BatchLimit))
	}
	if c.RunQueue > 100000 {
		errs = append(errs, fmt.Errorf("run queue: must be at most 100000 (negative disables), got %d", c.RunQueue))
	}
	if c.RunQueueWait > time.Hour {
		errs = append(errs, fmt.Errorf("run queue wait: must be at most 1h (negative: never give back), got %s", c.RunQueueWait))
	}
	if c.Workers < 1 || c.Workers > 100000 {
		errs = append(errs, fmt.Errorf("workers: must be in [1, 100000], got %d", c.Workers))
	}
	if c.Lease < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("lease: must be at least 100ms, got %s", c.Lease))
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.Lease {
		errs = append(errs, fmt.Errorf("heartbeat interval: must be in (0, lease), got %s", c.HeartbeatInterval))
	}
	if c.CompleteFlushers < 1 || c.CompleteFlushers > 64 {
		errs = append(errs, fmt.Errorf("complete flushers: must be in [1, 64], got %d", c.CompleteFlushers))
	}
	if c.ClaimsInFlight < 1 || c.ClaimsInFlight > 16 {
		errs = append(errs, fmt.Errorf("claims in flight: must be in [1, 16], got %d", c.ClaimsInFlight))
	}
	if c.ClaimSlots > jobq.ClaimSlotsMax {
		errs = append(errs, fmt.Errorf("claim slots: must be at most %d (negative: no gate), got %d", jobq.ClaimSlotsMax, c.ClaimSlots))
	}
	if c.DrainWait > time.Second {
		errs = append(errs, fmt.Errorf("drain wait: must be at most 1s (negative disables), got %s", c.DrainWait))
	}
	if c.CompleteLinger > time.Second {
		errs = append(errs, fmt.Errorf("complete linger: must be at most 1s (negative disables), got %s", c.CompleteLinger))
	}
	if c.RescueInterval < time.Millisecond {
		// A 1ns interval was accepted and ran the rescue query back to back.
		errs = append(errs, fmt.Errorf("rescue interval: must be at least 1ms, got %s", c.RescueInterval))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("shutdown timeout: must not be negative, got %s", c.ShutdownTimeout))
	}
	if c.RetryBackoffBase < 0 {
		errs = append(errs, fmt.Errorf("retry backoff: must not be negative, got %s", c.RetryBackoffBase))
	}
	if c.PromoteInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("promote interval: must be at least 1ms, got %s", c.PromoteInterval))
	}
	if c.PromoteBatch < 1 || c.PromoteBatch > 100000 {
		errs = append(errs, fmt.Errorf("promote batch: must be in [1, 100000], got %d", c.PromoteBatch))
	}
	if c.RetryJitter < 0 || c.RetryJitter >= 1 {
		errs = append(errs, fmt.Errorf("retry jitter: must be in [0, 1), got %g", c.RetryJitter))
	}
	if c.RetryBackoffMax < c.RetryBackoffBase {
		errs = append(errs, fmt.Errorf("retry backoff max: must be ≥ base %s, got %s", c.RetryBackoffBase, c.RetryBackoffMax))
	}
	if len(c.Owner) > 128 {
		errs = append(errs, fmt.Errorf("owner: at most 128 bytes, got %d", len(c.Owner)))
	}
	for _, t := range c.RemoteTypes {
		if t == "" || len([]rune(t)) > 64 {
			errs = append(errs, fmt.Errorf("remote type: must be 1–64 characters, got %q", t))
		}
	}
	if c.RemoteScanInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("remote scan interval: must be at least 1ms, got %s", c.RemoteScanInterval))
	}
	errs = append(errs, c.Ops.Validate())
	return errors.Join(errs...)
}

// DefaultOwner returns "<hostname>-<pid>-<8 hex digits>", unique per process.
func DefaultOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", cmp.Or(host, "jobq"), os.Getpid(), hex.EncodeToString(b))
}
