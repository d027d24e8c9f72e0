package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
)

// MaxWorkflowKeyRunes is the longest workflow_key (1–64 characters).
const MaxWorkflowKeyRunes = 64

// WorkflowStore is what workflows need from persistence (*store.Store).
type WorkflowStore interface {
	WorkflowSubmit(ctx context.Context, p jobq.WorkflowSubmitParams) (jobq.Workflow, bool, error)
	WorkflowGetByKey(ctx context.Context, key string) (jobq.Workflow, error)
	WorkflowList(ctx context.Context, beforeID uint64, limit int) ([]jobq.WorkflowSummary, error)
	WorkflowCancel(ctx context.Context, id uint64) (jobq.Workflow, error)
	WorkflowRetry(ctx context.Context, id uint64) (jobq.Workflow, int, error)
}

// SetWorkflowStore enables the workflow calls (SubmitWorkflow and the rest).
func (s *Service) SetWorkflowStore(ws WorkflowStore) { s.workflows = ws }

// ErrNoWorkflows is returned by the workflow calls of a Service without a
// WorkflowStore.
var ErrNoWorkflows = errors.New("service: workflows are not enabled")

// DecodeWorkflowSubmit decodes a POST /v1/workflows body: unknown fields are
// refused with their path (jobs[2].dependson).
func DecodeWorkflowSubmit(body []byte) (apitype.WorkflowSubmitRequest, error) {
	var req apitype.WorkflowSubmitRequest
	if !utf8.Valid(body) {
		return req, invalid("body", "must be valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return req, invalid(ute.Field, "must be %s, got %s", ute.Type, ute.Value)
		}
		if m := err.Error(); strings.HasPrefix(m, "json: unknown field ") {
			return req, invalid(strings.Trim(strings.TrimPrefix(m, "json: unknown field "), `"`),
				"unknown field (a workflow has workflow_key and jobs; a job has the fields of POST /v1/jobs and depends_on)")
		}
		return req, invalid("body", "%s", jsonRule(body, err))
	}
	if dec.More() {
		return req, invalid("body", "must hold exactly one JSON object and nothing after it")
	}
	return req, nil
}

// ValidateWorkflow checks a workflow submit: the key, every job as POST
// /v1/jobs would (fields named jobs[i].field), and the graph
// (jobq.CheckGraph: distinct keys, known references, no cycle, at most
// jobq.MaxWorkflowJobs jobs and jobq.MaxWorkflowEdges edges).
func (s *Service) ValidateWorkflow(req apitype.WorkflowSubmitRequest) (jobq.WorkflowSubmitParams, error) {
	p := jobq.WorkflowSubmitParams{WorkflowKey: req.WorkflowKey}
	if err := checkText("workflow_key", req.WorkflowKey, MaxWorkflowKeyRunes); err != nil {
		return p, err
	}
	jobs, err := s.validateWorkflowJobs("jobs", req.Jobs)
	if err != nil {
		return p, err
	}
	p.Jobs = jobs
	h := sha256.New()
	h.Write([]byte(req.WorkflowKey + "\x00"))
	for _, j := range jobs {
		h.Write([]byte(j.JobKey + "\x00" + j.RequestHash + "\x00"))
		for _, d := range j.DependsOn {
			h.Write([]byte(d.JobKey + "\x00" + string(d.OnParentFailure) + "\x00"))
		}
		h.Write([]byte{1})
	}
	p.RequestHash = hex.EncodeToString(h.Sum(nil))
	return p, nil
}

func (s *Service) validateWorkflowJobs(field string, in []apitype.WorkflowJob) ([]jobq.WorkflowJobParams, error) {
	if len(in) > jobq.MaxWorkflowJobs {
		return nil, invalid(field, "at most %d jobs per workflow, got %d", jobq.MaxWorkflowJobs, len(in))
	}
	jobs := make([]jobq.WorkflowJobParams, len(in))
	for i, j := range in {
		if j.UniqueForMs != nil || j.UniqueWhile != "" {
			name := "unique_for_ms"
			if j.UniqueForMs == nil {
				name = "unique_while"
			}
			return nil, invalid(fmt.Sprintf("%s[%d].%s", field, i, name), "uniqueness windows (unique_for_ms, unique_while) apply to single submits, not to a workflow's jobs")
		}
		if j.ConcurrencyKey != "" || j.ConcurrencyLimit != nil {
			name := "concurrency_key"
			if j.ConcurrencyKey == "" {
				name = "concurrency_limit"
			}
			return nil, invalid(fmt.Sprintf("%s[%d].%s", field, i, name), "concurrency keys (concurrency_key, concurrency_limit) are not supported for workflow jobs")
		}
		if j.RateKey != "" {
			return nil, invalid(fmt.Sprintf("%s[%d].rate_key", field, i), "is not supported for workflow jobs")
		}
		sp, err := s.ValidateSubmit(j.SubmitRequest)
		if err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				return nil, invalid(fmt.Sprintf("%s[%d].%s", field, i, ve.Field), "%s", ve.Rule)
			}
			return nil, err
		}
		jobs[i] = jobq.WorkflowJobParams{SubmitParams: sp, DependsOn: make([]jobq.Dependency, len(j.DependsOn))}
		for k, d := range j.DependsOn {
			pol := jobq.OnParentFailure(d.OnParentFailure)
			if pol == "" {
				pol = jobq.OnParentFailureCancel
			}
			jobs[i].DependsOn[k] = jobq.Dependency{JobKey: d.JobKey, OnParentFailure: pol}
		}
	}
	if err := jobq.CheckGraph(jobs); err != nil {
		var ge *jobq.GraphError
		if errors.As(err, &ge) {
			return nil, invalid(strings.Replace(ge.Field, "jobs", field, 1), "%s", ge.Rule)
		}
		return nil, err
	}
	return jobs, nil
}

// ValidateSpawn checks the jobs a run adds to its workflow (a remote
// completion's "spawn", scheduler.Job.Spawn): each as POST /v1/jobs, at
// most jobq.MaxSpawnJobs, depending only on each other. Fields are named
// spawn.jobs[i].field.
func (s *Service) ValidateSpawn(sp *apitype.Spawn) (*jobq.Spawn, error) {
	if sp == nil {
		return nil, nil
	}
	if len(sp.Jobs) > jobq.MaxSpawnJobs {
		return nil, invalid("spawn.jobs", "at most %d jobs per spawn, got %d", jobq.MaxSpawnJobs, len(sp.Jobs))
	}
	jobs, err := s.validateWorkflowJobs("spawn.jobs", sp.Jobs)
	if err != nil {
		return nil, err
	}
	return &jobq.Spawn{Jobs: jobs}, nil
}

// SubmitWorkflow validates req and creates the workflow, all of it or
// nothing. created is false when workflow_key already named a workflow
// with the same request (that workflow is returned); ErrKeyConflict when
// it named a different request, or when a job_key already names another
// job (*jobq.WorkflowKeyTakenError).
func (s *Service) SubmitWorkflow(ctx context.Context, req apitype.WorkflowSubmitRequest) (jobq.Workflow, bool, error) {
	if s.workflows == nil {
		return jobq.Workflow{}, false, ErrNoWorkflows
	}
	p, err := s.ValidateWorkflow(req)
	if err != nil {
		return jobq.Workflow{}, false, err
	}
	for _, j := range p.Jobs {
		if err := s.checkSubmitScope(ctx, j.JobType); err != nil {
			return jobq.Workflow{}, false, err
		}
	}
	w, created, err := retryV2(ctx, s.retry, "workflow submit", func() (jobq.Workflow, bool, error) { return s.workflows.WorkflowSubmit(ctx, p) })
	if err == nil && created {
		s.wakeWorkflow(w)
	}
	return w, created, err
}

func (s *Service) wakeWorkflow(w jobq.Workflow) {
	for _, j := range w.Jobs {
		switch {
		case j.Status == jobq.StateScheduled && s.wakeAt != nil:
			s.wakeAt(j.RunAt, j.CreateTime)
		case j.Status == jobq.StateWaiting && s.wake != nil:
			s.wake()
			return
		}
	}
}

// GetWorkflow returns the workflow named key; ErrNotFound when none.
func (s *Service) GetWorkflow(ctx context.Context, key string) (jobq.Workflow, error) {
	if s.workflows == nil {
		return jobq.Workflow{}, ErrNoWorkflows
	}
	return retryV(ctx, s.retry, "workflow get", func() (jobq.Workflow, error) { return s.workflows.WorkflowGetByKey(ctx, key) })
}

// ListWorkflows returns a page of workflows, newest first; limit is 1–1000
// (default 50) and cursor the next_cursor of the previous page.
func (s *Service) ListWorkflows(ctx context.Context, limit, cursor string) ([]jobq.WorkflowSummary, string, error) {
	if s.workflows == nil {
		return nil, "", ErrNoWorkflows
	}
	n := ListLimitDefault
	if limit != "" {
		v, err := strconv.Atoi(limit)
		if err != nil || v < 1 || v > MaxListLimit {
			return nil, "", invalid("limit", "must be an integer in [1, %d], got %q", MaxListLimit, limit)
		}
		n = v
	}
	var before uint64
	if cursor != "" {
		v, err := strconv.ParseUint(cursor, 10, 64)
		if err != nil || v == 0 {
			return nil, "", invalid("cursor", "must be the next_cursor of a previous page")
		}
		before = v
	}
	ws, err := retryV(ctx, s.retry, "workflow list", func() ([]jobq.WorkflowSummary, error) { return s.workflows.WorkflowList(ctx, before, n+1) })
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(ws) > n {
		ws = ws[:n]
		next = strconv.FormatUint(ws[n-1].ID, 10)
	}
	return ws, next, nil
}

// CancelWorkflow cancels every unfinished job of the workflow named key.
func (s *Service) CancelWorkflow(ctx context.Context, key string) (jobq.Workflow, error) {
	w, err := s.GetWorkflow(ctx, key)
	if err != nil {
		return w, err
	}
	return retryV(ctx, s.retry, "workflow cancel", func() (jobq.Workflow, error) { return s.workflows.WorkflowCancel(ctx, w.ID) })
}

// RetryWorkflow re-runs the FAILED and CANCELED jobs of the workflow named
// key and re-arms their descendants; ErrInvalidState when none is.
func (s *Service) RetryWorkflow(ctx context.Context, key string) (jobq.Workflow, int, error) {
	w, err := s.GetWorkflow(ctx, key)
	if err != nil {
		return w, 0, err
	}
	var n int
	w, err = retryV(ctx, s.retry, "workflow retry", func() (jobq.Workflow, error) {
		var w2 jobq.Workflow
		var e error
		w2, n, e = s.workflows.WorkflowRetry(ctx, w.ID)
		return w2, e
	})
	if err == nil {
		s.wakeWorkflow(w)
	}
	return w, n, err
}

// validatePeriodicWorkflow checks a schedule whose target is a workflow
// template: job_type and params must be absent, the template's jobs valid
// as a workflow submit's (fields named workflow.jobs[i].field), without
// run_at, and every job_key short enough that '<name>@<instant>/<job_key>'
// fits job_key's 64 characters.
func (o *Ops) validatePeriodicWorkflow(req apitype.PeriodicRequest, spec jobq.PeriodicSpec) (jobq.PeriodicSpec, error) {
	if req.JobType != "" || len(req.Params) > 0 || req.Priority != nil || req.MaxRetry != nil || req.TimeoutMs != nil {
		return spec, invalid("workflow", "replaces job_type, params, priority, max_retry and timeout_ms: give those per job of the template")
	}
	maxKey := MaxJobKeyRunes - utf8.RuneCountInString(jobq.PeriodicWorkflowJobKey(req.Name, time.Unix(0, 0), ""))
	for i, j := range req.Workflow.Jobs {
		if j.RunAt != nil {
			return spec, invalid(fmt.Sprintf("workflow.jobs[%d].run_at", i), "is not allowed in a schedule's template: each instant starts the workflow")
		}
		if n := utf8.RuneCountInString(j.JobKey); n > maxKey {
			return spec, invalid(fmt.Sprintf("workflow.jobs[%d].job_key", i),
				"at most %d characters for schedule %q ('<name>@<instant>/<job_key>' must fit 64), got %d", maxKey, req.Name, n)
		}
	}
	sv := &Service{knownType: o.knownType, validateParams: o.validateParams}
	jobs, err := sv.validateWorkflowJobs("workflow.jobs", req.Workflow.Jobs)
	if err != nil {
		return spec, err
	}
	spec.JobType, spec.Params, spec.Workflow = "", "{}", jobs
	return spec, nil
}
