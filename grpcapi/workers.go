package grpcapi

import (
	"context"
	"encoding/json"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jobq/jobq/apitype"
	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
	"github.com/jobq/jobq/gen/jobq/v1/jobqv1connect"
	"github.com/jobq/jobq/service"
)

// WorkerServer implements jobqv1connect.WorkerServiceHandler on a
// service.Workers: the worker protocol of docs/workers.md. Refusals map as
// the proto's comment says: forbidden → PermissionDenied, stale →
// FailedPrecondition, conflict → Aborted, too large → ResourceExhausted.
type WorkerServer struct {
	s *Server
	w *service.Workers
}

var _ jobqv1connect.WorkerServiceHandler = (*WorkerServer)(nil)

func (ws *WorkerServer) fail(err error) error {
	var fb *service.Forbidden
	var cf *service.Conflict
	var tl *service.TooLarge
	switch {
	case errors.As(err, &fb):
		return connect.NewError(connect.CodePermissionDenied, errors.New(fb.Error()))
	case errors.As(err, &cf) && cf.Code == "conflict":
		return connect.NewError(connect.CodeAborted, errors.New(cf.Error()))
	case errors.As(err, &cf):
		return connect.NewError(connect.CodeFailedPrecondition, errors.New(cf.Error()))
	case errors.As(err, &tl):
		return connect.NewError(connect.CodeResourceExhausted, errors.New(tl.Error()))
	}
	return ws.s.fail(err)
}

// Fetch claims due jobs for the worker (service.Workers.Fetch). Jobs whose
// answer could not be sent are released.
func (ws *WorkerServer) Fetch(ctx context.Context, req *connect.Request[jobqv1.FetchRequest]) (*connect.Response[jobqv1.FetchResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, ws.fail(err)
	}
	m := req.Msg
	r := apitype.FetchRequest{WorkerID: m.GetWorkerId(), Labels: m.GetLabels(), Version: m.GetVersion(), JobTypes: m.GetJobTypes(), MaxJobs: int(m.GetMaxJobs())}
	if m.WaitMs != nil {
		w := int(m.GetWaitMs())
		r.WaitMs = &w
	}
	resp, release, err := ws.w.Fetch(ctx, r)
	if err != nil {
		return nil, ws.fail(err)
	}
	if ctx.Err() != nil {
		release()
		return nil, ws.fail(ctx.Err())
	}
	out := &jobqv1.FetchResponse{Jobs: make([]*jobqv1.FetchedJob, len(resp.Jobs))}
	for i, j := range resp.Jobs {
		out.Jobs[i] = &jobqv1.FetchedJob{Id: j.ID, JobKey: j.JobKey, JobType: j.JobType, Params: string(j.Params), Attempt: int32(j.Attempt),
			Priority: int32(j.Priority), RetryTimes: int32(j.RetryTimes), MaxRetry: int32(j.MaxRetry), TimeoutMs: int32(j.TimeoutMs),
			RunAt: timestamppb.New(j.RunAt), LeaseUntil: timestamppb.New(j.LeaseUntil), LeaseMs: j.LeaseMs, HeartbeatMs: j.HeartbeatMs,
			TaskToken: j.TaskToken}
	}
	return connect.NewResponse(out), nil
}

// Heartbeat renews leases (service.Workers.Heartbeat).
func (ws *WorkerServer) Heartbeat(ctx context.Context, req *connect.Request[jobqv1.HeartbeatRequest]) (*connect.Response[jobqv1.HeartbeatResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, ws.fail(err)
	}
	resp, err := ws.w.Heartbeat(ctx, apitype.HeartbeatRequest{WorkerID: req.Msg.GetWorkerId(), TaskTokens: req.Msg.GetTaskTokens()})
	if err != nil {
		return nil, ws.fail(err)
	}
	out := &jobqv1.HeartbeatResponse{Results: make([]*jobqv1.HeartbeatResult, len(resp.Results))}
	for i, r := range resp.Results {
		out.Results[i] = &jobqv1.HeartbeatResult{JobId: r.JobID, Attempt: int32(r.Attempt), State: r.State, LeaseUntil: tsPtr(r.LeaseUntil)}
	}
	return connect.NewResponse(out), nil
}

// Complete writes a run's outcome (service.Workers.Complete).
func (ws *WorkerServer) Complete(ctx context.Context, req *connect.Request[jobqv1.CompleteRequest]) (*connect.Response[jobqv1.CompleteResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, ws.fail(err)
	}
	resp, err := ws.w.Complete(ctx, completeFromProto(req.Msg))
	if err != nil {
		return nil, ws.fail(err)
	}
	return connect.NewResponse(&jobqv1.CompleteResponse{Result: resp.Result, JobId: resp.JobID, Attempt: int32(resp.Attempt), Status: resp.Status}), nil
}

// CompleteBatch writes many runs' outcomes, each answered at its index
// (service.Workers.CompleteMany). A completion carrying fields this
// replica does not know is an invalid item naming "body".
func (ws *WorkerServer) CompleteBatch(ctx context.Context, req *connect.Request[jobqv1.CompleteBatchRequest]) (*connect.Response[jobqv1.CompleteBatchResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, ws.fail(err)
	}
	items := make([]service.CompleteItem, len(req.Msg.GetCompletions()))
	for i, m := range req.Msg.GetCompletions() {
		if err := rejectUnknownFields(m); err != nil {
			items[i].Err = err
			continue
		}
		items[i].Req = completeFromProto(m)
	}
	resp, err := ws.w.CompleteMany(ctx, items)
	if err != nil {
		return nil, ws.fail(err)
	}
	out := &jobqv1.CompleteBatchResponse{Results: make([]*jobqv1.CompleteBatchResult, len(resp.Results)),
		Applied: int32(resp.Applied), Stale: int32(resp.Stale), Conflict: int32(resp.Conflict),
		Forbidden: int32(resp.Forbidden), Invalid: int32(resp.Invalid)}
	for i, r := range resp.Results {
		m := &jobqv1.CompleteBatchResult{Result: r.Result, JobId: r.JobID, Attempt: int32(r.Attempt), Status: r.Status}
		if r.Error != nil {
			m.Code, m.Field, m.Message = r.Error.Code, r.Error.Field, r.Error.Message
		}
		out.Results[i] = m
	}
	return connect.NewResponse(out), nil
}

// completeFromProto is the completion body m carries.
func completeFromProto(m *jobqv1.CompleteRequest) apitype.CompleteRequest {
	r := apitype.CompleteRequest{TaskToken: m.GetTaskToken(), Outcome: m.GetOutcome(), Error: m.GetError()}
	if m.GetOutput() != "" {
		r.Output = json.RawMessage(m.GetOutput())
	}
	if m.Retry != nil {
		b := m.GetRetry()
		r.Retry = &b
	}
	return r
}

// AppendLog appends log lines (service.Workers.AppendLog).
func (ws *WorkerServer) AppendLog(ctx context.Context, req *connect.Request[jobqv1.AppendLogRequest]) (*connect.Response[jobqv1.AppendLogResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, ws.fail(err)
	}
	ack, err := ws.w.AppendLog(ctx, apitype.LogRequest{TaskToken: req.Msg.GetTaskToken(), Lines: req.Msg.GetLines()})
	if err != nil {
		return nil, ws.fail(err)
	}
	return connect.NewResponse(&jobqv1.AppendLogResponse{JobId: ack.JobID, Attempt: int32(ack.Attempt)}), nil
}

// ReportProgress records progress (service.Workers.ReportProgress).
func (ws *WorkerServer) ReportProgress(ctx context.Context, req *connect.Request[jobqv1.ReportProgressRequest]) (*connect.Response[jobqv1.ReportProgressResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, ws.fail(err)
	}
	r := apitype.ProgressRequest{TaskToken: req.Msg.GetTaskToken(), Message: req.Msg.GetMessage()}
	if req.Msg.Progress != nil {
		p := req.Msg.GetProgress()
		r.Progress = &p
	}
	ack, err := ws.w.ReportProgress(ctx, r)
	if err != nil {
		return nil, ws.fail(err)
	}
	return connect.NewResponse(&jobqv1.ReportProgressResponse{JobId: ack.JobID, Attempt: int32(ack.Attempt)}), nil
}
