package jobq

import (
	"encoding/json"
	"time"
)

// TypeControl is the operations state of one job type (job_type_control).
// A type without a row is neither paused nor limited.
type TypeControl struct {
	JobType string
	// Paused types are not claimed; their RUNNING jobs finish normally.
	Paused bool
	// MaxRunning caps the type's RUNNING jobs across all replicas; 0 = no limit.
	MaxRunning int
	// RateStarts caps the type's starts in any window of RatePeriod on the
	// database clock, across all replicas; 0 = no rate limit.
	RateStarts int
	RatePeriod time.Duration
	// RatePerKey applies the rate limit to each rate key of the type on its
	// own (jobs without a key share the key ""); false: to the whole type.
	RatePerKey bool
	UpdateTime time.Time
}

// TypeProbe is what the limited claim's lock-free probe of one job type
// found.
type TypeProbe struct {
	// Claimable: the type is not paused, under its concurrency limit, has
	// room in its rate window and has a due WAITING job in the lane probed.
	Claimable bool
	// RateHeld: the type has due work that waits only because its rate
	// window is full; it next opens OpensIn from the probe (the oldest
	// start in the window plus the period, on the database clock).
	RateHeld bool
	OpensIn  time.Duration
	// RateLimited: the type has a rate limit.
	RateLimited bool
}

// RateLimit is a job type's rate limit: at most Starts starts in any
// window of Period on the database clock, across replicas — of the whole
// type, or of each rate key of the type on its own (PerKey).
type RateLimit struct {
	Starts int
	Period time.Duration
	PerKey bool
}

// Misfire policies of a periodic schedule.
const (
	// MisfireSkip drops instants missed while every replica was down: no
	// catch-up, the schedule resumes at its next instant.
	MisfireSkip = "skip"
	// MisfireOnce runs exactly one catch-up job (the latest missed instant).
	MisfireOnce = "once"
)

// Sources of a periodic schedule.
const (
	PeriodicSourceAPI    = "api"    // created through /v1/periodic
	PeriodicSourceConfig = "config" // from `jobq serve --periodic` or --periodic-file
)

// PeriodicInstantLayout formats a scheduled instant (UTC, whole seconds) in
// a periodic job's key '<name>@<instant>', e.g. "nightly@2026-01-02T03:00:00Z".
const PeriodicInstantLayout = "2006-01-02T15:04:05Z"

// PeriodicKey is the job_key of schedule name's job for instant.
func PeriodicKey(name string, instant time.Time) string {
	return name + "@" + instant.UTC().Format(PeriodicInstantLayout)
}

// Periodic is one cron schedule (periodic_job). Times are UTC.
type Periodic struct {
	Name      string
	Cron      string
	JobType   string
	Params    json.RawMessage
	Priority  int
	MaxRetry  int
	TimeoutMs int
	Misfire   string
	Source    string
	// NextRunAt is the cursor: the first scheduled instant not yet enqueued.
	NextRunAt time.Time
	// LastRunAt is the latest instant enqueued, if any.
	LastRunAt  *time.Time
	CreateTime time.Time
	UpdateTime time.Time
	// Workflow, when not nil, is the template of the workflow each instant
	// starts (PeriodicWorkflowKey) instead of one job; JobType is then "".
	Workflow []WorkflowJobParams
	// Overlap is the overlap policy (OverlapAllow, the default, …).
	Overlap string
	// ActiveJobID is the schedule's latest run let run (0 if none), and
	// QueuedJobID its parked OverlapQueueOne run (0 if none).
	ActiveJobID, QueuedJobID uint64
}

// PeriodicWorkflowJobKey is the job_key of template job key in the
// workflow a schedule starts at instant: PeriodicKey(name, instant) + "/" +
// key; the workflow's key is PeriodicKey(name, instant).
func PeriodicWorkflowJobKey(name string, instant time.Time, key string) string {
	return PeriodicKey(name, instant) + "/" + key
}

// PeriodicSpec is a validated schedule to create or replace. Params must be
// a compact JSON object.
type PeriodicSpec struct {
	Name      string
	Cron      string
	JobType   string
	Params    string
	Priority  int
	MaxRetry  int
	TimeoutMs int
	Misfire   string // MisfireSkip or MisfireOnce
	Source    string // PeriodicSourceAPI or PeriodicSourceConfig
	// Workflow is the template of the workflow each instant starts; nil
	// for a job schedule.
	Workflow []WorkflowJobParams
	// Overlap is the overlap policy; "" means OverlapAllow.
	Overlap string
}

// PeriodicPlanFunc decides, under the schedule's row lock, which instants to
// enqueue given the schedule (its cursor NextRunAt) and the database clock
// now, which due instants the misfire policy skips, and the new cursor (an
// instant after now). A plan with no instants and Next equal to p.NextRunAt
// leaves the row untouched.
type PeriodicPlanFunc func(p Periodic, now time.Time) PeriodicPlan

// PeriodicFireResult is what one fire of a schedule did.
type PeriodicFireResult struct {
	// Inserted are the instants whose job this fire created (an instant whose
	// key already existed is not listed).
	Inserted []time.Time
	// Next is the schedule's cursor after the fire; DBNow the database clock
	// during it, so a replica can sleep Next−DBNow whatever its own clock says.
	Next, DBNow time.Time
	// Locked reports that another session held the schedule's row: the due
	// instants were inserted (job_key dedupes them) but the stored cursor was
	// left as it was, for the next fire to move.
	Locked bool
	// Skipped counts the instants this fire recorded in the fire ledger as
	// skipped (by the misfire or the overlap policy).
	Skipped int64
}

// PurgeParams configures a retention pass.
type PurgeParams struct {
	// OlderThan: terminal jobs (SUCCESS, FAILED, CANCELED) whose finished_at
	// is more than this before NOW(6) are deleted with their job_execution
	// rows. Must be positive.
	OlderThan time.Duration
	// Batch is the most jobs one short delete transaction removes (and the
	// rows one walk step reads). Defaults to 500.
	Batch int
	// MaxJobs stops the pass after about this many deletions; 0 = no cap.
	MaxJobs int
	// BatchFunc, if set, is called after each committed batch with the jobs
	// and execution rows it deleted.
	BatchFunc func(jobs, executions int64)
}

// PurgeResult counts what a retention pass deleted.
type PurgeResult struct {
	Jobs       int64     // job_queue rows deleted
	Executions int64     // job_execution rows deleted (a batched success has none: its job row was its record)
	Batches    int       // delete transactions committed
	Cutoff     time.Time // NOW(6) − OlderThan, UTC
}

// RetryBulkParams selects the jobs a bulk retry re-queues.
type RetryBulkParams struct {
	Status  JobState // StateFailed or StateCanceled
	JobType string   // "" for every type
	Batch   int      // ids per UPDATE; defaults to 500
}

// StatsRecentRows bounds the rows the recent-rate counts of QueueStats read:
// only the newest this many job_queue and job_execution rows (by id).
const StatsRecentRows = 100000

// TypeStatusCount is the number of jobs of one type in one status.
type TypeStatusCount struct {
	JobType string
	Status  JobState
	Count   int64
}

// QueueStats is a snapshot of the queue for `jobq stats`.
type QueueStats struct {
	DBNow time.Time
	// ByStatus counts every job by status; ByTypeStatus by type and status.
	ByStatus     map[string]int64
	ByTypeStatus []TypeStatusCount
	// OldestWaitingSeconds is how long the longest-due WAITING job has been
	// due (NOW(6) − run_at); null when no job is due.
	OldestWaitingSeconds *float64
	// WindowSeconds is the span of the recent counts below (ending now).
	WindowSeconds float64
	// Created counts jobs created in the window; Finished counts attempts
	// finished in the window by outcome (SUCCESS, FAILED, CANCELED, …).
	Created  int64
	Finished map[string]int64
	// CreatedPerSecond and FinishedPerSecond are those counts over the window.
	CreatedPerSecond  float64
	FinishedPerSecond float64
}
