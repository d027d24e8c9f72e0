package client

import (
	"encoding/json"
	"time"
)

// The worker protocol's bodies (docs/workers.md), as the worker runtime
// sends and reads them. They are kept here rather than in apitype so the
// client's wire contract is the JSON field names alone.

type fetchRequest struct {
	WorkerID string            `json:"worker_id"`
	Labels   map[string]string `json:"labels,omitempty"`
	Version  string            `json:"version,omitempty"`
	JobTypes []string          `json:"job_types"`
	MaxJobs  int               `json:"max_jobs"`
	WaitMs   int               `json:"wait_ms"`
}

type fetchResponse struct {
	Jobs []fetchedJob `json:"jobs"`
}

type fetchedJob struct {
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
	LeaseMs     int             `json:"lease_ms"`
	HeartbeatMs int             `json:"heartbeat_ms"`
	TaskToken   string          `json:"task_token"`
}

type heartbeatRequest struct {
	WorkerID   string   `json:"worker_id"`
	TaskTokens []string `json:"task_tokens"`
}

type heartbeatResponse struct {
	Results []heartbeatResult `json:"results"`
}

// Heartbeat states (heartbeatResult.State).
const (
	hbRenewed         = "renewed"
	hbCancelRequested = "cancel_requested"
	hbLost            = "lost"
)

type heartbeatResult struct {
	JobID      uint64    `json:"job_id"`
	Attempt    int       `json:"attempt"`
	State      string    `json:"state"`
	LeaseUntil time.Time `json:"lease_until"`
}

// Completion outcomes (completeRequest.Outcome).
const (
	outcomeSuccess = "success"
	outcomeFailure = "failure"
	outcomeRelease = "release"
)

type completeRequest struct {
	TaskToken string          `json:"task_token"`
	Outcome   string          `json:"outcome"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     string          `json:"error,omitempty"`
	Retry     *bool           `json:"retry,omitempty"`
}

type completeResponse struct {
	Result  string `json:"result"`
	JobID   uint64 `json:"job_id"`
	Attempt int    `json:"attempt"`
	Status  string `json:"status"`
}

type logRequest struct {
	TaskToken string   `json:"task_token"`
	Lines     []string `json:"lines"`
}

type progressRequest struct {
	TaskToken string  `json:"task_token"`
	Progress  float64 `json:"progress"`
	Message   string  `json:"message,omitempty"`
}
