package jobq

import (
	"encoding/json"
	"time"
)

// Alert conditions: what an alert rule reports.
const (
	// AlertJobFailed: a job of the rule's type ended FAILED (its retries
	// exhausted). One incident per job and attempt.
	AlertJobFailed = "job_failed"
	// AlertJobRunningLonger: a job of the rule's type has been RUNNING for
	// longer than the rule's threshold. One incident per job and attempt.
	AlertJobRunningLonger = "job_running_longer"
	// AlertScheduleMissed: a fire of the rule's schedule found instants older
	// than the misfire threshold (no replica fired them in time). One
	// incident per schedule and first missed instant.
	AlertScheduleMissed = "schedule_missed"
	// AlertScheduleSkipped: instants of the rule's schedule that will never
	// run, dropped by its misfire policy (skip: all the missed ones; once:
	// all but the latest). One incident per schedule and first instant.
	AlertScheduleSkipped = "schedule_skipped"
)

// Alert payload presets: the JSON body shape of a rule's messages.
const (
	AlertPresetWebhook  = "webhook"  // jobq's own JSON (the incident)
	AlertPresetSlack    = "slack"    // {"text": …}
	AlertPresetDingTalk = "dingtalk" // {"msgtype":"text","text":{"content": …}}
	AlertPresetWeCom    = "wecom"    // {"msgtype":"text","text":{"content": …}}
	AlertPresetFeishu   = "feishu"   // {"msg_type":"text","content":{"text": …}}
)

// Alert delivery states.
const (
	AlertPending   = "PENDING"   // waiting for its (next) attempt
	AlertSending   = "SENDING"   // claimed by a replica, until its lease ends
	AlertDelivered = "DELIVERED" // the destination answered 2xx
	AlertFailed    = "FAILED"    // given up: attempts exhausted or a permanent refusal
)

// AlertRule is one alert rule (alert_rule): a job type or a schedule, a
// condition and a destination.
type AlertRule struct {
	ID   uint64
	Name string
	// JobType is the watched job type (job conditions); Schedule the
	// watched periodic schedule's name (schedule conditions).
	JobType, Schedule string
	Condition         string // one of the Alert* conditions
	// ThresholdMs is AlertJobRunningLonger's running time, in milliseconds.
	ThresholdMs int64
	URL         string
	Preset      string // one of the AlertPreset* presets
	// Secret names the signing secret (the replicas' --alert-secret-file).
	Secret     string
	CreateTime time.Time
}

// AlertEnqueue is one incident's outbox row to write: one per DedupeKey,
// however often it is enqueued.
type AlertEnqueue struct {
	Rule      AlertRule
	DedupeKey string
	// Incident is the incident's JSON (what the webhook preset sends).
	Incident json.RawMessage
}

// AlertDelivery is one outbox row (alert_delivery).
type AlertDelivery struct {
	ID, RuleID  uint64
	DedupeKey   string
	URL, Preset string
	Secret      string
	Incident    json.RawMessage
	Status      string // AlertPending, AlertSending, AlertDelivered, AlertFailed
	// Attempts counts the sends begun; each claim adds one (the fence of the
	// outcome write).
	Attempts      int
	NextAttemptAt time.Time
	Owner         string
	// LastStatus is the last answer's HTTP status (0: none, e.g. a network
	// error); LastError the last failure.
	LastStatus  int
	LastError   string
	CreateTime  time.Time
	UpdateTime  time.Time
	DeliveredAt *time.Time
}

// AlertExecution is an attempt the detection scan read (job_execution),
// with its job's row when the attempt ended the job FAILED.
type AlertExecution struct {
	ID, JobID  uint64
	Attempt    int
	Outcome    Outcome
	Error      string
	FinishedAt time.Time
	// JobFailed reports that this attempt ended its job FAILED (the job's
	// status is FAILED at this attempt); JobType and JobKey are then set.
	JobFailed       bool
	JobType, JobKey string
}

// AlertDetectParams configures one detection pass over job_execution.
type AlertDetectParams struct {
	// Chunk is the most executions one pass reads. Must be positive.
	Chunk int
	// After, when above the cursor, is where the pass starts reading (the
	// previous pass's LastRead, to read on past executions not yet
	// settled); the cursor still moves only past settled ones.
	After uint64
	// Settle is how long after its finished_at an execution may still be
	// committed: the cursor only moves past executions older than that, so
	// an execution whose transaction commits after a later one is read all
	// the same (later passes re-read the newer ones; DedupeKey dedupes).
	Settle time.Duration
	// PlanFunc turns the executions read into outbox rows, inside the
	// pass's transaction (dbNow is the database clock).
	PlanFunc func(execs []AlertExecution, dbNow time.Time) []AlertEnqueue
}

// AlertDetectResult is what a detection pass did.
type AlertDetectResult struct {
	// Skipped reports that another replica held the cursor: it scans.
	Skipped bool
	// Read counts the executions read; Inserted the outbox rows written.
	Read, Inserted int
	// Cursor is the cursor after the pass; LastRead the last execution id
	// it read (0 when none).
	Cursor, LastRead uint64
}

// AlertRunningJob is a RUNNING job the running-longer check found.
type AlertRunningJob struct {
	ID        uint64
	JobKey    string
	Attempt   int
	StartedAt time.Time
	Owner     string
}
