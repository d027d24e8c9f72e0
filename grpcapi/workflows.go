package grpcapi

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
	"github.com/jobq/jobq/gen/jobq/v1/jobqv1connect"
	"github.com/jobq/jobq/service"
)

// WorkflowServer implements jobqv1connect.WorkflowServiceHandler
// (api/jobq/v1/workflows.proto) on the service's workflow calls, with the
// validation and error mapping of the HTTP API.
type WorkflowServer struct{ s *Server }

var _ jobqv1connect.WorkflowServiceHandler = (*WorkflowServer)(nil)

// WorkflowRequestFromProto converts a SubmitWorkflowRequest to the HTTP
// API's body.
func WorkflowRequestFromProto(m *jobqv1.SubmitWorkflowRequest) apitype.WorkflowSubmitRequest {
	req := apitype.WorkflowSubmitRequest{WorkflowKey: m.GetWorkflowKey(), Jobs: make([]apitype.WorkflowJob, len(m.GetJobs()))}
	for i, j := range m.GetJobs() {
		wj := apitype.WorkflowJob{SubmitRequest: SubmitRequestFromProto(j.GetJob())}
		if j.GetJob() == nil {
			wj.SubmitRequest = apitype.SubmitRequest{}
		}
		for _, d := range j.GetDependsOn() {
			wj.DependsOn = append(wj.DependsOn, apitype.DependencyRef{JobKey: d.GetJobKey(), OnParentFailure: d.GetOnParentFailure()})
		}
		req.Jobs[i] = wj
	}
	return req
}

// WorkflowToProto converts a workflow to its message.
func WorkflowToProto(w jobq.Workflow) *jobqv1.Workflow {
	a := apitype.WorkflowFrom(w)
	out := &jobqv1.Workflow{Id: a.ID, WorkflowKey: a.WorkflowKey, Status: a.Status, CreateTime: timestamppb.New(a.CreateTime)}
	if a.StartedAt != nil {
		out.StartedAt = timestamppb.New(*a.StartedAt)
	}
	if a.FinishedAt != nil {
		out.FinishedAt = timestamppb.New(*a.FinishedAt)
	}
	for _, j := range w.Jobs {
		out.Jobs = append(out.Jobs, JobToProto(j))
	}
	for _, e := range a.Edges {
		out.Edges = append(out.Edges, &jobqv1.WorkflowEdge{Parent: e.Parent, Child: e.Child, OnParentFailure: e.OnParentFailure})
	}
	return out
}

func (ws *WorkflowServer) failKey(key string, err error) error {
	switch {
	case errors.Is(err, service.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("workflow %s not found", key))
	case errors.Is(err, service.ErrInvalidState):
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("workflow %s has no FAILED or CANCELED job to retry", key))
	}
	return ws.s.fail(err)
}

// SubmitWorkflow creates a workflow.
func (ws *WorkflowServer) SubmitWorkflow(ctx context.Context, req *connect.Request[jobqv1.SubmitWorkflowRequest]) (*connect.Response[jobqv1.SubmitWorkflowResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, ws.s.fail(err)
	}
	for i, j := range req.Msg.GetJobs() {
		if j.GetJob() == nil {
			return nil, ws.s.fail(&service.ValidationError{Field: fmt.Sprintf("jobs[%d].job", i), Rule: "is required"})
		}
	}
	wf, created, err := ws.s.svc.SubmitWorkflow(ctx, WorkflowRequestFromProto(req.Msg))
	var taken *jobq.WorkflowKeyTakenError
	switch {
	case errors.As(err, &taken):
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("job_key: %s; nothing of the workflow was written", taken.Error()))
	case errors.Is(err, service.ErrKeyConflict):
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("workflow_key: already used by workflow %d with a different request", wf.ID))
	case err != nil:
		return nil, ws.s.fail(err)
	}
	return connect.NewResponse(&jobqv1.SubmitWorkflowResponse{Workflow: WorkflowToProto(wf), Created: created}), nil
}

// GetWorkflow returns a workflow.
func (ws *WorkflowServer) GetWorkflow(ctx context.Context, req *connect.Request[jobqv1.GetWorkflowRequest]) (*connect.Response[jobqv1.GetWorkflowResponse], error) {
	wf, err := ws.s.svc.GetWorkflow(ctx, req.Msg.GetWorkflowKey())
	if err != nil {
		return nil, ws.failKey(req.Msg.GetWorkflowKey(), err)
	}
	return connect.NewResponse(&jobqv1.GetWorkflowResponse{Workflow: WorkflowToProto(wf)}), nil
}

// ListWorkflows returns a page of workflows.
func (ws *WorkflowServer) ListWorkflows(ctx context.Context, req *connect.Request[jobqv1.ListWorkflowsRequest]) (*connect.Response[jobqv1.ListWorkflowsResponse], error) {
	limit := ""
	if req.Msg.GetLimit() != 0 {
		limit = fmt.Sprint(req.Msg.GetLimit())
	}
	list, next, err := ws.s.svc.ListWorkflows(ctx, limit, req.Msg.GetCursor())
	if err != nil {
		return nil, ws.s.fail(err)
	}
	out := &jobqv1.ListWorkflowsResponse{NextCursor: next}
	for _, s := range list {
		a := apitype.WorkflowSummaryFrom(s)
		out.Workflows = append(out.Workflows, &jobqv1.WorkflowSummary{Id: a.ID, WorkflowKey: a.WorkflowKey, Status: a.Status,
			Jobs: int32(a.Jobs), Succeeded: int32(a.Succeeded), Failed: int32(a.Failed), Canceled: int32(a.Canceled),
			Running: int32(a.Running), CreateTime: timestamppb.New(a.CreateTime)})
	}
	return connect.NewResponse(out), nil
}

// CancelWorkflow cancels a workflow's unfinished jobs.
func (ws *WorkflowServer) CancelWorkflow(ctx context.Context, req *connect.Request[jobqv1.CancelWorkflowRequest]) (*connect.Response[jobqv1.CancelWorkflowResponse], error) {
	wf, err := ws.s.svc.CancelWorkflow(ctx, req.Msg.GetWorkflowKey())
	if err != nil {
		return nil, ws.failKey(req.Msg.GetWorkflowKey(), err)
	}
	return connect.NewResponse(&jobqv1.CancelWorkflowResponse{Workflow: WorkflowToProto(wf)}), nil
}

// RetryWorkflow re-runs a workflow's FAILED and CANCELED jobs.
func (ws *WorkflowServer) RetryWorkflow(ctx context.Context, req *connect.Request[jobqv1.RetryWorkflowRequest]) (*connect.Response[jobqv1.RetryWorkflowResponse], error) {
	wf, n, err := ws.s.svc.RetryWorkflow(ctx, req.Msg.GetWorkflowKey())
	if err != nil {
		return nil, ws.failKey(req.Msg.GetWorkflowKey(), err)
	}
	return connect.NewResponse(&jobqv1.RetryWorkflowResponse{Workflow: WorkflowToProto(wf), Rearmed: int32(n)}), nil
}
