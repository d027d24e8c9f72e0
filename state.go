package jobq

// JobState is a job's status (job_queue.status). The state machine:
//
//	BLOCKED → WAITING            (a workflow job's last parent ended: in that parent's completion)
//	BLOCKED → CANCELED           (a parent ended FAILED or CANCELED, or a cancel)
//	PARKED → WAITING | SCHEDULED (a slot of its concurrency key freed: in that write)
//	PARKED → CANCELED            (a cancel)
//	WAITING → HELD               (per-key rate limit: the limited claim met it while its key's window was full)
//	HELD → WAITING               (its key's window has room again: in a limited claim of its type)
//	HELD → CANCELED              (a cancel)
//	SCHEDULED → WAITING          (promoter: run_at <= NOW(6) on the database clock)
//	WAITING → RUNNING → SUCCESS | FAILED | CANCELED
//	RUNNING → SCHEDULED          (retry with a backoff: run_at = NOW(6) + backoff)
//	RUNNING → WAITING            (retry without backoff, lease expiry, release)
//	WAITING | SCHEDULED → CANCELED  (cancel before a claim)
//	FAILED | CANCELED → WAITING  (manual retry; PARKED for a keyed job whose key is full)
//
// A submit whose run_at is ahead of the database clock starts SCHEDULED,
// any other starts WAITING; a workflow's job with parents starts BLOCKED
// (docs/workflows.md); a job with a concurrency key whose key has no free
// slot starts PARKED (docs/operations.md, "Concurrency keys"). Only WAITING jobs are claimed, and every WAITING
// job is due: the scan never walks past future work or waiting children.
type JobState string

// Job states.
const (
	StateBlocked   JobState = "BLOCKED"
	StateParked    JobState = "PARKED"
	StateHeld      JobState = "HELD"
	StateScheduled JobState = "SCHEDULED"
	StateWaiting   JobState = "WAITING"
	StateRunning   JobState = "RUNNING"
	StateSuccess   JobState = "SUCCESS"
	StateFailed    JobState = "FAILED"
	StateCanceled  JobState = "CANCELED"
)

// JobStates lists every state in state-machine order.
var JobStates = []JobState{StateBlocked, StateParked, StateScheduled, StateWaiting, StateHeld, StateRunning, StateSuccess, StateFailed, StateCanceled}

// Terminal reports whether s is SUCCESS, FAILED or CANCELED.
func (s JobState) Terminal() bool {
	return s == StateSuccess || s == StateFailed || s == StateCanceled
}

// Valid reports whether s is one of JobStates.
func (s JobState) Valid() bool {
	for _, v := range JobStates {
		if s == v {
			return true
		}
	}
	return false
}

// Outcome is how one attempt ended (job_execution.outcome).
type Outcome string

// Execution outcomes.
const (
	OutcomeSuccess      Outcome = "SUCCESS"       // handler returned nil and the fenced completion committed
	OutcomeFailed       Outcome = "FAILED"        // handler returned an error (or timed out)
	OutcomeCanceled     Outcome = "CANCELED"      // cancel requested while running
	OutcomeLeaseExpired Outcome = "LEASE_EXPIRED" // the rescuer took the job back
	OutcomeReleased     Outcome = "RELEASED"      // handed back unfinished, no retry spent: at shutdown, or a run that never started
	OutcomeStale        Outcome = "STALE"         // the run completed after losing its lease; its write was refused
)
