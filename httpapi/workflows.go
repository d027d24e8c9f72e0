package httpapi

import (
	"errors"
	"github.com/jobq/jobq"
	"net/http"
	"net/url"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/service"
)

// routeWorkflows adds the workflow routes (docs/workflows.md).
func (a *api) routeWorkflows(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/workflows", a.workflowSubmit)
	mux.HandleFunc("GET /v1/workflows", a.workflowList)
	mux.HandleFunc("GET /v1/workflows/{key}", a.workflowGet)
	mux.HandleFunc("POST /v1/workflows/{key}/cancel", a.workflowCancel)
	mux.HandleFunc("POST /v1/workflows/{key}/retry", a.workflowRetry)
}

// workflowSubmit serves POST /v1/workflows: 201 with the workflow when it
// was created, 200 when workflow_key named the same request, 409 when it
// named another (or a job_key names another job), 400 naming the field or
// edge and the rule. The body limit is the batch submit's.
func (a *api) workflowSubmit(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readBody(w, r, a.opts.MaxBatchBodyBytes)
	if !ok {
		return
	}
	req, err := service.DecodeWorkflowSubmit(body)
	if err != nil {
		a.fail(w, err)
		return
	}
	wf, created, err := a.svc.SubmitWorkflow(r.Context(), req)
	var taken *jobq.WorkflowKeyTakenError
	switch {
	case errors.As(err, &taken):
		writeJSON(w, http.StatusConflict, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "conflict", Field: "jobs.job_key",
			Message: "job_key: " + taken.Error() + "; nothing of the workflow was written"}})
		return
	case errors.Is(err, service.ErrKeyConflict):
		writeJSON(w, http.StatusConflict, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "conflict", Field: "workflow_key",
			Message: "workflow_key: already used by workflow " + itoa(int64(wf.ID)) + " with a different request"}})
		return
	case err != nil:
		a.fail(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/workflows/"+url.PathEscape(wf.WorkflowKey))
	}
	writeJSON(w, status, apitype.WorkflowFrom(wf))
}

func (a *api) workflowList(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		a.fail(w, &service.ValidationError{Field: "query", Rule: "must be a valid URL query string: " + err.Error()})
		return
	}
	for k := range q {
		if k != "limit" && k != "cursor" {
			a.fail(w, &service.ValidationError{Field: k, Rule: "unknown query parameter (use limit, cursor)"})
			return
		}
	}
	ws, next, err := a.svc.ListWorkflows(r.Context(), q.Get("limit"), q.Get("cursor"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apitype.WorkflowPage{Workflows: each(ws, apitype.WorkflowSummaryFrom), NextCursor: next})
}

func (a *api) workflowNotFound(w http.ResponseWriter, key string) {
	writeJSON(w, http.StatusNotFound, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "not_found", Message: "workflow " + key + " not found"}})
}

func (a *api) workflowGet(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	wf, err := a.svc.GetWorkflow(r.Context(), key)
	if errors.Is(err, service.ErrNotFound) {
		a.workflowNotFound(w, key)
		return
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apitype.WorkflowFrom(wf))
}

func (a *api) workflowCancel(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	wf, err := a.svc.CancelWorkflow(r.Context(), key)
	if errors.Is(err, service.ErrNotFound) {
		a.workflowNotFound(w, key)
		return
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apitype.WorkflowFrom(wf))
}

// workflowRetry serves POST /v1/workflows/{key}/retry: 200 with the number
// of jobs re-armed, 409 when no job of the workflow is FAILED or CANCELED.
func (a *api) workflowRetry(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	wf, n, err := a.svc.RetryWorkflow(r.Context(), key)
	switch {
	case errors.Is(err, service.ErrNotFound):
		a.workflowNotFound(w, key)
		return
	case errors.Is(err, service.ErrInvalidState):
		writeJSON(w, http.StatusConflict, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "invalid_state",
			Message: "workflow " + key + " has no FAILED or CANCELED job to retry"}})
		return
	case err != nil:
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apitype.WorkflowRetryResult{Rearmed: n, Workflow: apitype.WorkflowFrom(wf)})
}
