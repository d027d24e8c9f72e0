package apitype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jobq/jobq"
)

// WorkflowSubmitRequest is the body of POST /v1/workflows: a workflow_key
// (idempotency, like job_key) and 1–10,000 jobs (jobq.MaxWorkflowJobs).
type WorkflowSubmitRequest struct {
	WorkflowKey string        `json:"workflow_key"`
	Jobs        []WorkflowJob `json:"jobs"`
}

// WorkflowJob is one job of a workflow: a POST /v1/jobs body plus the
// job_keys of the jobs of the same workflow it waits for.
type WorkflowJob struct {
	SubmitRequest
	DependsOn []DependencyRef `json:"depends_on,omitempty"`
}

// DependencyRef is one entry of depends_on: the parent's job_key, written
// as a string ("build") or as an object {"job_key": "build",
// "on_parent_failure": "run"}. OnParentFailure is "cancel" (the default:
// the child and its descendants are cancelled when the parent ends FAILED
// or CANCELED) or "run" (the child runs anyway).
type DependencyRef struct {
	JobKey          string `json:"job_key"`
	OnParentFailure string `json:"on_parent_failure,omitempty"`
}

// UnmarshalJSON takes a string or an object.
func (d *DependencyRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*d = DependencyRef{}
		return json.Unmarshal(b, &d.JobKey)
	}
	type plain DependencyRef
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("must be a job_key string or an object {\"job_key\", \"on_parent_failure\"}: %w", err)
	}
	*d = DependencyRef(p)
	return nil
}

// MarshalJSON writes a plain string when the policy is the default.
func (d DependencyRef) MarshalJSON() ([]byte, error) {
	if d.OnParentFailure == "" || d.OnParentFailure == string(jobq.OnParentFailureCancel) {
		return json.Marshal(d.JobKey)
	}
	type plain DependencyRef
	return json.Marshal(plain(d))
}

// Spawn is the "spawn" member of a remote completion's body (and what
// scheduler.Job.Spawn takes): jobs added to the run's workflow with its
// success, depending on each other by job_key (and on the run).
type Spawn struct {
	Jobs []WorkflowJob `json:"jobs"`
}

// Workflow is a workflow as GET /v1/workflows/{key} shows it.
type Workflow struct {
	ID          uint64 `json:"id"`
	WorkflowKey string `json:"workflow_key"`
	// Status is RUNNING while a job is unfinished, else FAILED when a job
	// failed, CANCELED when one was canceled, else SUCCESS.
	Status     string             `json:"status"`
	Counts     map[string]int     `json:"counts"`
	CreateTime time.Time          `json:"create_time"`
	StartedAt  *time.Time         `json:"started_at,omitempty"`
	FinishedAt *time.Time         `json:"finished_at,omitempty"`
	Jobs       []WorkflowJobState `json:"jobs"`
	Edges      []WorkflowEdge     `json:"edges"`
}

// WorkflowJobState is one job of a workflow with its parents' keys.
type WorkflowJobState struct {
	Job
	DependsOn      []string `json:"depends_on"`
	BlockedParents int      `json:"blocked_parents"`
}

// WorkflowEdge is one dependency: child waits for parent.
type WorkflowEdge struct {
	Parent          string `json:"parent"`
	Child           string `json:"child"`
	OnParentFailure string `json:"on_parent_failure"`
}

// WorkflowSummary is one workflow of GET /v1/workflows.
type WorkflowSummary struct {
	ID          uint64    `json:"id"`
	WorkflowKey string    `json:"workflow_key"`
	Status      string    `json:"status"`
	Jobs        int       `json:"jobs"`
	Succeeded   int       `json:"succeeded"`
	Failed      int       `json:"failed"`
	Canceled    int       `json:"canceled"`
	Running     int       `json:"running"`
	CreateTime  time.Time `json:"create_time"`
}

// WorkflowPage is one page of GET /v1/workflows, newest first.
type WorkflowPage struct {
	Workflows  []WorkflowSummary `json:"workflows"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

// WorkflowRetryResult is the answer of POST /v1/workflows/{key}/retry.
type WorkflowRetryResult struct {
	Rearmed  int      `json:"rearmed"`
	Workflow Workflow `json:"workflow"`
}

// WorkflowFrom returns w as the API shows it.
func WorkflowFrom(w jobq.Workflow) Workflow {
	out := Workflow{ID: w.ID, WorkflowKey: w.WorkflowKey, CreateTime: w.CreateTime, Counts: map[string]int{}}
	keys := make(map[uint64]string, len(w.Jobs))
	for _, j := range w.Jobs {
		keys[j.ID] = j.JobKey
	}
	parents := map[uint64][]string{}
	out.Edges = make([]WorkflowEdge, len(w.Edges))
	for i, e := range w.Edges {
		out.Edges[i] = WorkflowEdge{Parent: keys[e.Parent], Child: keys[e.Child], OnParentFailure: string(e.OnParentFailure)}
		parents[e.Child] = append(parents[e.Child], keys[e.Parent])
	}
	sum := jobq.WorkflowSummary{Jobs: len(w.Jobs)}
	out.Jobs = make([]WorkflowJobState, len(w.Jobs))
	for i, j := range w.Jobs {
		deps := parents[j.ID]
		if deps == nil {
			deps = []string{}
		}
		out.Jobs[i] = WorkflowJobState{Job: JobFrom(j), DependsOn: deps, BlockedParents: j.BlockedParents}
		out.Counts[string(j.Status)]++
		switch j.Status {
		case jobq.StateSuccess:
			sum.Succeeded++
		case jobq.StateFailed:
			sum.Failed++
		case jobq.StateCanceled:
			sum.Canceled++
		}
		if j.StartedAt != nil && (out.StartedAt == nil || j.StartedAt.Before(*out.StartedAt)) {
			t := *j.StartedAt
			out.StartedAt = &t
		}
		if j.FinishedAt != nil && (out.FinishedAt == nil || j.FinishedAt.After(*out.FinishedAt)) {
			t := *j.FinishedAt
			out.FinishedAt = &t
		}
	}
	out.Status = sum.Status()
	if out.Status == "RUNNING" {
		out.FinishedAt = nil
	}
	return out
}

// WorkflowSummaryFrom returns s as GET /v1/workflows shows it.
func WorkflowSummaryFrom(s jobq.WorkflowSummary) WorkflowSummary {
	return WorkflowSummary{ID: s.ID, WorkflowKey: s.WorkflowKey, Status: s.Status(), Jobs: s.Jobs,
		Succeeded: s.Succeeded, Failed: s.Failed, Canceled: s.Canceled, Running: s.Running, CreateTime: s.CreateTime}
}
