package grpcapi

import (
	"context"
	"encoding/json"
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

// OpsServer implements jobqv1connect.OpsServiceHandler (api/jobq/v1/ops.proto)
// on a service.Ops: the HTTP API's operations routes over gRPC, gRPC-Web and
// Connect, with the same validation and the error mapping of Server.
type OpsServer struct {
	s   *Server
	ops *service.Ops
}

var _ jobqv1connect.OpsServiceHandler = (*OpsServer)(nil)

// PauseType pauses a job type.
func (o *OpsServer) PauseType(ctx context.Context, req *connect.Request[jobqv1.PauseTypeRequest]) (*connect.Response[jobqv1.PauseTypeResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	tc, err := o.ops.SetPaused(ctx, req.Msg.GetJobType(), true)
	if err != nil {
		return nil, o.s.fail(err)
	}
	return connect.NewResponse(&jobqv1.PauseTypeResponse{Type: TypeControlToProto(tc)}), nil
}

// ResumeType resumes a job type.
func (o *OpsServer) ResumeType(ctx context.Context, req *connect.Request[jobqv1.ResumeTypeRequest]) (*connect.Response[jobqv1.ResumeTypeResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	tc, err := o.ops.SetPaused(ctx, req.Msg.GetJobType(), false)
	if err != nil {
		return nil, o.s.fail(err)
	}
	return connect.NewResponse(&jobqv1.ResumeTypeResponse{Type: TypeControlToProto(tc)}), nil
}

// SetTypeLimit sets a job type's cluster-wide limit of RUNNING jobs.
func (o *OpsServer) SetTypeLimit(ctx context.Context, req *connect.Request[jobqv1.SetTypeLimitRequest]) (*connect.Response[jobqv1.SetTypeLimitResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	var lr apitype.LimitRequest
	if req.Msg.MaxRunning != nil {
		n := int(req.Msg.GetMaxRunning())
		lr.MaxRunning = &n
	}
	tc, err := o.ops.SetLimit(ctx, req.Msg.GetJobType(), lr)
	if err != nil {
		return nil, o.s.fail(err)
	}
	return connect.NewResponse(&jobqv1.SetTypeLimitResponse{Type: TypeControlToProto(tc)}), nil
}

// SetTypeRateLimit sets a job type's cluster-wide rate limit.
func (o *OpsServer) SetTypeRateLimit(ctx context.Context, req *connect.Request[jobqv1.SetTypeRateLimitRequest]) (*connect.Response[jobqv1.SetTypeRateLimitResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	rr := apitype.RateLimitRequest{Period: req.Msg.GetPeriod(), PerKey: req.Msg.GetPerKey()}
	if req.Msg.Starts != nil {
		n := int(req.Msg.GetStarts())
		rr.Starts = &n
	}
	tc, err := o.ops.SetRateLimit(ctx, req.Msg.GetJobType(), rr)
	if err != nil {
		return nil, o.s.fail(err)
	}
	return connect.NewResponse(&jobqv1.SetTypeRateLimitResponse{Type: TypeControlToProto(tc)}), nil
}

// ClearTypeRateLimit removes a job type's rate limit.
func (o *OpsServer) ClearTypeRateLimit(ctx context.Context, req *connect.Request[jobqv1.ClearTypeRateLimitRequest]) (*connect.Response[jobqv1.ClearTypeRateLimitResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	tc, err := o.ops.ClearRateLimit(ctx, req.Msg.GetJobType())
	if err != nil {
		return nil, o.s.fail(err)
	}
	return connect.NewResponse(&jobqv1.ClearTypeRateLimitResponse{Type: TypeControlToProto(tc)}), nil
}

// ListTypes lists every job type ever paused or limited.
func (o *OpsServer) ListTypes(ctx context.Context, req *connect.Request[jobqv1.ListTypesRequest]) (*connect.Response[jobqv1.ListTypesResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	ts, err := o.ops.Types(ctx)
	if err != nil {
		return nil, o.s.fail(err)
	}
	out := &jobqv1.ListTypesResponse{Types: make([]*jobqv1.TypeControl, 0, len(ts))}
	for _, t := range ts {
		out.Types = append(out.Types, TypeControlToProto(t))
	}
	return connect.NewResponse(out), nil
}

// PutPeriodic creates or replaces a schedule.
func (o *OpsServer) PutPeriodic(ctx context.Context, req *connect.Request[jobqv1.PutPeriodicRequest]) (*connect.Response[jobqv1.PutPeriodicResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	p, created, err := o.ops.PutPeriodic(ctx, PeriodicRequestFromProto(req.Msg), jobq.PeriodicSourceAPI)
	if err != nil {
		return nil, o.s.fail(err)
	}
	return connect.NewResponse(&jobqv1.PutPeriodicResponse{Periodic: PeriodicToProto(p), Created: created}), nil
}

// GetPeriodic returns one schedule.
func (o *OpsServer) GetPeriodic(ctx context.Context, req *connect.Request[jobqv1.GetPeriodicRequest]) (*connect.Response[jobqv1.GetPeriodicResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	p, err := o.ops.GetPeriodic(ctx, req.Msg.GetName())
	if err != nil {
		return nil, o.failPeriodic(req.Msg.GetName(), err)
	}
	return connect.NewResponse(&jobqv1.GetPeriodicResponse{Periodic: PeriodicToProto(p)}), nil
}

// ListPeriodic lists every schedule.
func (o *OpsServer) ListPeriodic(ctx context.Context, req *connect.Request[jobqv1.ListPeriodicRequest]) (*connect.Response[jobqv1.ListPeriodicResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	ps, err := o.ops.ListPeriodic(ctx)
	if err != nil {
		return nil, o.s.fail(err)
	}
	out := &jobqv1.ListPeriodicResponse{Periodic: make([]*jobqv1.Periodic, 0, len(ps))}
	for _, p := range ps {
		out.Periodic = append(out.Periodic, PeriodicToProto(p))
	}
	return connect.NewResponse(out), nil
}

// DeletePeriodic removes a schedule.
func (o *OpsServer) DeletePeriodic(ctx context.Context, req *connect.Request[jobqv1.DeletePeriodicRequest]) (*connect.Response[jobqv1.DeletePeriodicResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	if err := o.ops.DeletePeriodic(ctx, req.Msg.GetName()); err != nil {
		return nil, o.failPeriodic(req.Msg.GetName(), err)
	}
	return connect.NewResponse(&jobqv1.DeletePeriodicResponse{Deleted: req.Msg.GetName()}), nil
}

// RetryJobs re-queues FAILED or CANCELED jobs in bulk.
func (o *OpsServer) RetryJobs(ctx context.Context, req *connect.Request[jobqv1.RetryJobsRequest]) (*connect.Response[jobqv1.RetryJobsResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	res, err := o.ops.RetryBulk(ctx, apitype.RetryBulkRequest{Status: req.Msg.GetStatus(), JobType: req.Msg.GetJobType()})
	if err != nil {
		return nil, o.s.fail(err)
	}
	return connect.NewResponse(&jobqv1.RetryJobsResponse{Retried: res.Retried}), nil
}

// PurgeJobs deletes old terminal jobs with their executions.
func (o *OpsServer) PurgeJobs(ctx context.Context, req *connect.Request[jobqv1.PurgeJobsRequest]) (*connect.Response[jobqv1.PurgeJobsResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	res, err := o.ops.Purge(ctx, apitype.PurgeRequest{OlderThan: req.Msg.GetOlderThan()})
	if err != nil {
		return nil, o.s.fail(err)
	}
	return connect.NewResponse(PurgeResultToProto(res)), nil
}

// GetStats returns the queue snapshot.
func (o *OpsServer) GetStats(ctx context.Context, req *connect.Request[jobqv1.GetStatsRequest]) (*connect.Response[jobqv1.GetStatsResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, o.s.fail(err)
	}
	st, err := o.ops.Stats(ctx, req.Msg.GetWindow())
	if err != nil {
		return nil, o.s.fail(err)
	}
	return connect.NewResponse(StatsToProto(st)), nil
}

// failPeriodic is fail with the schedule's name in NotFound.
func (o *OpsServer) failPeriodic(name string, err error) error {
	if errors.Is(err, jobq.ErrNotFound) {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("periodic schedule %q not found", name))
	}
	return o.s.fail(err)
}

// TypeControlToProto converts a jobq.TypeControl.
func TypeControlToProto(t jobq.TypeControl) *jobqv1.TypeControl {
	m := &jobqv1.TypeControl{JobType: t.JobType, Paused: t.Paused, MaxRunning: int32(t.MaxRunning), UpdateTime: timestamppb.New(t.UpdateTime)}
	if t.RateStarts > 0 {
		m.RateStarts, m.RatePeriod, m.RatePerKey = int32(t.RateStarts), t.RatePeriod.String(), t.RatePerKey
	}
	return m
}

// PeriodicRequestFromProto turns a PutPeriodicRequest into the service's
// PeriodicRequest without validating it; unset optional integers stay nil.
func PeriodicRequestFromProto(m *jobqv1.PutPeriodicRequest) apitype.PeriodicRequest {
	req := apitype.PeriodicRequest{Name: m.GetName(), Cron: m.GetCron(), JobType: m.GetJobType(), Misfire: m.GetMisfire(),
		Overlap: m.GetOverlap()}
	if m.GetParams() != "" {
		req.Params = json.RawMessage(m.GetParams())
	}
	req.Priority = intPtr(m.Priority)
	req.MaxRetry = intPtr(m.MaxRetry)
	req.TimeoutMs = intPtr(m.TimeoutMs)
	return req
}

func intPtr(v *int32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}

// PeriodicToProto converts a jobq.Periodic.
func PeriodicToProto(p jobq.Periodic) *jobqv1.Periodic {
	return &jobqv1.Periodic{Name: p.Name, Cron: p.Cron, JobType: p.JobType, Params: string(p.Params),
		Priority: int32(p.Priority), MaxRetry: int32(p.MaxRetry), TimeoutMs: int32(p.TimeoutMs), Misfire: p.Misfire,
		Overlap: p.Overlap, ActiveJobId: p.ActiveJobID, QueuedJobId: p.QueuedJobID, Source: p.Source, NextRunAt: timestamppb.New(p.NextRunAt), LastRunAt: tsPtr(p.LastRunAt),
		CreateTime: timestamppb.New(p.CreateTime), UpdateTime: timestamppb.New(p.UpdateTime)}
}

// PurgeResultToProto converts a jobq.PurgeResult.
func PurgeResultToProto(r jobq.PurgeResult) *jobqv1.PurgeJobsResponse {
	return &jobqv1.PurgeJobsResponse{Jobs: r.Jobs, Executions: r.Executions, Batches: int32(r.Batches), Cutoff: timestamppb.New(r.Cutoff)}
}

// StatsToProto converts a jobq.QueueStats.
func StatsToProto(st jobq.QueueStats) *jobqv1.GetStatsResponse {
	out := &jobqv1.GetStatsResponse{DbNow: timestamppb.New(st.DBNow), ByStatus: st.ByStatus, OldestWaitingSeconds: st.OldestWaitingSeconds,
		WindowSeconds: st.WindowSeconds, Created: st.Created, Finished: st.Finished,
		CreatedPerSecond: st.CreatedPerSecond, FinishedPerSecond: st.FinishedPerSecond}
	for _, c := range st.ByTypeStatus {
		out.ByTypeStatus = append(out.ByTypeStatus, &jobqv1.TypeStatusCount{JobType: c.JobType, Status: string(c.Status), Count: c.Count})
	}
	return out
}
