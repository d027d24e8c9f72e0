package apitype

import (
	"encoding/json"
	"time"

	"github.com/jobq/jobq"
)

// The operations API's response bodies (/v1/types, /v1/periodic,
// /v1/jobs/purge, /v1/stats). Each mirrors a jobq type field for field;
// the JSON shape is defined here, not in the vocabulary.

// TypeControl is the operations state of one job type (job_type_control).
// A type without a row is neither paused nor limited.
type TypeControl struct {
	JobType string `json:"job_type"`
	// Paused types are not claimed; their RUNNING jobs finish normally.
	Paused bool `json:"paused"`
	// MaxRunning caps the type's RUNNING jobs across all replicas; 0 = no limit.
	MaxRunning int `json:"max_running"`
	// RateLimit is the type's rate limit; absent when it has none.
	RateLimit  *RateLimit `json:"rate_limit,omitempty"`
	UpdateTime time.Time  `json:"update_time"`
}

// RateLimit is a job type's rate limit: at most Starts starts in any window
// of Period (PeriodMs milliseconds) on the database clock, across replicas
// — of the whole type, or of each rate key of the type (PerKey).
type RateLimit struct {
	Starts   int     `json:"starts"`
	Period   string  `json:"period"`
	PeriodMs float64 `json:"period_ms"`
	PerKey   bool    `json:"per_key"`
}

// Periodic is one cron schedule (periodic_job). Times are UTC.
type Periodic struct {
	Name      string          `json:"name"`
	Cron      string          `json:"cron"`
	JobType   string          `json:"job_type"`
	Params    json.RawMessage `json:"params"`
	Priority  int             `json:"priority"`
	MaxRetry  int             `json:"max_retry"`
	TimeoutMs int             `json:"timeout_ms"`
	Misfire   string          `json:"misfire"`
	// Overlap is the overlap policy: allow, skip, queue_one or
	// cancel_previous.
	Overlap string `json:"overlap"`
	// ActiveJobID is the schedule's latest run let run and QueuedJobID its
	// parked queue_one run; absent when none.
	ActiveJobID uint64 `json:"active_job_id,omitempty"`
	QueuedJobID uint64 `json:"queued_job_id,omitempty"`
	Source      string `json:"source"`
	// NextRunAt is the cursor: the first scheduled instant not yet enqueued.
	NextRunAt time.Time `json:"next_run_at"`
	// LastRunAt is the latest instant enqueued, if any.
	LastRunAt  *time.Time `json:"last_run_at,omitempty"`
	CreateTime time.Time  `json:"create_time"`
	UpdateTime time.Time  `json:"update_time"`
	// Workflow is the template of the workflow each instant starts; absent
	// for a job schedule.
	Workflow *PeriodicWorkflow `json:"workflow,omitempty"`
}

// PurgeResult counts what a retention pass deleted.
type PurgeResult struct {
	Jobs       int64     `json:"jobs"`       // job_queue rows deleted
	Executions int64     `json:"executions"` // job_execution rows deleted
	Batches    int       `json:"batches"`    // delete transactions committed
	Cutoff     time.Time `json:"cutoff"`     // NOW(6) − OlderThan, UTC
}

// TypeStatusCount is the number of jobs of one type in one status.
type TypeStatusCount struct {
	JobType string        `json:"job_type"`
	Status  jobq.JobState `json:"status"`
	Count   int64         `json:"count"`
}

// QueueStats is a snapshot of the queue for `jobq stats`.
type QueueStats struct {
	DBNow time.Time `json:"db_now"`
	// ByStatus counts every job by status; ByTypeStatus by type and status.
	ByStatus     map[string]int64  `json:"by_status"`
	ByTypeStatus []TypeStatusCount `json:"by_type_status"`
	// OldestWaitingSeconds is how long the longest-due WAITING job has been
	// due (NOW(6) − run_at); null when no job is due.
	OldestWaitingSeconds *float64 `json:"oldest_waiting_seconds"`
	// WindowSeconds is the span of the recent counts below (ending now).
	WindowSeconds float64 `json:"window_seconds"`
	// Created counts jobs created in the window; Finished counts attempts
	// finished in the window by outcome (SUCCESS, FAILED, CANCELED, …).
	Created  int64            `json:"created"`
	Finished map[string]int64 `json:"finished"`
	// CreatedPerSecond and FinishedPerSecond are those counts over the window.
	CreatedPerSecond  float64 `json:"created_per_second"`
	FinishedPerSecond float64 `json:"finished_per_second"`
}

// TypeControlFrom returns tc as the API shows it.
func TypeControlFrom(tc jobq.TypeControl) TypeControl {
	out := TypeControl{JobType: tc.JobType, Paused: tc.Paused, MaxRunning: tc.MaxRunning, UpdateTime: tc.UpdateTime}
	if tc.RateStarts > 0 {
		out.RateLimit = &RateLimit{Starts: tc.RateStarts, Period: tc.RatePeriod.String(),
			PeriodMs: float64(tc.RatePeriod) / float64(time.Millisecond), PerKey: tc.RatePerKey}
	}
	return out
}

// TypeList is the body of GET /v1/types.
type TypeList struct {
	Types []TypeControl `json:"types"`
}

// PeriodicFrom returns p as the API shows it.
func PeriodicFrom(p jobq.Periodic) Periodic {
	return Periodic{Name: p.Name, Cron: p.Cron, JobType: p.JobType, Params: p.Params, Priority: p.Priority,
		MaxRetry: p.MaxRetry, TimeoutMs: p.TimeoutMs, Misfire: p.Misfire, Overlap: p.Overlap, ActiveJobID: p.ActiveJobID,
		QueuedJobID: p.QueuedJobID, Source: p.Source, NextRunAt: p.NextRunAt,
		LastRunAt: p.LastRunAt, CreateTime: p.CreateTime, UpdateTime: p.UpdateTime, Workflow: workflowTemplateFrom(p.Workflow)}
}

func workflowTemplateFrom(jobs []jobq.WorkflowJobParams) *PeriodicWorkflow {
	if jobs == nil {
		return nil
	}
	out := &PeriodicWorkflow{Jobs: make([]WorkflowJob, len(jobs))}
	for i, j := range jobs {
		pr, mr, to := j.Priority, j.MaxRetry, j.TimeoutMs
		wj := WorkflowJob{SubmitRequest: SubmitRequest{JobKey: j.JobKey, JobType: j.JobType, Params: json.RawMessage(j.Params),
			Priority: &pr, MaxRetry: &mr, TimeoutMs: &to}}
		for _, d := range j.DependsOn {
			wj.DependsOn = append(wj.DependsOn, DependencyRef{JobKey: d.JobKey, OnParentFailure: string(d.OnParentFailure)})
		}
		out.Jobs[i] = wj
	}
	return out
}

// PeriodicList is the body of GET /v1/periodic.
type PeriodicList struct {
	Periodic []Periodic `json:"periodic"`
}

// PurgeResultFrom returns r as the API shows it.
func PurgeResultFrom(r jobq.PurgeResult) PurgeResult {
	return PurgeResult{Jobs: r.Jobs, Executions: r.Executions, Batches: r.Batches, Cutoff: r.Cutoff}
}

// QueueStatsFrom returns st as the API shows it.
func QueueStatsFrom(st jobq.QueueStats) QueueStats {
	out := QueueStats{DBNow: st.DBNow, ByStatus: st.ByStatus, OldestWaitingSeconds: st.OldestWaitingSeconds,
		WindowSeconds: st.WindowSeconds, Created: st.Created, Finished: st.Finished,
		CreatedPerSecond: st.CreatedPerSecond, FinishedPerSecond: st.FinishedPerSecond}
	if st.ByTypeStatus != nil {
		out.ByTypeStatus = make([]TypeStatusCount, len(st.ByTypeStatus))
	}
	for i, c := range st.ByTypeStatus {
		out.ByTypeStatus[i] = TypeStatusCount{JobType: c.JobType, Status: c.Status, Count: c.Count}
	}
	return out
}
