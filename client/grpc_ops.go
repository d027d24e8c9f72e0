package client

import (
	"context"

	"connectrpc.com/connect"

	"github.com/jobq/jobq"
	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
	"github.com/jobq/jobq/grpcapi"
	"github.com/jobq/jobq/service"
)

// SetPaused pauses (paused=true) or resumes a job type.
func (c *GRPCClient) SetPaused(ctx context.Context, jobType string, paused bool) (jobq.TypeControl, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	var tc *jobqv1.TypeControl
	if paused {
		res, err := c.ops.PauseType(ctx, connect.NewRequest(&jobqv1.PauseTypeRequest{JobType: jobType}))
		if err != nil {
			return jobq.TypeControl{}, err
		}
		tc = res.Msg.GetType()
	} else {
		res, err := c.ops.ResumeType(ctx, connect.NewRequest(&jobqv1.ResumeTypeRequest{JobType: jobType}))
		if err != nil {
			return jobq.TypeControl{}, err
		}
		tc = res.Msg.GetType()
	}
	return grpcapi.TypeControlFromProto(tc), nil
}

// SetLimit sets a job type's cluster-wide limit of RUNNING jobs (0 removes it).
func (c *GRPCClient) SetLimit(ctx context.Context, jobType string, maxRunning int) (jobq.TypeControl, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	n := int32(min(max(maxRunning, -1<<31), 1<<31-1))
	res, err := c.ops.SetTypeLimit(ctx, connect.NewRequest(&jobqv1.SetTypeLimitRequest{JobType: jobType, MaxRunning: &n}))
	if err != nil {
		return jobq.TypeControl{}, err
	}
	return grpcapi.TypeControlFromProto(res.Msg.GetType()), nil
}

// Types lists the job types' control rows.
func (c *GRPCClient) Types(ctx context.Context) ([]jobq.TypeControl, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.ops.ListTypes(ctx, connect.NewRequest(&jobqv1.ListTypesRequest{}))
	if err != nil {
		return nil, err
	}
	out := make([]jobq.TypeControl, 0, len(res.Msg.GetTypes()))
	for _, t := range res.Msg.GetTypes() {
		out = append(out, grpcapi.TypeControlFromProto(t))
	}
	return out, nil
}

// PutPeriodic creates or replaces a schedule; created is true for a new one.
func (c *GRPCClient) PutPeriodic(ctx context.Context, req service.PeriodicRequest) (jobq.Periodic, bool, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.ops.PutPeriodic(ctx, connect.NewRequest(grpcapi.PeriodicRequestToProto(req)))
	if err != nil {
		return jobq.Periodic{}, false, err
	}
	return grpcapi.PeriodicFromProto(res.Msg.GetPeriodic()), res.Msg.GetCreated(), nil
}

// ListPeriodic lists the schedules.
func (c *GRPCClient) ListPeriodic(ctx context.Context) ([]jobq.Periodic, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.ops.ListPeriodic(ctx, connect.NewRequest(&jobqv1.ListPeriodicRequest{}))
	if err != nil {
		return nil, err
	}
	out := make([]jobq.Periodic, 0, len(res.Msg.GetPeriodic()))
	for _, p := range res.Msg.GetPeriodic() {
		out = append(out, grpcapi.PeriodicFromProto(p))
	}
	return out, nil
}

// DeletePeriodic removes a schedule.
func (c *GRPCClient) DeletePeriodic(ctx context.Context, name string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.ops.DeletePeriodic(ctx, connect.NewRequest(&jobqv1.DeletePeriodicRequest{Name: name}))
	return err
}

// RetryBulk re-queues every FAILED or CANCELED job (of one type, if set).
func (c *GRPCClient) RetryBulk(ctx context.Context, req service.RetryBulkRequest) (service.RetryBulkResult, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.ops.RetryJobs(ctx, connect.NewRequest(&jobqv1.RetryJobsRequest{Status: req.Status, JobType: req.JobType}))
	if err != nil {
		return service.RetryBulkResult{}, err
	}
	return service.RetryBulkResult{Retried: res.Msg.GetRetried()}, nil
}

// Purge deletes terminal jobs finished more than olderThan ("7d", "36h") ago.
func (c *GRPCClient) Purge(ctx context.Context, olderThan string) (jobq.PurgeResult, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.ops.PurgeJobs(ctx, connect.NewRequest(&jobqv1.PurgeJobsRequest{OlderThan: olderThan}))
	if err != nil {
		return jobq.PurgeResult{}, err
	}
	return grpcapi.PurgeResultFromProto(res.Msg), nil
}

// Stats returns the queue snapshot; window "" means 1m.
func (c *GRPCClient) Stats(ctx context.Context, window string) (jobq.QueueStats, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.ops.GetStats(ctx, connect.NewRequest(&jobqv1.GetStatsRequest{Window: window}))
	if err != nil {
		return jobq.QueueStats{}, err
	}
	return grpcapi.StatsFromProto(res.Msg), nil
}
