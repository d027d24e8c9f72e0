// Package apitype holds the request and response bodies of jobq's HTTP API
// (/v1/jobs, /v1/types, /v1/periodic, …), shared by the server (httpapi) and
// the Go client. It imports only the vocabulary package jobq and the
// standard library, so a client never links the server.
//
// The JSON shape of the API is defined here and nowhere else: a change to
// jobq.Job or to the database schema is not an API change until a field of
// these types changes.
package apitype

import (
	"encoding/json"
	"time"

	"github.com/jobq/jobq"
)

// Job is a job as the API returns it (GET /v1/jobs/{id} and friends). Times
// are UTC.
type Job struct {
	ID              uint64          `json:"id"`
	JobKey          string          `json:"job_key"`
	JobType         string          `json:"job_type"`
	Params          json.RawMessage `json:"params"`
	Status          jobq.JobState   `json:"status"`
	Priority        int             `json:"priority"`
	RetryTimes      int             `json:"retry_times"`
	MaxRetry        int             `json:"max_retry"`
	TimeoutMs       int             `json:"timeout_ms"`
	RunAt           time.Time       `json:"run_at"`
	Attempt         int             `json:"attempt"`
	Owner           string          `json:"owner,omitempty"`
	LeaseUntil      *time.Time      `json:"lease_until,omitempty"`
	LastError       string          `json:"last_error,omitempty"`
	StartedAt       *time.Time      `json:"started_at,omitempty"`
	FinishedAt      *time.Time      `json:"finished_at,omitempty"`
	CancelRequested bool            `json:"cancel_requested"`
	CreateTime      time.Time       `json:"create_time"`
	UpdateTime      time.Time       `json:"update_time"`
	// ConcurrencyKey is the job's concurrency key; absent for none.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	// RateKey is the job's rate key; absent for none.
	RateKey string `json:"rate_key,omitempty"`
	// Output is the output of the attempt that succeeded; absent otherwise.
	Output json.RawMessage `json:"output,omitempty"`
	// UniqueUntil and UniqueWhile are the job's uniqueness window (absent:
	// its key is held for good); KeyReleased is true once a later submit of
	// its key created a newer job.
	UniqueUntil *time.Time `json:"unique_until,omitempty"`
	UniqueWhile string     `json:"unique_while,omitempty"`
	KeyReleased bool       `json:"key_released,omitempty"`
}

// JobFrom returns j as the API shows it (the request hash stays inside).
func JobFrom(j jobq.Job) Job {
	out := Job{
		ID: j.ID, JobKey: j.JobKey, JobType: j.JobType, Params: j.Params, Status: j.Status,
		Priority: j.Priority, RetryTimes: j.RetryTimes, MaxRetry: j.MaxRetry, TimeoutMs: j.TimeoutMs,
		RunAt: j.RunAt, Attempt: j.Attempt, Owner: j.Owner, LeaseUntil: j.LeaseUntil, LastError: j.LastError,
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, CancelRequested: j.CancelRequested,
		CreateTime: j.CreateTime, UpdateTime: j.UpdateTime, Output: j.Output,
		UniqueUntil: j.UniqueUntil, KeyReleased: j.KeyReleased, ConcurrencyKey: j.ConcurrencyKey, RateKey: j.RateKey,
	}
	if j.UniqueWhileActive {
		out.UniqueWhile = UniqueWhileActive
	}
	return out
}

// Terminal reports whether the job is SUCCESS, FAILED or CANCELED.
func (j Job) Terminal() bool { return j.Status.Terminal() }

// Execution is one attempt of one job (GET /v1/jobs/{id}/executions).
type Execution struct {
	JobID      uint64       `json:"job_id"`
	Attempt    int          `json:"attempt"`
	Owner      string       `json:"owner"`
	StartedAt  time.Time    `json:"started_at"`
	FinishedAt *time.Time   `json:"finished_at,omitempty"`
	Outcome    jobq.Outcome `json:"outcome,omitempty"`
	Error      string       `json:"error,omitempty"`
	// Output is the attempt's output; Progress (0–1) and ProgressMessage
	// its last progress report. Absent when none.
	Output          json.RawMessage `json:"output,omitempty"`
	Progress        *float64        `json:"progress,omitempty"`
	ProgressMessage string          `json:"progress_message,omitempty"`
}

// ExecutionFrom returns e as the API shows it.
func ExecutionFrom(e jobq.Execution) Execution {
	return Execution{JobID: e.JobID, Attempt: e.Attempt, Owner: e.Owner, StartedAt: e.StartedAt,
		FinishedAt: e.FinishedAt, Outcome: e.Outcome, Error: e.Error,
		Output: e.Output, Progress: e.Progress, ProgressMessage: e.ProgressMessage}
}

// ExecutionList is the body of GET /v1/jobs/{id}/executions.
type ExecutionList struct {
	Executions []Execution `json:"executions"`
}

// SubmitRequest is the body of POST /v1/jobs. Unset optional fields take
// their defaults (service.ValidateSubmit).
type SubmitRequest struct {
	JobKey    string          `json:"job_key"`
	JobType   string          `json:"job_type"`
	Params    json.RawMessage `json:"params,omitempty"`
	Priority  *int            `json:"priority,omitempty"`
	MaxRetry  *int            `json:"max_retry,omitempty"`
	RunAt     *string         `json:"run_at,omitempty"`
	TimeoutMs *int            `json:"timeout_ms,omitempty"`
	// UniqueForMs holds job_key only this long after the job is created
	// (1 ms – 365 days, database clock); UniqueWhile "active" only until
	// the job is terminal. After that a submit of the same key creates a
	// new job. Neither: the key names this job for good (the default).
	UniqueForMs *int64 `json:"unique_for_ms,omitempty"`
	UniqueWhile string `json:"unique_while,omitempty"`
	// ConcurrencyKey, when set, admits the job only while fewer than
	// ConcurrencyLimit (1–1000, default 1) jobs with the same key are
	// admitted; it waits PARKED until then.
	ConcurrencyKey   string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit *int   `json:"concurrency_limit,omitempty"`
	// RateKey (1–128 characters) names the window the job's start counts
	// in under a per-key rate limit of its type: each key gets the type's
	// N starts per period (jobs without a key share one). Ignored by a
	// per-type limit and by a type without one.
	RateKey string `json:"rate_key,omitempty"`
}

// UniqueWhileActive is SubmitRequest.UniqueWhile's one value.
const UniqueWhileActive = "active"

// MaxBatchJobs is the most jobs one POST /v1/jobs:batch (or SubmitJobs)
// request may carry.
const MaxBatchJobs = 1000

// SubmitBatchRequest is the body of POST /v1/jobs:batch: 1–MaxBatchJobs
// submits, each exactly a POST /v1/jobs body.
type SubmitBatchRequest struct {
	Jobs []SubmitRequest `json:"jobs"`
}

// Per-job statuses of a batch submit (SubmitBatchResult.Status).
const (
	// BatchCreated: this request created the job (POST /v1/jobs: 201).
	BatchCreated = "created"
	// BatchExisting: job_key already named a job with the same request
	// (earlier, or earlier in this batch); ID is that job (POST /v1/jobs: 200).
	BatchExisting = "existing"
	// BatchConflict: job_key already names a job with a different request;
	// ID is that job, nothing was written (POST /v1/jobs: 409).
	BatchConflict = "conflict"
	// BatchInvalid: the job failed validation; Error names the field,
	// nothing was written for it (POST /v1/jobs: 400).
	BatchInvalid = "invalid"
)

// SubmitBatchResult is what happened to one job of a batch, at the same
// index as in the request.
type SubmitBatchResult struct {
	Status string `json:"status"` // BatchCreated, BatchExisting, BatchConflict or BatchInvalid
	// ID is the job's id (created or existing) or the conflicting job's id;
	// 0 for an invalid job.
	ID uint64 `json:"id,omitempty"`
	// Error says why a job is invalid or conflicting (code
	// invalid_argument or conflict, and the field).
	Error *ErrorDetail `json:"error,omitempty"`
}

// SubmitBatchResponse is the body of a 200 answer to POST /v1/jobs:batch:
// one result per job, in request order, and the count of each status.
type SubmitBatchResponse struct {
	Results  []SubmitBatchResult `json:"results"`
	Created  int                 `json:"created"`
	Existing int                 `json:"existing"`
	Conflict int                 `json:"conflict"`
	Invalid  int                 `json:"invalid"`
}

// Count sets the per-status counts from Results.
func (r *SubmitBatchResponse) Count() {
	r.Created, r.Existing, r.Conflict, r.Invalid = 0, 0, 0, 0
	for _, x := range r.Results {
		switch x.Status {
		case BatchCreated:
			r.Created++
		case BatchExisting:
			r.Existing++
		case BatchConflict:
			r.Conflict++
		case BatchInvalid:
			r.Invalid++
		}
	}
}

// ListPage is one page of GET /v1/jobs, newest first. NextCursor, when set,
// is the cursor of the next page.
type ListPage struct {
	Jobs       []Job  `json:"jobs"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// LimitRequest is the body of PUT /v1/types/{job_type}/limit.
type LimitRequest struct {
	// MaxRunning caps the type's RUNNING jobs across all replicas, 0–100,000;
	// 0 removes the limit. Required.
	MaxRunning *int `json:"max_running"`
}

// RateLimitRequest is the body of PUT /v1/types/{job_type}/rate-limit: at
// most Starts starts of the type in any window of Period, on the database
// clock, across all replicas.
type RateLimitRequest struct {
	// Starts is the most starts in one window, 1–1,000,000. Required.
	Starts *int `json:"starts"`
	// Period is the window's length as a Go duration ("1s", "500ms",
	// "1m"), 1ms–24h. Required.
	Period string `json:"period"`
	// PerKey applies the limit to each rate key of the type on its own
	// (the jobs' rate_key; jobs without one share one window). Optional:
	// false limits the type as a whole.
	PerKey bool `json:"per_key,omitempty"`
}

// PeriodicRequest is the body of POST /v1/periodic: a schedule to create or
// replace.
type PeriodicRequest struct {
	// Name is 1–40 letters, digits, '_', '.' or '-'; each job is keyed
	// '<name>@<instant>', the instant in UTC to the second.
	Name string `json:"name"`
	// Cron is a cron expression: 5 fields, or 6 with leading seconds, or a
	// descriptor (@hourly, @every 10s), optionally "CRON_TZ=Zone ..."; UTC
	// otherwise (cronplan.Parse).
	Cron string `json:"cron"`
	// JobType, Params, Priority, MaxRetry and TimeoutMs are as on submit.
	JobType   string          `json:"job_type"`
	Params    json.RawMessage `json:"params,omitempty"`
	Priority  *int            `json:"priority,omitempty"`
	MaxRetry  *int            `json:"max_retry,omitempty"`
	TimeoutMs *int            `json:"timeout_ms,omitempty"`
	// Misfire is "skip" (default: instants missed while every replica was
	// down never run) or "once" (exactly one catch-up job, the latest missed).
	Misfire string `json:"misfire,omitempty"`
	// Overlap is what an instant does while the schedule's previous run is
	// not terminal: "allow" (default: it fires all the same), "skip" (it is
	// skipped, ledger reason overlap), "queue_one" (it waits, parked, until
	// the previous run ends; a further instant meanwhile is skipped) or
	// "cancel_previous" (the previous run is cancelled, then it fires). Job
	// schedules only.
	Overlap string `json:"overlap,omitempty"`
	// Workflow, instead of job_type and params, makes each instant start a
	// workflow of these jobs (docs/workflows.md): its key is
	// '<name>@<instant>', each job's '<name>@<instant>/<job_key>'.
	Workflow *PeriodicWorkflow `json:"workflow,omitempty"`
}

// PeriodicWorkflow is a schedule's workflow template: jobs as in POST
// /v1/workflows, without run_at.
type PeriodicWorkflow struct {
	Jobs []WorkflowJob `json:"jobs"`
}

// RetryBulkRequest is the body of POST /v1/jobs/retry.
type RetryBulkRequest struct {
	// Status is FAILED or CANCELED. Required.
	Status string `json:"status"`
	// JobType restricts the retry to one type; "" retries every type.
	JobType string `json:"job_type,omitempty"`
}

// RetryBulkResult says how many jobs went back to WAITING.
type RetryBulkResult struct {
	Retried int64 `json:"retried"`
}

// PurgeRequest is the body of POST /v1/jobs/purge.
type PurgeRequest struct {
	// OlderThan: delete SUCCESS, FAILED and CANCELED jobs (and their
	// executions) finished more than this long ago, e.g. "7d", "36h";
	// at least 1m. Required.
	OlderThan string `json:"older_than"`
}

// ReadyBody is /readyz's answer: {"status":"ready"}, or with 503
// {"status":"unavailable","check":"read_only","error":{...}} naming the
// first readiness check that failed (connect, read_only, innodb_read_only,
// super_read_only, wsrep_ready, wsrep_local_state, schema).
type ReadyBody struct {
	Status string       `json:"status"`
	Check  string       `json:"check,omitempty"`
	Error  *ErrorDetail `json:"error,omitempty"`
}

// ErrorBody is the body of every non-2xx answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong; Field is set for invalid input.
type ErrorDetail struct {
	Code    string `json:"code"` // invalid_argument, not_found, method_not_allowed, conflict, failed_precondition, too_large, unavailable, internal
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}
