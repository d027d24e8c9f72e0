// Package checker judges a chaos run like a Jepsen queue checker: it reads
// the database's own record of the run (job_queue, job_execution,
// job_effect), the harness's submit log and its fault log, and reports lost,
// stuck and duplicated jobs, overlapping leases, stale completions that were
// accepted, pickup latency and per-fault recovery figures.
//
// The checker is pure: Check takes a History and returns a Result without
// touching a database, so hand-built histories test it (checker_test.go);
// Load reads a History from a jobq database.
package checker

import (
	"slices"
	"time"
)

// Job statuses and execution outcomes, as the schema stores them.
const (
	StatusWaiting  = "WAITING"
	StatusRunning  = "RUNNING"
	StatusSuccess  = "SUCCESS"
	StatusFailed   = "FAILED"
	StatusCanceled = "CANCELED"

	OutcomeSuccess      = "SUCCESS"
	OutcomeFailed       = "FAILED"
	OutcomeCanceled     = "CANCELED"
	OutcomeLeaseExpired = "LEASE_EXPIRED"
	OutcomeReleased     = "RELEASED"
	OutcomeStale        = "STALE"

	EffectTx    = "tx"
	EffectNonTx = "non_tx"
	// EffectEnd is written by the effect job type when its work (the sleep)
	// ended, outside any transaction; a cancelled run writes none.
	EffectEnd = "end"
)

// History is everything the checker judges. All times are UTC on the
// database clock; the harness converts its own fault and submit times with
// the offset it measured against the database (see Clock).
type History struct {
	// Submits is the harness's submit log: one entry per job it tried to
	// submit, acknowledged or not.
	Submits []Submit `json:"submits"`
	// Jobs are the job_queue rows at the end of the run.
	Jobs []Job `json:"jobs"`
	// Executions are the job_execution rows (one per attempt).
	Executions []Execution `json:"executions"`
	// Effects are the job_effect rows.
	Effects []Effect `json:"effects"`
	// Edges are the workflow dependencies between Jobs (workflow.go); none
	// outside workflow workloads.
	Edges []Edge `json:"edges,omitempty"`
	// Schedules are the run's periodic schedules with their fire ledgers
	// (fire.go); none outside periodic workloads.
	Schedules []Schedule `json:"schedules,omitempty"`
	// RateLimits are the job types' rate limits (ratelimit.go); none
	// outside rate-limited workloads.
	RateLimits []RateLimit `json:"rate_limits,omitempty"`
	// Faults is the harness's fault log.
	Faults []Fault `json:"faults"`
	// SlowRenewals are the heartbeats whose lease renewal the database did
	// not answer within the heartbeat's deadline, from the replicas' logs:
	// on a loaded machine a live replica then gives its runs up before
	// their leases end, and they are rescued with no injected fault.
	SlowRenewals []SlowRenewal `json:"slow_renewals,omitempty"`
	// Stalls are the intervals in which a replica's heartbeat was not run
	// although due (its log's "heartbeat ran late", late_ms before the
	// line): a CPU-starved replica whose leases expired meanwhile, rescued
	// with no injected fault and no database trouble.
	Stalls []Stall `json:"stalls,omitempty"`
	// Acks is the acknowledgement log of remote workers: every completion a
	// worker sent and what the replica answered it (empty without remote
	// workers).
	Acks []Ack `json:"acks,omitempty"`
	// Renewals are the remote workers' lease renewals, as their gateways
	// saw the heartbeat answers: each "renewed" result with the lease_until
	// the database gave it. A worker run rescued after its last renewal's
	// lease ran out was not renewed in time by its worker (a frozen or
	// CPU-starved worker process): the checker counts it as a worker lapse,
	// the worker-side twin of a replica stall, not as a violation.
	Renewals []Renewal `json:"renewals,omitempty"`
	// Lease is the replicas' lease length.
	Lease time.Duration `json:"lease"`
	// RescueInterval is the replicas' rescue interval.
	RescueInterval time.Duration `json:"rescue_interval"`
	// Start is when the workload began; End is the database clock when the
	// history was read (after the drain).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Stopped is when the harness began stopping every replica at the end
	// of the run (after the drain): runs released at shutdown from then on
	// are explained. Zero: not recorded.
	Stopped time.Time `json:"stopped,omitempty"`
}

// Submit is one job the harness submitted.
type Submit struct {
	Key     string    `json:"key"`
	Type    string    `json:"type"`
	JobID   uint64    `json:"job_id"` // 0 when never acknowledged
	Replica string    `json:"replica"`
	SentAt  time.Time `json:"sent_at"`  // intended send time (open loop)
	AckedAt time.Time `json:"acked_at"` // zero when never acknowledged
	Tries   int       `json:"tries"`
	Err     string    `json:"err,omitempty"`
}

// Acked reports whether a replica acknowledged the submit (HTTP 2xx).
func (s Submit) Acked() bool { return s.JobID != 0 }

// Job is one job_queue row.
type Job struct {
	ID         uint64     `json:"id"`
	Key        string     `json:"key"`
	Type       string     `json:"type"`
	Status     string     `json:"status"`
	Attempt    int        `json:"attempt"`
	RetryTimes int        `json:"retry_times"`
	MaxRetry   int        `json:"max_retry"`
	Owner      string     `json:"owner,omitempty"`
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
	CreateTime time.Time  `json:"create_time"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
	// ConcurrencyKey is the job's concurrency key ("" for none) and
	// ConcurrencyLimit its key's limit when the history was read.
	ConcurrencyKey   string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int    `json:"concurrency_limit,omitempty"`
	// RateKey is the job's rate key ("" for none).
	RateKey string `json:"rate_key,omitempty"`
}

// Terminal reports whether the job is SUCCESS, FAILED or CANCELED.
func (j Job) Terminal() bool {
	return j.Status == StatusSuccess || j.Status == StatusFailed || j.Status == StatusCanceled
}

// Execution is one job_execution row: one attempt of one job.
type Execution struct {
	JobID      uint64     `json:"job_id"`
	Attempt    int        `json:"attempt"`
	Owner      string     `json:"owner"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
	Error      string     `json:"error,omitempty"`
	// DueAt is job_queue.run_at when the attempt was claimed (nil for rows
	// written before migration 004): the attempt must not start before it.
	DueAt *time.Time `json:"due_at,omitempty"`
}

// Effect is one job_effect row.
type Effect struct {
	JobID     uint64    `json:"job_id"`
	Attempt   int       `json:"attempt"`
	Kind      string    `json:"kind"` // EffectTx, EffectNonTx or EffectEnd
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"created_at"`
}

// Ack is one completion a remote worker sent (POST /v1/workers/complete)
// and the answer the replica gave, as the worker's gateway logged it.
type Ack struct {
	// Worker is the worker's owner id ("worker:go-1.1").
	Worker string `json:"worker"`
	// Replica is the replica the completion went to.
	Replica string `json:"replica"`
	JobID   uint64 `json:"job_id"`
	Attempt int    `json:"attempt"`
	// Outcome is the completion's outcome: success, failure or release.
	Outcome string `json:"outcome"`
	// SentAt is when the gateway received it, on the database clock.
	SentAt time.Time `json:"sent_at"`
	// Status is the HTTP status; Result the answer's "result" (AckApplied)
	// or its error code (stale, conflict, forbidden …), or "error: …" when
	// the replica did not answer.
	Status int    `json:"status"`
	Result string `json:"result"`
	// Delivered is false when the answer did not reach the worker: cut by
	// an ack-loss fault (the worker retries the same completion), or the
	// first of two copies sent by a duplicate-complete fault.
	Delivered bool `json:"delivered"`
	// Duplicate marks the first copy of a completion that a
	// duplicate-complete fault sent twice.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Renewal is one renewed lease of a remote worker's run.
type Renewal struct {
	Worker     string    `json:"worker"`
	JobID      uint64    `json:"job_id"`
	Attempt    int       `json:"attempt"`
	LeaseUntil time.Time `json:"lease_until"`
}

// AckApplied is the result of an applied completion.
const AckApplied = "applied"

// SlowRenewal is one lease renewal of Owner that timed out waiting for the
// database (its log's "lease renewal failed … context deadline exceeded")
// at At, on the database clock.
type SlowRenewal struct {
	Owner string    `json:"owner"`
	At    time.Time `json:"at"`
}

// Stall is an interval [From, To] in which replica incarnation Owner was
// not run although its heartbeat was due (it logged "heartbeat ran late" at
// To, late_ms = To − From), on the database clock.
type Stall struct {
	Owner string    `json:"owner"`
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
}

// Fault is one injected fault, as the harness logged it.
type Fault struct {
	// Kind is kill, pause, term, db-restart, read-only, partition, latency, reset,
	// clock-skew, node-kill, node-restart, node-isolate or failover — or crash, a replica that exited on its own (a poison
	// job) and that the harness restarted.
	Kind string `json:"kind"`
	// Target is the replica name ("replica-2"), or "" for the database.
	Target string `json:"target,omitempty"`
	// Owner is the owner id the target's incarnation used when the fault
	// began ("replica-2.1"); runs of that owner are the fault's orphans.
	Owner string `json:"owner,omitempty"`
	// Start is when the fault began (signal sent, link cut, database
	// killed); End is when it was lifted (restart ready, SIGCONT, link
	// healed). End equals Start for instantaneous faults without recovery.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// RunningAtStart is how many jobs the target held RUNNING at Start.
	RunningAtStart int `json:"running_at_start"`
	// Workers are the owner ids of the remote workers attached to the
	// target when it began (replica-kill): their runs are the fault's too
	// (a fetch that claimed jobs for them died with the replica).
	Workers []string `json:"workers,omitempty"`
	// Detail is free text ("pause 5s", "latency 200ms").
	Detail string `json:"detail,omitempty"`
	// Err is set when the harness could not inject or lift the fault.
	Err string `json:"err,omitempty"`
}

// Interrupts reports whether the fault can interrupt runs mid-job (and so
// explain repeated non-transactional effects).
func (f Fault) Interrupts() bool {
	switch f.Kind {
	case "kill", "pause", "term", "db-restart", "partition", "clock-skew", "crash",
		"worker-kill", "worker-pause", "worker-partition", "worker-crash", "replica-kill":
		return true
	}
	return f.ClusterWide()
}

// ClusterWide reports whether the fault is on a database node of a
// multi-server topology: a Galera node that vanishes or rejoins stalls
// certification on every node until the membership changes, and a
// failover cuts every replica off, so such a fault concerns every
// replica's runs whatever its Target.
func (f Fault) ClusterWide() bool {
	switch f.Kind {
	case "node-kill", "node-restart", "node-isolate", "failover":
		return true
	}
	return false
}

// Excuses reports whether the fault can legitimately cost a live run its
// lease (so that its rescue is explained): every kind that interrupts runs,
// and latency (a slowed link can make a completion or a renewal arrive
// late). A reset is not an excuse: lost connections are retried on every
// path, so a brief reset must cost no run.
func (f Fault) Excuses() bool { return f.Interrupts() || f.Kind == "latency" }

// excuses is Excuses, plus a read-only fault that lasted at least
// ReadOnlyExcuse(lease): a shorter one must cost no run its lease.
func (f Fault) excuses(lease time.Duration) bool {
	return f.Excuses() || (f.Kind == "read-only" && f.End.Sub(f.Start) >= ReadOnlyExcuse(lease))
}

// excusingFaults is h.Faults with read-only faults that follow each other
// closely merged into one: two refusals less than a heartbeat interval
// (Lease/3) apart leave no beat that can renew in between, so for a run
// they are one refusal as long as both and the gap (three 0.7 s refusals
// 0.3 s apart with a 2 s lease refuse renewals for 2.4 s). The merged fault
// is then held to ReadOnlyExcuse like any other.
func excusingFaults(h History) []Fault {
	out := make([]Fault, 0, len(h.Faults))
	var ro []Fault
	for _, f := range h.Faults {
		if f.Kind == "read-only" && f.Target == "" {
			ro = append(ro, f)
			continue
		}
		out = append(out, f)
	}
	slices.SortFunc(ro, func(a, b Fault) int { return a.Start.Compare(b.Start) })
	for i := 0; i < len(ro); {
		m := ro[i]
		j := i + 1
		for ; j < len(ro) && ro[j].Start.Sub(m.End) < h.Lease/3; j++ {
			if ro[j].End.After(m.End) {
				m.End = ro[j].End
			}
		}
		out = append(out, m)
		i = j
	}
	return out
}

// hits reports whether the fault concerns runs of owner: faults on the
// owner's replica incarnation, and database-wide faults (Target "").
func (f Fault) hits(owner string) bool {
	return f.Target == "" || f.Owner == owner || f.ClusterWide() || slices.Contains(f.Workers, owner)
}
