// Package client is a small Go client for jobq's HTTP API, used by the CLI,
// the demo and the harnesses.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/apitype"
)

// Client talks to one replica's API.
type Client struct {
	BaseURL string // e.g. http://127.0.0.1:8080
	HTTP    *http.Client
	Token   string // optional bearer token
}

// New returns a client for baseURL with a 30s timeout.
func New(baseURL string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// APIError is a non-2xx answer.
type APIError struct {
	Status int
	Detail apitype.ErrorDetail
}

func (e *APIError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Detail.Code, e.Detail.Message)
}

func (c *Client) do(ctx context.Context, method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		var eb apitype.ErrorBody
		_ = json.Unmarshal(data, &eb)
		if eb.Error.Message == "" {
			eb.Error.Message = strings.TrimSpace(string(data))
		}
		return resp.StatusCode, &APIError{Status: resp.StatusCode, Detail: eb.Error}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// Submit creates a job; created is false when job_key already named the
// same request.
func (c *Client) Submit(ctx context.Context, req apitype.SubmitRequest) (job apitype.Job, created bool, err error) {
	status, err := c.do(ctx, http.MethodPost, "/v1/jobs", req, &job)
	return job, status == http.StatusCreated, err
}

// SubmitBatch submits 1–apitype.MaxBatchJobs jobs in one request (POST
// /v1/jobs:batch): one multi-row insert on the server. The response has one
// result per job, in order (created, existing, conflict or invalid); an
// error means the request as a whole was refused or not answered — it is
// safe to send again, as re-submitting a created job answers existing.
func (c *Client) SubmitBatch(ctx context.Context, jobs []apitype.SubmitRequest) (resp apitype.SubmitBatchResponse, err error) {
	_, err = c.do(ctx, http.MethodPost, "/v1/jobs:batch", apitype.SubmitBatchRequest{Jobs: jobs}, &resp)
	return resp, err
}

// SubmitBatchRaw is SubmitBatch with each job given as the JSON text of a
// POST /v1/jobs body, sent as is, so the server's strict decoding judges it
// (an unknown or misspelt field is an invalid result naming it). Each item
// must be valid JSON.
func (c *Client) SubmitBatchRaw(ctx context.Context, jobs []json.RawMessage) (resp apitype.SubmitBatchResponse, err error) {
	_, err = c.do(ctx, http.MethodPost, "/v1/jobs:batch", struct {
		Jobs []json.RawMessage `json:"jobs"`
	}{jobs}, &resp)
	return resp, err
}

// Get returns one job.
func (c *Client) Get(ctx context.Context, id uint64) (job apitype.Job, err error) {
	_, err = c.do(ctx, http.MethodGet, "/v1/jobs/"+strconv.FormatUint(id, 10), nil, &job)
	return job, err
}

// List returns one page of jobs.
func (c *Client) List(ctx context.Context, status, jobType string, limit int, cursor string) (page apitype.ListPage, err error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if jobType != "" {
		q.Set("job_type", jobType)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/v1/jobs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	_, err = c.do(ctx, http.MethodGet, path, nil, &page)
	return page, err
}

// Cancel cancels a job.
func (c *Client) Cancel(ctx context.Context, id uint64) (job apitype.Job, err error) {
	_, err = c.do(ctx, http.MethodPost, "/v1/jobs/"+strconv.FormatUint(id, 10)+"/cancel", nil, &job)
	return job, err
}

// Retry re-queues a FAILED or CANCELED job.
func (c *Client) Retry(ctx context.Context, id uint64) (job apitype.Job, err error) {
	_, err = c.do(ctx, http.MethodPost, "/v1/jobs/"+strconv.FormatUint(id, 10)+"/retry", nil, &job)
	return job, err
}

// Executions lists a job's attempts.
func (c *Client) Executions(ctx context.Context, id uint64) ([]apitype.Execution, error) {
	var out struct {
		Executions []apitype.Execution `json:"executions"`
	}
	_, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+strconv.FormatUint(id, 10)+"/executions", nil, &out)
	return out.Executions, err
}

// Ready reports whether /readyz answers 200.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/readyz", nil, nil)
	return err
}
