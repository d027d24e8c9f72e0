package jobq

import "time"

// Overlap policies of a periodic schedule: what an instant does while the
// schedule's previous run is not terminal (SUCCESS, FAILED or CANCELED).
const (
	// OverlapAllow fires every instant whatever the previous run does (the
	// default).
	OverlapAllow = "allow"
	// OverlapSkip skips an instant while the previous run is not terminal;
	// the fire ledger records it skipped with reason FireReasonOverlap.
	OverlapSkip = "skip"
	// OverlapQueueOne enqueues an instant that comes while the previous run
	// is not terminal as a parked run (SCHEDULED at ParkedRunAt) that becomes
	// WAITING when the previous run ends; at most one run waits so, and an
	// instant that finds one waiting is skipped (FireReasonOverlap).
	OverlapQueueOne = "queue_one"
	// OverlapCancelPrevious cancels the previous run (a WAITING or SCHEDULED
	// one at once, a RUNNING one by a cancel request its handler sees) and
	// then fires the instant.
	OverlapCancelPrevious = "cancel_previous"
)

// OverlapPolicies lists the overlap policies, the default first.
var OverlapPolicies = []string{OverlapAllow, OverlapSkip, OverlapQueueOne, OverlapCancelPrevious}

// ParkedRunAt is the run_at of a parked OverlapQueueOne run: it stays
// SCHEDULED (the promoter never reaches it) until released.
var ParkedRunAt = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// Fates of an instant in the fire ledger (periodic_fire).
const (
	// FireFired: the instant's job (or workflow) was enqueued on time.
	FireFired = "fired"
	// FireLate: the instant's job was enqueued after the misfire threshold
	// (the one catch-up of misfire "once" after an outage); LateMs says how
	// late.
	FireLate = "late"
	// FireSkipped: the instant did not run; Reason says why.
	FireSkipped = "skipped"
)

// Reasons of a skipped instant.
const (
	// FireReasonMisfire: no replica fired the instant within the misfire
	// threshold and the misfire policy dropped it.
	FireReasonMisfire = "misfire"
	// FireReasonOverlap: the overlap policy dropped it (the previous run
	// was not terminal).
	FireReasonOverlap = "overlap"
)

// FireLedgerMaxSkipped is the most skipped instants one fire records one
// by one; a longer outage adds one summary row (Covers > 1) for the rest,
// at the first instant not listed.
const FireLedgerMaxSkipped = 10000

// PeriodicPlan is what one fire of a schedule does, as planned under its
// row lock (cronplan.PlanFire).
type PeriodicPlan struct {
	// Enqueue are the instants to enqueue, oldest first.
	Enqueue []time.Time
	// Skipped are the due instants the misfire policy drops, oldest first,
	// at most FireLedgerMaxSkipped; SkippedMore counts further dropped
	// instants, all after the last of Skipped, the first of them at
	// SkippedMoreFrom.
	Skipped         []time.Time
	SkippedMore     int64
	SkippedMoreFrom time.Time
	// LateAfter is the misfire threshold: an enqueued instant more than
	// this before the database clock is recorded FireLate.
	LateAfter time.Duration
	// Next is the new cursor: the first instant after the database clock.
	Next time.Time
}

// FireEntry is one row of the fire ledger: what became of one instant of
// a schedule. Times are UTC.
type FireEntry struct {
	Name    string
	Instant time.Time
	// Fate is FireFired, FireLate or FireSkipped; Reason (skipped only)
	// FireReasonMisfire or FireReasonOverlap.
	Fate   string
	Reason string
	// JobID is the instant's job (0 for a workflow schedule or a skipped
	// instant); WorkflowID the workflow a workflow schedule started.
	JobID      uint64
	WorkflowID uint64
	// LateMs is how long after the instant the row was written, in ms.
	LateMs int64
	// Covers is how many instants the row stands for: 1, or more for the
	// summary row of a long outage (the instants from Instant up to the next
	// row, all skipped).
	Covers     int64
	RecordTime time.Time
}

// FireHistoryParams selects one page of a schedule's fire ledger.
type FireHistoryParams struct {
	Name string
	// Before: only instants before it (zero: from the newest).
	Before time.Time
	// Limit is the page size (1–1000).
	Limit int
}
