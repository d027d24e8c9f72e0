package grpcapi

import (
	"encoding/json"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
)

// SubmitRequestFromProto turns a SubmitJobRequest into the service's
// SubmitRequest without validating it (service.ValidateSubmit does that):
// empty params means {} and empty run_at means now, as an absent JSON field
// does over HTTP; unset optional integers stay nil so their defaults apply.
func SubmitRequestFromProto(m *jobqv1.SubmitJobRequest) apitype.SubmitRequest {
	req := apitype.SubmitRequest{JobKey: m.GetJobKey(), JobType: m.GetJobType()}
	if m.GetParams() != "" {
		req.Params = json.RawMessage(m.GetParams())
	}
	if m.Priority != nil {
		v := int(m.GetPriority())
		req.Priority = &v
	}
	if m.MaxRetry != nil {
		v := int(m.GetMaxRetry())
		req.MaxRetry = &v
	}
	if m.TimeoutMs != nil {
		v := int(m.GetTimeoutMs())
		req.TimeoutMs = &v
	}
	if m.GetRunAt() != "" {
		v := m.GetRunAt()
		req.RunAt = &v
	}
	req.UniqueForMs, req.UniqueWhile = m.UniqueForMs, m.GetUniqueWhile()
	req.ConcurrencyKey = m.GetConcurrencyKey()
	req.RateKey = m.GetRateKey()
	if m.ConcurrencyLimit != nil {
		v := int(m.GetConcurrencyLimit())
		req.ConcurrencyLimit = &v
	}
	return req
}

// JobToProto converts a jobq.Job; nil times stay unset.
func JobToProto(j jobq.Job) *jobqv1.Job {
	return &jobqv1.Job{
		Id: j.ID, JobKey: j.JobKey, JobType: j.JobType, Params: string(j.Params), Status: string(j.Status),
		Priority: int32(j.Priority), RetryTimes: int32(j.RetryTimes), MaxRetry: int32(j.MaxRetry),
		TimeoutMs: int32(j.TimeoutMs), RunAt: timestamppb.New(j.RunAt), Attempt: int32(j.Attempt),
		Owner: j.Owner, LeaseUntil: tsPtr(j.LeaseUntil), LastError: j.LastError,
		StartedAt: tsPtr(j.StartedAt), FinishedAt: tsPtr(j.FinishedAt), CancelRequested: j.CancelRequested,
		CreateTime: timestamppb.New(j.CreateTime), UpdateTime: timestamppb.New(j.UpdateTime), Output: string(j.Output),
		UniqueUntil: tsPtr(j.UniqueUntil), UniqueWhile: apitype.JobFrom(j).UniqueWhile, KeyReleased: j.KeyReleased,
		ConcurrencyKey: j.ConcurrencyKey, RateKey: j.RateKey,
	}
}

// ExecutionToProto converts a jobq.Execution.
func ExecutionToProto(e jobq.Execution) *jobqv1.Execution {
	return &jobqv1.Execution{
		JobId: e.JobID, Attempt: int32(e.Attempt), Owner: e.Owner, StartedAt: timestamppb.New(e.StartedAt),
		FinishedAt: tsPtr(e.FinishedAt), Outcome: string(e.Outcome), Error: e.Error,
		Output: string(e.Output), Progress: e.Progress, ProgressMessage: e.ProgressMessage,
	}
}

func tsPtr(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

// SubmitBatchToProto turns a batch submit's answer into a SubmitJobsResponse.
func SubmitBatchToProto(r apitype.SubmitBatchResponse) *jobqv1.SubmitJobsResponse {
	out := &jobqv1.SubmitJobsResponse{Results: make([]*jobqv1.SubmitJobsResult, len(r.Results)),
		Created: int32(r.Created), Existing: int32(r.Existing), Conflict: int32(r.Conflict), Invalid: int32(r.Invalid)}
	for i, x := range r.Results {
		m := &jobqv1.SubmitJobsResult{Status: x.Status, Id: x.ID}
		if x.Error != nil {
			m.Field, m.Message = x.Error.Field, x.Error.Message
		}
		out.Results[i] = m
	}
	return out
}
