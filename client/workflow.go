package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/jobq/jobq/apitype"
)

// SubmitWorkflow creates a workflow (POST /v1/workflows): all its jobs and
// dependencies or nothing. created is false when workflow_key already
// named the same request.
func (c *Client) SubmitWorkflow(ctx context.Context, req apitype.WorkflowSubmitRequest) (wf apitype.Workflow, created bool, err error) {
	status, err := c.do(ctx, http.MethodPost, "/v1/workflows", req, &wf)
	return wf, status == http.StatusCreated, err
}

// SubmitWorkflowRaw is SubmitWorkflow with the body as is (a file's
// content), so the server's validation judges exactly what was written.
func (c *Client) SubmitWorkflowRaw(ctx context.Context, body json.RawMessage) (wf apitype.Workflow, created bool, err error) {
	status, err := c.do(ctx, http.MethodPost, "/v1/workflows", body, &wf)
	return wf, status == http.StatusCreated, err
}

// GetWorkflow returns a workflow with its jobs and edges.
func (c *Client) GetWorkflow(ctx context.Context, key string) (wf apitype.Workflow, err error) {
	_, err = c.do(ctx, http.MethodGet, "/v1/workflows/"+url.PathEscape(key), nil, &wf)
	return wf, err
}

// ListWorkflows returns a page of workflows, newest first (limit 0: the
// server's default).
func (c *Client) ListWorkflows(ctx context.Context, limit int, cursor string) (page apitype.WorkflowPage, err error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/v1/workflows"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	_, err = c.do(ctx, http.MethodGet, path, nil, &page)
	return page, err
}

// CancelWorkflow cancels every unfinished job of a workflow.
func (c *Client) CancelWorkflow(ctx context.Context, key string) (wf apitype.Workflow, err error) {
	_, err = c.do(ctx, http.MethodPost, "/v1/workflows/"+url.PathEscape(key)+"/cancel", nil, &wf)
	return wf, err
}

// RetryWorkflow re-runs a workflow's FAILED and CANCELED jobs, re-arming
// their descendants.
func (c *Client) RetryWorkflow(ctx context.Context, key string) (res apitype.WorkflowRetryResult, err error) {
	_, err = c.do(ctx, http.MethodPost, "/v1/workflows/"+url.PathEscape(key)+"/retry", nil, &res)
	return res, err
}
