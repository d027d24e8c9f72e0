package client

import (
	"context"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/jobq/jobq/apitype"
	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
	"github.com/jobq/jobq/gen/jobq/v1/jobqv1connect"
)

// GRPCClient talks to one replica's JobService and OpsService (api/jobq/v1)
// over the gRPC protocol: HTTP/2 without TLS (h2c, prior knowledge) for
// http:// base URLs, HTTP/2 over TLS for https://. Its methods match
// Client's; errors are *connect.Error (use connect.CodeOf: InvalidArgument,
// NotFound, AlreadyExists, FailedPrecondition, Unavailable, …).
type GRPCClient struct {
	// Timeout bounds each unary call. Defaults to 30s in NewGRPC; WatchJob
	// is bounded by its ctx only.
	Timeout time.Duration
	// Token, if set, is sent as "Authorization: Bearer <token>".
	Token string
	rpc   jobqv1connect.JobServiceClient
	ops   jobqv1connect.OpsServiceClient
	tr    *http.Transport
}

// NewGRPC returns a gRPC client for baseURL (e.g. http://127.0.0.1:8080, the
// same address as the HTTP API).
func NewGRPC(baseURL string) *GRPCClient {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	p.SetHTTP2(true)
	c := &GRPCClient{Timeout: 30 * time.Second, tr: &http.Transport{Protocols: p, ForceAttemptHTTP2: true}}
	auth := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			c.setToken(req.Header())
			return next(ctx, req)
		}
	})
	c.rpc = jobqv1connect.NewJobServiceClient(&http.Client{Transport: c.tr}, strings.TrimRight(baseURL, "/"),
		connect.WithGRPC(), connect.WithInterceptors(auth))
	c.ops = jobqv1connect.NewOpsServiceClient(&http.Client{Transport: c.tr}, strings.TrimRight(baseURL, "/"),
		connect.WithGRPC(), connect.WithInterceptors(auth))
	return c
}

func (c *GRPCClient) setToken(h http.Header) {
	if c.Token != "" {
		h.Set("Authorization", "Bearer "+c.Token)
	}
}

// Close closes idle connections.
func (c *GRPCClient) Close() { c.tr.CloseIdleConnections() }

func (c *GRPCClient) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.Timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.Timeout)
}

// Submit creates a job; created is false when job_key already named the
// same request. Integer fields beyond int32 are clamped (and then refused
// by the server as out of range).
func (c *GRPCClient) Submit(ctx context.Context, req apitype.SubmitRequest) (apitype.Job, bool, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.rpc.SubmitJob(ctx, connect.NewRequest(submitRequestToProto(req)))
	if err != nil {
		return apitype.Job{}, false, err
	}
	return jobFromProto(res.Msg.GetJob()), res.Msg.GetCreated(), nil
}

// SubmitBatch submits 1–1,000 jobs with one SubmitJobs call (one
// multi-row insert on the server); see Client.SubmitBatch.
func (c *GRPCClient) SubmitBatch(ctx context.Context, jobs []apitype.SubmitRequest) (apitype.SubmitBatchResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	m := &jobqv1.SubmitJobsRequest{Jobs: make([]*jobqv1.SubmitJobRequest, len(jobs))}
	for i, j := range jobs {
		m.Jobs[i] = submitRequestToProto(j)
	}
	res, err := c.rpc.SubmitJobs(ctx, connect.NewRequest(m))
	if err != nil {
		return apitype.SubmitBatchResponse{}, err
	}
	out := apitype.SubmitBatchResponse{Results: make([]apitype.SubmitBatchResult, len(res.Msg.GetResults()))}
	for i, r := range res.Msg.GetResults() {
		x := apitype.SubmitBatchResult{Status: r.GetStatus(), ID: r.GetId()}
		if r.GetField() != "" || r.GetMessage() != "" {
			code := "invalid_argument"
			if x.Status == apitype.BatchConflict {
				code = "conflict"
			}
			x.Error = &apitype.ErrorDetail{Code: code, Field: r.GetField(), Message: r.GetMessage()}
		}
		out.Results[i] = x
	}
	out.Count()
	return out, nil
}

// Get returns one job.
func (c *GRPCClient) Get(ctx context.Context, id uint64) (apitype.Job, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.rpc.GetJob(ctx, connect.NewRequest(&jobqv1.GetJobRequest{Id: id}))
	if err != nil {
		return apitype.Job{}, err
	}
	return jobFromProto(res.Msg.GetJob()), nil
}

// List returns one page of jobs; limit 0 means the server's default (50).
func (c *GRPCClient) List(ctx context.Context, status, jobType string, limit int, cursor string) (apitype.ListPage, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	req := &jobqv1.ListJobsRequest{Status: status, JobType: jobType, Cursor: cursor}
	if limit != 0 {
		n := int32(min(max(limit, -1<<31), 1<<31-1))
		req.Limit = &n
	}
	res, err := c.rpc.ListJobs(ctx, connect.NewRequest(req))
	if err != nil {
		return apitype.ListPage{}, err
	}
	page := apitype.ListPage{Jobs: make([]apitype.Job, 0, len(res.Msg.GetJobs())), NextCursor: res.Msg.GetNextCursor()}
	for _, j := range res.Msg.GetJobs() {
		page.Jobs = append(page.Jobs, jobFromProto(j))
	}
	return page, nil
}

// Cancel cancels a job.
func (c *GRPCClient) Cancel(ctx context.Context, id uint64) (apitype.Job, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.rpc.CancelJob(ctx, connect.NewRequest(&jobqv1.CancelJobRequest{Id: id}))
	if err != nil {
		return apitype.Job{}, err
	}
	return jobFromProto(res.Msg.GetJob()), nil
}

// Retry re-queues a FAILED or CANCELED job.
func (c *GRPCClient) Retry(ctx context.Context, id uint64) (apitype.Job, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.rpc.RetryJob(ctx, connect.NewRequest(&jobqv1.RetryJobRequest{Id: id}))
	if err != nil {
		return apitype.Job{}, err
	}
	return jobFromProto(res.Msg.GetJob()), nil
}

// Executions lists a job's attempts, oldest first.
func (c *GRPCClient) Executions(ctx context.Context, id uint64) ([]apitype.Execution, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.rpc.ListExecutions(ctx, connect.NewRequest(&jobqv1.ListExecutionsRequest{Id: id}))
	if err != nil {
		return nil, err
	}
	out := make([]apitype.Execution, 0, len(res.Msg.GetExecutions()))
	for _, e := range res.Msg.GetExecutions() {
		out = append(out, executionFromProto(e))
	}
	return out, nil
}

// Watch calls fn with the job now and after each state change until the job
// is terminal (nil error), ctx ends, fn returns an error, or the server
// ends the stream (e.g. Unavailable when it shuts down).
func (c *GRPCClient) Watch(ctx context.Context, id uint64, fn func(apitype.Job) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := connect.NewRequest(&jobqv1.WatchJobRequest{Id: id})
	c.setToken(req.Header())
	st, err := c.rpc.WatchJob(ctx, req)
	if err != nil {
		return err
	}
	defer st.Close()
	for st.Receive() {
		if err := fn(jobFromProto(st.Msg().GetJob())); err != nil {
			return err
		}
	}
	return st.Err()
}
