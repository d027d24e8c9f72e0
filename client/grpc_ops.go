package client

import (
	"context"
	"encoding/json"
	"time"

	"connectrpc.com/connect"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
)

// SetPaused pauses (paused=true) or resumes a job type.
func (c *GRPCClient) SetPaused(ctx context.Context, jobType string, paused bool) (apitype.TypeControl, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	var tc *jobqv1.TypeControl
	if paused {
		res, err := c.ops.PauseType(ctx, connect.NewRequest(&jobqv1.PauseTypeRequest{JobType: jobType}))
		if err != nil {
			return apitype.TypeControl{}, err
		}
		tc = res.Msg.GetType()
	} else {
		res, err := c.ops.ResumeType(ctx, connect.NewRequest(&jobqv1.ResumeTypeRequest{JobType: jobType}))
		if err != nil {
			return apitype.TypeControl{}, err
		}
		tc = res.Msg.GetType()
	}
	return typeControlFromProto(tc), nil
}

// SetLimit sets a job type's cluster-wide limit of RUNNING jobs (0 removes it).
func (c *GRPCClient) SetLimit(ctx context.Context, jobType string, maxRunning int) (apitype.TypeControl, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	n := int32(min(max(maxRunning, -1<<31), 1<<31-1))
	res, err := c.ops.SetTypeLimit(ctx, connect.NewRequest(&jobqv1.SetTypeLimitRequest{JobType: jobType, MaxRunning: &n}))
	if err != nil {
		return apitype.TypeControl{}, err
	}
	return typeControlFromProto(res.Msg.GetType()), nil
}

// SetRateLimit sets a job type's cluster-wide rate limit: at most starts
// starts in any window of period (a Go duration, "1s"), of the whole type
// or (perKey) of each rate key of the type.
func (c *GRPCClient) SetRateLimit(ctx context.Context, jobType string, starts int, period string, perKey bool) (apitype.TypeControl, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	n := int32(min(max(starts, -1<<31), 1<<31-1))
	res, err := c.ops.SetTypeRateLimit(ctx, connect.NewRequest(&jobqv1.SetTypeRateLimitRequest{JobType: jobType, Starts: &n, Period: period, PerKey: perKey}))
	if err != nil {
		return apitype.TypeControl{}, err
	}
	return typeControlFromProto(res.Msg.GetType()), nil
}

// ClearRateLimit removes a job type's rate limit.
func (c *GRPCClient) ClearRateLimit(ctx context.Context, jobType string) (apitype.TypeControl, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.ops.ClearTypeRateLimit(ctx, connect.NewRequest(&jobqv1.ClearTypeRateLimitRequest{JobType: jobType}))
	if err != nil {
		return apitype.TypeControl{}, err
	}
	return typeControlFromProto(res.Msg.GetType()), nil
}

// Types lists the job types' control rows.
func (c *GRPCClient) Types(ctx context.Context) ([]apitype.TypeControl, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.ops.ListTypes(ctx, connect.NewRequest(&jobqv1.ListTypesRequest{}))
	if err != nil {
		return nil, err
	}
	out := make([]apitype.TypeControl, 0, len(res.Msg.GetTypes()))
	for _, t := range res.Msg.GetTypes() {
		out = append(out, typeControlFromProto(t))
	}
	return out, nil
}

// PutPeriodic creates or replaces a schedule; created is true for a new one.
func (c *GRPCClient) PutPeriodic(ctx context.Context, req apitype.PeriodicRequest) (apitype.Periodic, bool, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.ops.PutPeriodic(ctx, connect.NewRequest(periodicRequestToProto(req)))
	if err != nil {
		return apitype.Periodic{}, false, err
	}
	return periodicFromProto(res.Msg.GetPeriodic()), res.Msg.GetCreated(), nil
}

// ListPeriodic lists the schedules.
func (c *GRPCClient) ListPeriodic(ctx context.Context) ([]apitype.Periodic, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.ops.ListPeriodic(ctx, connect.NewRequest(&jobqv1.ListPeriodicRequest{}))
	if err != nil {
		return nil, err
	}
	out := make([]apitype.Periodic, 0, len(res.Msg.GetPeriodic()))
	for _, p := range res.Msg.GetPeriodic() {
		out = append(out, periodicFromProto(p))
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
func (c *GRPCClient) RetryBulk(ctx context.Context, req apitype.RetryBulkRequest) (apitype.RetryBulkResult, error) {
	ctx, cancel := c.bulkCtx(ctx)
	defer cancel()
	res, err := c.ops.RetryJobs(ctx, connect.NewRequest(&jobqv1.RetryJobsRequest{Status: req.Status, JobType: req.JobType}))
	if err != nil {
		return apitype.RetryBulkResult{}, err
	}
	return apitype.RetryBulkResult{Retried: res.Msg.GetRetried()}, nil
}

// Purge deletes terminal jobs finished more than olderThan ("7d", "36h") ago.
func (c *GRPCClient) Purge(ctx context.Context, olderThan string) (apitype.PurgeResult, error) {
	ctx, cancel := c.bulkCtx(ctx)
	defer cancel()
	res, err := c.ops.PurgeJobs(ctx, connect.NewRequest(&jobqv1.PurgeJobsRequest{OlderThan: olderThan}))
	if err != nil {
		return apitype.PurgeResult{}, err
	}
	return purgeResultFromProto(res.Msg), nil
}

// Stats returns the queue snapshot; window "" means 1m.
func (c *GRPCClient) Stats(ctx context.Context, window string) (apitype.QueueStats, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.ops.GetStats(ctx, connect.NewRequest(&jobqv1.GetStatsRequest{Window: window}))
	if err != nil {
		return apitype.QueueStats{}, err
	}
	return statsFromProto(res.Msg), nil
}

// The client's half of OpsService's protobuf conversions (grpcapi/ops.go
// holds the server's half).

// typeControlFromProto converts back (times in UTC).
func typeControlFromProto(m *jobqv1.TypeControl) apitype.TypeControl {
	tc := apitype.TypeControl{JobType: m.GetJobType(), Paused: m.GetPaused(), MaxRunning: int(m.GetMaxRunning()), UpdateTime: tsTime(m.GetUpdateTime())}
	if m.GetRateStarts() > 0 {
		period, _ := time.ParseDuration(m.GetRatePeriod())
		tc.RateLimit = &apitype.RateLimit{Starts: int(m.GetRateStarts()), Period: m.GetRatePeriod(),
			PeriodMs: float64(period) / float64(time.Millisecond), PerKey: m.GetRatePerKey()}
	}
	return tc
}

// periodicRequestToProto is the inverse of grpcapi.PeriodicRequestFromProto.
func periodicRequestToProto(req apitype.PeriodicRequest) *jobqv1.PutPeriodicRequest {
	return &jobqv1.PutPeriodicRequest{Name: req.Name, Cron: req.Cron, JobType: req.JobType, Params: string(req.Params),
		Priority: int32Ptr(req.Priority), MaxRetry: int32Ptr(req.MaxRetry), TimeoutMs: int32Ptr(req.TimeoutMs), Misfire: req.Misfire,
		Overlap: req.Overlap}
}

// periodicFromProto converts back (times in UTC).
func periodicFromProto(m *jobqv1.Periodic) apitype.Periodic {
	return apitype.Periodic{Name: m.GetName(), Cron: m.GetCron(), JobType: m.GetJobType(), Params: json.RawMessage(m.GetParams()),
		Priority: int(m.GetPriority()), MaxRetry: int(m.GetMaxRetry()), TimeoutMs: int(m.GetTimeoutMs()), Misfire: m.GetMisfire(),
		Overlap: m.GetOverlap(), ActiveJobID: m.GetActiveJobId(), QueuedJobID: m.GetQueuedJobId(), Source: m.GetSource(), NextRunAt: tsTime(m.GetNextRunAt()), LastRunAt: tsTimePtr(m.GetLastRunAt()),
		CreateTime: tsTime(m.GetCreateTime()), UpdateTime: tsTime(m.GetUpdateTime())}
}

// purgeResultFromProto converts back.
func purgeResultFromProto(m *jobqv1.PurgeJobsResponse) apitype.PurgeResult {
	return apitype.PurgeResult{Jobs: m.GetJobs(), Executions: m.GetExecutions(), Batches: int(m.GetBatches()), Cutoff: tsTime(m.GetCutoff())}
}

// statsFromProto converts back; absent maps become empty ones.
func statsFromProto(m *jobqv1.GetStatsResponse) apitype.QueueStats {
	st := apitype.QueueStats{DBNow: tsTime(m.GetDbNow()), ByStatus: m.GetByStatus(), WindowSeconds: m.GetWindowSeconds(),
		Created: m.GetCreated(), Finished: m.GetFinished(), CreatedPerSecond: m.GetCreatedPerSecond(),
		FinishedPerSecond: m.GetFinishedPerSecond(), ByTypeStatus: []apitype.TypeStatusCount{}}
	if m.OldestWaitingSeconds != nil {
		v := m.GetOldestWaitingSeconds()
		st.OldestWaitingSeconds = &v
	}
	if st.ByStatus == nil {
		st.ByStatus = map[string]int64{}
	}
	if st.Finished == nil {
		st.Finished = map[string]int64{}
	}
	for _, c := range m.GetByTypeStatus() {
		st.ByTypeStatus = append(st.ByTypeStatus, apitype.TypeStatusCount{JobType: c.GetJobType(), Status: jobq.JobState(c.GetStatus()), Count: c.GetCount()})
	}
	return st
}

// bulkCtx bounds a bulk operation by BulkTimeout when c.Timeout is shorter.
func (c *GRPCClient) bulkCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.Timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, max(c.Timeout, BulkTimeout))
}
