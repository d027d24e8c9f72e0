package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/scheduler"
)

// Limits of the worker protocol (docs/workers.md). Each is enforced at the
// edge with a 4xx naming the field.
const (
	// MaxWorkerIDRunes is 121: a claim stores "worker:" + worker_id as the
	// job's owner, a VARCHAR(128) column.
	MaxWorkerIDRunes    = 121
	MaxWorkerLabels     = 16
	MaxLabelKeyRunes    = 64
	MaxLabelValueRunes  = 256
	MaxWorkerVersion    = 64
	MaxFetchTypes       = 64
	MaxFetchJobs        = 1000
	MaxFetchWaitMs      = 60000
	FetchWaitMsDefault  = 20000
	MaxHeartbeatTokens  = 1000
	MaxCompleteErrRunes = jobq.MaxErrorRunes // what job_queue.last_error keeps
	MaxLogLinesPerCall  = 1000
	MaxLogPage          = 1000
)

// Conflict is a worker request the job's state refuses (HTTP 409): Code is
// "stale" (the token's attempt no longer holds the job) or "conflict" (a
// different outcome was applied). Nothing changed.
type Conflict struct {
	Code  string
	Field string
	Rule  string
}

func (e *Conflict) Error() string { return e.Field + ": " + e.Rule }

// TooLarge is a request field over its size limit (HTTP 413). Nothing changed.
type TooLarge struct {
	Field string
	Rule  string
}

func (e *TooLarge) Error() string { return e.Field + ": " + e.Rule }

// ErrNoWorkers is returned by the worker calls on a replica that runs no
// remote job type (HTTP 404 on its worker routes would hide the cause).
var ErrNoWorkers = &ValidationError{Field: "job_types", Rule: "this replica has no remote job type (jobq serve --remote-type)"}

// Workers serves the worker protocol: it checks each request (fields,
// limits, the caller's scope) and runs it on the scheduler's remote
// executor. Transports only translate.
type Workers struct {
	remote *scheduler.Remote
	svc    *Service
}

// NewWorkers returns the worker protocol over remote (nil: no remote job
// type on this replica; every call answers ErrNoWorkers) and svc (reads).
func NewWorkers(remote *scheduler.Remote, svc *Service) *Workers {
	return &Workers{remote: remote, svc: svc}
}

// decodeStrict decodes body, exactly one JSON object with only the fields
// of v, into v; errors are *ValidationError naming the field (rules say
// what each must be) or "body".
func decodeStrict(body []byte, v any, rules map[string]string) error {
	if !utf8.Valid(body) {
		return invalid("body", "must be valid UTF-8")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("body", "is empty; must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		switch {
		case errors.As(err, &ute) && ute.Field != "":
			field := ute.Field
			if i := strings.IndexByte(field, '.'); i >= 0 {
				field = field[:i]
			}
			rule := rules[field]
			if rule == "" {
				rule = "has the wrong JSON type"
			}
			return invalid(field, "%s, got %s", rule, ute.Value)
		case errors.As(err, &ute):
			return invalid("body", "must be a JSON object, got %s", ute.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return invalid(fieldName(name), "unknown field")
		default:
			return invalid("body", "%s", jsonRule(body, err))
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("body", "must hold exactly one JSON object and nothing after it")
	}
	return nil
}

var fetchRules = map[string]string{
	"worker_id": "must be a JSON string", "labels": "must be a JSON object of strings", "version": "must be a JSON string",
	"job_types": "must be a JSON array of strings", "max_jobs": "must be a JSON integer", "wait_ms": "must be a JSON integer",
}

// DecodeFetch parses a fetch body strictly (see decodeStrict).
func DecodeFetch(body []byte) (apitype.FetchRequest, error) {
	var r apitype.FetchRequest
	return r, decodeStrict(body, &r, fetchRules)
}

var heartbeatRules = map[string]string{"worker_id": "must be a JSON string", "task_tokens": "must be a JSON array of strings"}

// DecodeHeartbeat parses a heartbeat body strictly.
func DecodeHeartbeat(body []byte) (apitype.HeartbeatRequest, error) {
	var r apitype.HeartbeatRequest
	return r, decodeStrict(body, &r, heartbeatRules)
}

var completeRules = map[string]string{"task_token": "must be a JSON string", "outcome": "must be a JSON string",
	"output": "must be a JSON value", "error": "must be a JSON string", "retry": "must be a JSON boolean"}

// DecodeComplete parses a completion body strictly.
func DecodeComplete(body []byte) (apitype.CompleteRequest, error) {
	var r apitype.CompleteRequest
	return r, decodeStrict(body, &r, completeRules)
}

var logRules = map[string]string{"task_token": "must be a JSON string", "lines": "must be a JSON array of strings"}

// DecodeLog parses a log body strictly.
func DecodeLog(body []byte) (apitype.LogRequest, error) {
	var r apitype.LogRequest
	return r, decodeStrict(body, &r, logRules)
}

var progressRules = map[string]string{"task_token": "must be a JSON string", "progress": "must be a JSON number in [0, 1]",
	"message": "must be a JSON string"}

// DecodeProgress parses a progress body strictly.
func DecodeProgress(body []byte) (apitype.ProgressRequest, error) {
	var r apitype.ProgressRequest
	return r, decodeStrict(body, &r, progressRules)
}

// workerAllow is the job-type check of the caller: any remote type for an
// admin, the token's types for a worker.
func (w *Workers) workerAllow(ctx context.Context) func(string) bool {
	c := CallerFrom(ctx)
	return func(t string) bool {
		if !w.remote.IsRemote(t) {
			return false
		}
		return c.Worker == nil || w.svc.scopeAllows(*c.Worker, t)
	}
}

func checkWorkerID(id string) error {
	if id == "" || utf8.RuneCountInString(id) > MaxWorkerIDRunes {
		return invalid("worker_id", "must be 1–%d characters", MaxWorkerIDRunes)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return invalid("worker_id", "must not hold control characters")
		}
	}
	return nil
}

// Fetch checks req and claims due jobs for the worker, waiting up to
// wait_ms for one (scheduler.Remote.Fetch). release gives the jobs back
// (WAITING, no retry spent) and must be called when the answer could not be
// delivered.
func (w *Workers) Fetch(ctx context.Context, req apitype.FetchRequest) (resp apitype.FetchResponse, release func(), err error) {
	resp.Jobs = []apitype.FetchedJob{}
	release = func() {}
	if w.remote == nil {
		return resp, release, ErrNoWorkers
	}
	if err := checkWorkerID(req.WorkerID); err != nil {
		return resp, release, err
	}
	if len(req.Labels) > MaxWorkerLabels {
		return resp, release, invalid("labels", "at most %d pairs, got %d", MaxWorkerLabels, len(req.Labels))
	}
	for k, v := range req.Labels {
		if k == "" || utf8.RuneCountInString(k) > MaxLabelKeyRunes {
			return resp, release, invalid("labels", "keys must be 1–%d characters", MaxLabelKeyRunes)
		}
		if utf8.RuneCountInString(v) > MaxLabelValueRunes {
			return resp, release, invalid("labels", "values must be at most %d characters (key %q)", MaxLabelValueRunes, k)
		}
	}
	if utf8.RuneCountInString(req.Version) > MaxWorkerVersion {
		return resp, release, invalid("version", "must be at most %d characters", MaxWorkerVersion)
	}
	if len(req.JobTypes) == 0 || len(req.JobTypes) > MaxFetchTypes {
		return resp, release, invalid("job_types", "must hold 1–%d job types, got %d", MaxFetchTypes, len(req.JobTypes))
	}
	allow := w.workerAllow(ctx)
	seen := map[string]bool{}
	types := make([]string, 0, len(req.JobTypes))
	for _, t := range req.JobTypes {
		if !w.remote.IsRemote(t) {
			return resp, release, invalid("job_types", "%q is not a remote job type (the remote types are %s)", t, strings.Join(w.remote.Types(), ", "))
		}
		if !allow(t) {
			return resp, release, &Forbidden{Field: "job_types", Rule: fmt.Sprintf("%q is outside this worker token's scope (%s)", t, CallerFrom(ctx).Worker.String())}
		}
		if !seen[t] {
			seen[t] = true
			types = append(types, t)
		}
	}
	if req.MaxJobs < 1 || req.MaxJobs > MaxFetchJobs {
		return resp, release, invalid("max_jobs", "must be in [1, %d], got %d", MaxFetchJobs, req.MaxJobs)
	}
	wait := FetchWaitMsDefault
	if req.WaitMs != nil {
		wait = *req.WaitMs
	}
	if wait < 0 || wait > MaxFetchWaitMs {
		return resp, release, invalid("wait_ms", "must be in [0, %d], got %d", MaxFetchWaitMs, wait)
	}
	jobs, err := w.remote.Fetch(ctx, scheduler.FetchParams{WorkerID: req.WorkerID, Labels: req.Labels, Version: req.Version,
		Types: types, MaxJobs: req.MaxJobs, Wait: time.Duration(wait) * time.Millisecond})
	if err != nil {
		return resp, release, err
	}
	for _, j := range jobs {
		resp.Jobs = append(resp.Jobs, apitype.FetchedJob{
			ID: j.ID, JobKey: j.JobKey, JobType: j.JobType, Params: j.Params, Attempt: j.Attempt, Priority: j.Priority,
			RetryTimes: j.RetryTimes, MaxRetry: j.MaxRetry, TimeoutMs: j.TimeoutMs, RunAt: j.RunAt, LeaseUntil: j.LeaseUntil,
			LeaseMs: j.Lease.Milliseconds(), HeartbeatMs: j.Heartbeat.Milliseconds(), TaskToken: j.TaskToken,
			Parents: parentsFrom(j.Parents),
		})
	}
	return resp, func() { w.remote.Release(jobs) }, nil
}

// Heartbeat checks req and renews its tokens' leases in one statement.
func (w *Workers) Heartbeat(ctx context.Context, req apitype.HeartbeatRequest) (apitype.HeartbeatResponse, error) {
	resp := apitype.HeartbeatResponse{Results: []apitype.HeartbeatResult{}}
	if w.remote == nil {
		return resp, ErrNoWorkers
	}
	if err := checkWorkerID(req.WorkerID); err != nil {
		return resp, err
	}
	if len(req.TaskTokens) == 0 || len(req.TaskTokens) > MaxHeartbeatTokens {
		return resp, invalid("task_tokens", "must hold 1–%d task tokens, got %d", MaxHeartbeatTokens, len(req.TaskTokens))
	}
	res, err := w.remote.Heartbeat(ctx, req.WorkerID, req.TaskTokens, w.workerAllow(ctx))
	if err != nil {
		return resp, err
	}
	for _, r := range res {
		resp.Results = append(resp.Results, apitype.HeartbeatResult{JobID: r.JobID, Attempt: r.Attempt, State: string(r.State), LeaseUntil: r.LeaseUntil})
	}
	return resp, nil
}

// checkTaskToken checks a task token's form (400 naming task_token).
func checkTaskToken(t string) error {
	if t == "" {
		return invalid("task_token", "is required")
	}
	if _, err := scheduler.ParseTaskToken(t); err != nil {
		return invalid("task_token", "%s", strings.TrimPrefix(err.Error(), scheduler.ErrTokenMalformed.Error()+": "))
	}
	return nil
}

// Complete checks req and writes the worker's outcome (see
// scheduler.Remote.Complete): applied, or *Conflict (stale, conflict),
// *Forbidden, *TooLarge, *ValidationError (a spawn of a job outside a
// workflow is one, naming spawn).
func (w *Workers) Complete(ctx context.Context, req apitype.CompleteRequest) (apitype.CompleteResponse, error) {
	var resp apitype.CompleteResponse
	if w.remote == nil {
		return resp, ErrNoWorkers
	}
	p, err := w.completeParams(ctx, req)
	if err != nil {
		return resp, err
	}
	res, err := w.remote.Complete(ctx, p)
	if err != nil {
		return resp, workerError(err)
	}
	return apitype.CompleteResponse{Result: apitype.CompleteApplied, JobID: res.JobID, Attempt: res.Attempt, Status: string(res.Status)}, nil
}

// completeParams checks one completion body: *ValidationError or
// *TooLarge naming the field, *Forbidden for a spawn outside the token's
// submit scope.
func (w *Workers) completeParams(ctx context.Context, req apitype.CompleteRequest) (scheduler.CompleteParams, error) {
	if err := checkTaskToken(req.TaskToken); err != nil {
		return scheduler.CompleteParams{}, err
	}
	p := scheduler.CompleteParams{TaskToken: req.TaskToken, Outcome: req.Outcome, Allow: w.workerAllow(ctx)}
	switch req.Outcome {
	case scheduler.CompleteSuccess:
		if req.Error != "" {
			return p, invalid("error", "is for a failure or a release, not a success")
		}
		if req.Retry != nil {
			return p, invalid("retry", "is for a failure only")
		}
		if req.Spawn != nil {
			sp, err := w.svc.ValidateSpawn(req.Spawn)
			if err != nil {
				return p, err
			}
			// Spawning is submitting: the token needs the submit grant
			// for each spawned job's type.
			for _, j := range sp.Jobs {
				if err := w.svc.checkSubmitScope(ctx, j.JobType); err != nil {
					return p, err
				}
			}
			p.Spawn = sp
		}
		if len(req.Output) > 0 {
			var compact bytes.Buffer
			if err := json.Compact(&compact, req.Output); err != nil {
				return p, invalid("output", "must be a JSON value")
			}
			if compact.Len() > jobq.MaxOutputBytes {
				return p, &TooLarge{Field: "output", Rule: fmt.Sprintf("must be at most %d bytes of JSON, got %d", jobq.MaxOutputBytes, compact.Len())}
			}
			if jobq.JSONDepth(compact.Bytes()) > jobq.MaxOutputDepth {
				return p, invalid("output", "must nest objects and arrays at most %d deep", jobq.MaxOutputDepth)
			}
			if !bytes.Equal(compact.Bytes(), []byte("null")) {
				p.Output = json.RawMessage(compact.Bytes())
			}
		}
	case scheduler.CompleteFailure, scheduler.CompleteRelease:
		if req.Spawn != nil {
			return p, invalid("spawn", "is for a success only")
		}
		if len(req.Output) > 0 {
			return p, invalid("output", "is for a success only")
		}
		if req.Outcome == scheduler.CompleteRelease && req.Retry != nil {
			return p, invalid("retry", "is for a failure only")
		}
		p.Error = jobq.SanitizeText(req.Error, MaxCompleteErrRunes)
		p.Retry = req.Retry == nil || *req.Retry
	case "":
		return p, invalid("outcome", "is required: success, failure or release")
	default:
		return p, invalid("outcome", "must be success, failure or release, got %q", req.Outcome)
	}
	return p, nil
}

// CompleteItem is one completion of a batch as decoded: the request, or
// the error that kept it from decoding.
type CompleteItem struct {
	Req apitype.CompleteRequest
	Err error
}

// CompleteMany checks each completion of a batch and writes the valid ones
// together (scheduler.Remote.CompleteMany: the batches concurrent single
// completions join). Each gets, at its index, the answer Complete would
// have given it alone: applied with the job's status, stale, conflict,
// forbidden, or invalid naming the field and the rule (code
// invalid_argument, or too_large) — and a refused one changes nothing. A
// task token given twice in one batch is invalid the second time. The whole
// call fails only when items is empty or longer than
// apitype.MaxCompleteBatch (*ValidationError on "completions"), or when a
// completion could not be written (the database is unavailable, the client
// went away); completions are idempotent, so sending the same batch again
// is safe.
func (w *Workers) CompleteMany(ctx context.Context, items []CompleteItem) (apitype.CompleteBatchResponse, error) {
	var resp apitype.CompleteBatchResponse
	if w.remote == nil {
		return resp, ErrNoWorkers
	}
	if len(items) == 0 || len(items) > apitype.MaxCompleteBatch {
		return resp, invalid("completions", "must hold 1–%d completions, got %d", apitype.MaxCompleteBatch, len(items))
	}
	resp.Results = make([]apitype.CompleteBatchResult, len(items))
	ps := make([]scheduler.CompleteParams, 0, len(items))
	at := make([]int, 0, len(items))
	seen := make(map[string]int, len(items))
	for i, it := range items {
		err := it.Err
		var p scheduler.CompleteParams
		if err == nil {
			p, err = w.completeParams(ctx, it.Req)
		}
		if err == nil {
			if first, ok := seen[it.Req.TaskToken]; ok {
				err = invalid("task_token", "is the task token of completion %d of this batch; one completion per task token", first+1)
			} else {
				seen[it.Req.TaskToken] = i
			}
		}
		if err != nil {
			r, ok := completeRefusal(err)
			if !ok {
				return apitype.CompleteBatchResponse{}, err
			}
			resp.Results[i] = r
			continue
		}
		ps = append(ps, p)
		at = append(at, i)
	}
	for k, a := range w.remote.CompleteMany(ctx, ps) {
		i := at[k]
		if a.Err != nil {
			r, ok := completeRefusal(workerError(a.Err))
			if !ok {
				return apitype.CompleteBatchResponse{}, a.Err
			}
			r.JobID, r.Attempt = a.Result.JobID, a.Result.Attempt
			resp.Results[i] = r
			continue
		}
		resp.Results[i] = apitype.CompleteBatchResult{Result: apitype.CompleteApplied, JobID: a.Result.JobID, Attempt: a.Result.Attempt,
			Status: string(a.Result.Status)}
	}
	resp.Count()
	return resp, nil
}

// completeRefusal is the batch result of a refused completion, with the
// error detail the single route would answer; ok is false for an error
// that refuses nothing (the database, the context).
func completeRefusal(err error) (r apitype.CompleteBatchResult, ok bool) {
	status, d := ErrorFor(err)
	r.Error = &d
	switch status {
	case http.StatusForbidden:
		r.Result = apitype.CompleteForbidden
	case http.StatusConflict:
		if d.Code != apitype.CompleteStale && d.Code != apitype.CompleteConflict {
			return r, false
		}
		r.Result = d.Code
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		r.Result = apitype.CompleteInvalid
	default:
		return r, false
	}
	return r, true
}

// DecodeCompleteBatch parses a POST /v1/workers/complete:batch body: a
// JSON object with exactly one field, "completions", an array of
// 1–apitype.MaxCompleteBatch completion bodies. An envelope error fails
// the whole request (*ValidationError on "body" or "completions"); a
// completion that does not decode is an invalid item carrying
// DecodeComplete's error.
func DecodeCompleteBatch(body []byte) ([]CompleteItem, error) {
	raws, err := decodeEnvelope(body, "completions", "completion objects", apitype.MaxCompleteBatch)
	if err != nil {
		return nil, err
	}
	items := make([]CompleteItem, len(raws))
	for i, raw := range raws {
		items[i].Req, items[i].Err = DecodeComplete(raw)
	}
	return items, nil
}

// workerError maps the remote executor's refusals to the service's errors.
func workerError(err error) error {
	switch {
	case errors.Is(err, scheduler.ErrTokenStale):
		return &Conflict{Code: "stale", Field: "task_token", Rule: "this attempt no longer holds the job; nothing changed"}
	case errors.Is(err, scheduler.ErrOutcomeConflict):
		return &Conflict{Code: "conflict", Field: "outcome", Rule: "a different outcome was already applied for this attempt; nothing changed"}
	case errors.Is(err, scheduler.ErrTokenForbidden):
		return &Forbidden{Field: "task_token", Rule: "the task token is not accepted (wrong secret, or its job type is outside this worker token's scope); nothing changed"}
	case errors.Is(err, scheduler.ErrTokenMalformed):
		return invalid("task_token", "%s", err.Error())
	case errors.Is(err, scheduler.ErrNotInWorkflow):
		return invalid("spawn", "is for a job in a workflow, and this job is not part of one (complete it without spawn); nothing changed")
	case errors.Is(err, scheduler.ErrLogFull):
		return &TooLarge{Field: "lines", Rule: fmt.Sprintf("the attempt's log would pass %d bytes; nothing appended", jobq.MaxLogBytes)}
	}
	return err
}

// AppendLog checks req and appends its lines to the attempt's log.
func (w *Workers) AppendLog(ctx context.Context, req apitype.LogRequest) (apitype.RunAck, error) {
	if w.remote == nil {
		return apitype.RunAck{}, ErrNoWorkers
	}
	if err := checkTaskToken(req.TaskToken); err != nil {
		return apitype.RunAck{}, err
	}
	if len(req.Lines) == 0 || len(req.Lines) > MaxLogLinesPerCall {
		return apitype.RunAck{}, invalid("lines", "must hold 1–%d lines, got %d", MaxLogLinesPerCall, len(req.Lines))
	}
	total := 0
	for i, l := range req.Lines {
		if len(l) > jobq.MaxLogLineBytes {
			return apitype.RunAck{}, &TooLarge{Field: "lines", Rule: fmt.Sprintf("line %d: each line must be at most %d bytes, got %d", i+1, jobq.MaxLogLineBytes, len(l))}
		}
		req.Lines[i] = jobq.SanitizeText(l, jobq.MaxLogLineBytes)
		total += len(l)
	}
	if total > jobq.MaxLogBytes {
		return apitype.RunAck{}, &TooLarge{Field: "lines", Rule: fmt.Sprintf("an attempt's log holds at most %d bytes, got %d in this call", jobq.MaxLogBytes, total)}
	}
	f, err := w.remote.AppendLog(ctx, req.TaskToken, req.Lines, w.workerAllow(ctx))
	if err != nil {
		return apitype.RunAck{}, workerError(err)
	}
	return apitype.RunAck{Result: "ok", JobID: f.ID, Attempt: f.Attempt}, nil
}

// ReportProgress checks req and records the attempt's progress.
func (w *Workers) ReportProgress(ctx context.Context, req apitype.ProgressRequest) (apitype.RunAck, error) {
	if w.remote == nil {
		return apitype.RunAck{}, ErrNoWorkers
	}
	if err := checkTaskToken(req.TaskToken); err != nil {
		return apitype.RunAck{}, err
	}
	if req.Progress == nil {
		return apitype.RunAck{}, invalid("progress", "is required: a JSON number in [0, 1]")
	}
	if p := *req.Progress; math.IsNaN(p) || p < 0 || p > 1 {
		return apitype.RunAck{}, invalid("progress", "must be in [0, 1], got %g", p)
	}
	if utf8.RuneCountInString(req.Message) > jobq.MaxProgressMessageRunes {
		return apitype.RunAck{}, invalid("message", "must be at most %d characters", jobq.MaxProgressMessageRunes)
	}
	f, err := w.remote.ReportProgress(ctx, req.TaskToken, *req.Progress, jobq.SanitizeText(req.Message, jobq.MaxProgressMessageRunes), w.workerAllow(ctx))
	if err != nil {
		return apitype.RunAck{}, workerError(err)
	}
	return apitype.RunAck{Result: "ok", JobID: f.ID, Attempt: f.Attempt}, nil
}

// List returns the live workers (admins only: the transports refuse worker
// tokens on this route).
func (w *Workers) List(ctx context.Context) (apitype.WorkerList, error) {
	out := apitype.WorkerList{Workers: []apitype.Worker{}}
	if w.remote == nil {
		return out, nil
	}
	ws, err := w.remote.Workers(ctx)
	if err != nil {
		return out, err
	}
	for _, x := range ws {
		aw := apitype.Worker{WorkerID: x.WorkerID, Labels: x.Labels, Version: x.Version, JobTypes: x.Types, RunsInFlight: x.RunsInFlight}
		if !x.LastFetch.IsZero() {
			t := x.LastFetch.UTC()
			aw.LastFetch = &t
		}
		if !x.LastHeartbeat.IsZero() {
			t := x.LastHeartbeat.UTC()
			aw.LastHeartbeat = &t
		}
		out.Workers = append(out.Workers, aw)
	}
	return out, nil
}

// LogStore reads attempts' logs.
type LogStore interface {
	JobLogs(ctx context.Context, id uint64, attempt, afterSeq, limit int) ([]jobq.LogLine, int, error)
}

// Logs returns up to limit (1–1000, default 1000) lines of a job's attempt
// log after line after; attempt 0 means the latest attempt with a log.
// The query values are as the transport received them ("" for unset).
func (s *Service) Logs(ctx context.Context, id uint64, attempt, after, limit string) (apitype.LogPage, error) {
	page := apitype.LogPage{JobID: id, Lines: []apitype.LogLine{}}
	a, err := queryInt("attempt", attempt, 0, 0, math.MaxInt32)
	if err != nil {
		return page, err
	}
	af, err := queryInt("after", after, 0, 0, math.MaxInt32)
	if err != nil {
		return page, err
	}
	lim, err := queryInt("limit", limit, MaxLogPage, 1, MaxLogPage)
	if err != nil {
		return page, err
	}
	if _, err := s.Get(ctx, id); err != nil { // 404 for an unknown job, the worker token's read scope
		return page, err
	}
	if s.logs == nil {
		return page, nil
	}
	lines, got, err := retryV2(ctx, s.retry, "logs", func() ([]jobq.LogLine, int, error) { return s.logs.JobLogs(ctx, id, a, af, lim) })
	if err != nil {
		return page, err
	}
	page.Attempt, page.NextAfter = got, af
	for _, l := range lines {
		page.Lines = append(page.Lines, apitype.LogLine{Seq: l.Seq, Line: l.Line, Time: l.Time})
		page.NextAfter = l.Seq
	}
	return page, nil
}

func queryInt(field, v string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, invalid(field, "must be an integer in [%d, %d], got %q", lo, hi, v)
	}
	return n, nil
}

func parentsFrom(ps []jobq.ParentOutput) []apitype.ParentOutput {
	if len(ps) == 0 {
		return nil
	}
	out := make([]apitype.ParentOutput, len(ps))
	for i, p := range ps {
		out[i] = apitype.ParentOutput{JobID: p.JobID, JobKey: p.JobKey, Status: string(p.Status), Output: p.Output}
	}
	return out
}
