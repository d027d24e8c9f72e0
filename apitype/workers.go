package apitype

import (
	"encoding/json"
	"time"
)

// The worker protocol's bodies (docs/workers.md): POST /v1/workers/fetch,
// heartbeat, complete, log and progress, GET /v1/workers and
// GET /v1/jobs/{id}/logs.

// FetchRequest is the body of POST /v1/workers/fetch.
type FetchRequest struct {
	WorkerID string            `json:"worker_id"`
	Labels   map[string]string `json:"labels,omitempty"`
	Version  string            `json:"version,omitempty"`
	JobTypes []string          `json:"job_types"`
	MaxJobs  int               `json:"max_jobs"`
	// WaitMs is how long to wait when nothing is due; nil means the
	// default (20,000).
	WaitMs *int `json:"wait_ms,omitempty"`
}

// FetchedJob is one job a fetch claimed for the worker.
type FetchedJob struct {
	ID          uint64          `json:"id"`
	JobKey      string          `json:"job_key"`
	JobType     string          `json:"job_type"`
	Params      json.RawMessage `json:"params"`
	Attempt     int             `json:"attempt"`
	Priority    int             `json:"priority"`
	RetryTimes  int             `json:"retry_times"`
	MaxRetry    int             `json:"max_retry"`
	TimeoutMs   int             `json:"timeout_ms"`
	RunAt       time.Time       `json:"run_at"`
	LeaseUntil  time.Time       `json:"lease_until"`
	LeaseMs     int64           `json:"lease_ms"`
	HeartbeatMs int64           `json:"heartbeat_ms"`
	TaskToken   string          `json:"task_token"`
	// Parents are the job's parents in its workflow with their recorded
	// outputs (docs/workflows.md); absent outside workflows.
	Parents []ParentOutput `json:"parents,omitempty"`
}

// ParentOutput is one parent of a fetched workflow job.
type ParentOutput struct {
	JobID  uint64          `json:"job_id"`
	JobKey string          `json:"job_key"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output,omitempty"`
}

// FetchResponse is the answer of a fetch: the jobs it claimed (possibly none).
type FetchResponse struct {
	Jobs []FetchedJob `json:"jobs"`
}

// HeartbeatRequest is the body of POST /v1/workers/heartbeat.
type HeartbeatRequest struct {
	WorkerID   string   `json:"worker_id"`
	TaskTokens []string `json:"task_tokens"`
}

// HeartbeatResult is the answer for one task token: State is "renewed",
// "cancel_requested" or "lost"; LeaseUntil (database clock) is set unless lost.
type HeartbeatResult struct {
	JobID      uint64     `json:"job_id"`
	Attempt    int        `json:"attempt"`
	State      string     `json:"state"`
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
}

// HeartbeatResponse holds one result per task token, in request order.
type HeartbeatResponse struct {
	Results []HeartbeatResult `json:"results"`
}

// CompleteRequest is the body of POST /v1/workers/complete.
type CompleteRequest struct {
	TaskToken string          `json:"task_token"`
	Outcome   string          `json:"outcome"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     string          `json:"error,omitempty"`
	// Retry, for a failure: nil means true.
	Retry *bool `json:"retry,omitempty"`
	// Spawn, for a success: jobs added to the run's workflow in the
	// transaction of this completion (docs/workflows.md).
	Spawn *Spawn `json:"spawn,omitempty"`
}

// CompleteResponse is the answer of an applied completion.
type CompleteResponse struct {
	Result  string `json:"result"` // "applied"
	JobID   uint64 `json:"job_id"`
	Attempt int    `json:"attempt"`
	Status  string `json:"status"`
}

// LogRequest is the body of POST /v1/workers/log.
type LogRequest struct {
	TaskToken string   `json:"task_token"`
	Lines     []string `json:"lines"`
}

// ProgressRequest is the body of POST /v1/workers/progress.
type ProgressRequest struct {
	TaskToken string   `json:"task_token"`
	Progress  *float64 `json:"progress"`
	Message   string   `json:"message,omitempty"`
}

// RunAck is the answer of a log append or progress report.
type RunAck struct {
	Result  string `json:"result"` // "ok"
	JobID   uint64 `json:"job_id"`
	Attempt int    `json:"attempt"`
}

// Worker is one live worker (GET /v1/workers).
type Worker struct {
	WorkerID      string            `json:"worker_id"`
	Labels        map[string]string `json:"labels,omitempty"`
	Version       string            `json:"version,omitempty"`
	JobTypes      []string          `json:"job_types,omitempty"`
	LastFetch     *time.Time        `json:"last_fetch,omitempty"`
	LastHeartbeat *time.Time        `json:"last_heartbeat,omitempty"`
	RunsInFlight  int               `json:"runs_in_flight"`
}

// WorkerList is the body of GET /v1/workers.
type WorkerList struct {
	Workers []Worker `json:"workers"`
}

// LogLine is one line of an attempt's log.
type LogLine struct {
	Seq  int       `json:"seq"`
	Line string    `json:"line"`
	Time time.Time `json:"time"`
}

// LogPage is the body of GET /v1/jobs/{id}/logs: lines of one attempt
// after the cursor `after`; NextAfter is the seq to ask after next.
type LogPage struct {
	JobID     uint64    `json:"job_id"`
	Attempt   int       `json:"attempt"`
	Lines     []LogLine `json:"lines"`
	NextAfter int       `json:"next_after"`
}

// MaxCompleteBatch is the most completions one POST
// /v1/workers/complete:batch (or WorkerService.CompleteBatch) carries.
const MaxCompleteBatch = 1000

// CompleteBatchRequest is the body of POST /v1/workers/complete:batch:
// 1–MaxCompleteBatch completions, each a POST /v1/workers/complete body.
type CompleteBatchRequest struct {
	Completions []CompleteRequest `json:"completions"`
}

// Per-completion results of a batch (CompleteBatchResult.Result), each the
// answer POST /v1/workers/complete gives the same body.
const (
	// CompleteApplied: written now, or the same outcome was already written
	// for the attempt (200 applied).
	CompleteApplied = "applied"
	// CompleteStale: the attempt no longer holds the job; nothing changed
	// (409 stale).
	CompleteStale = "stale"
	// CompleteConflict: a different outcome was already applied for the
	// attempt; nothing changed (409 conflict).
	CompleteConflict = "conflict"
	// CompleteForbidden: the secret is wrong, or the job's type is outside
	// the worker token's scope; nothing changed (403 forbidden).
	CompleteForbidden = "forbidden"
	// CompleteInvalid: the completion is malformed or too large; Error
	// names the field and the rule (code invalid_argument or too_large:
	// 400 or 413); nothing changed.
	CompleteInvalid = "invalid"
)

// CompleteBatchResult is what happened to one completion of a batch, at
// the same index as in the request.
type CompleteBatchResult struct {
	Result  string `json:"result"` // CompleteApplied, CompleteStale, CompleteConflict, CompleteForbidden or CompleteInvalid
	JobID   uint64 `json:"job_id,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Status is the job's status after an applied completion.
	Status string `json:"status,omitempty"`
	// Error says why a completion was refused: the code, field and message
	// the single route's error body would carry.
	Error *ErrorDetail `json:"error,omitempty"`
}

// CompleteBatchResponse is the body of a 200 answer to POST
// /v1/workers/complete:batch: one result per completion, in request
// order, and the count of each result.
type CompleteBatchResponse struct {
	Results   []CompleteBatchResult `json:"results"`
	Applied   int                   `json:"applied"`
	Stale     int                   `json:"stale"`
	Conflict  int                   `json:"conflict"`
	Forbidden int                   `json:"forbidden"`
	Invalid   int                   `json:"invalid"`
}

// Count sets the per-result counts from Results.
func (r *CompleteBatchResponse) Count() {
	r.Applied, r.Stale, r.Conflict, r.Forbidden, r.Invalid = 0, 0, 0, 0, 0
	for _, x := range r.Results {
		switch x.Result {
		case CompleteApplied:
			r.Applied++
		case CompleteStale:
			r.Stale++
		case CompleteConflict:
			r.Conflict++
		case CompleteForbidden:
			r.Forbidden++
		case CompleteInvalid:
			r.Invalid++
		}
	}
}
