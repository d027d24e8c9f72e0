package grpcapi

import (
	"encoding/json"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jobq/jobq"
	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
	"github.com/jobq/jobq/service"
)

// SubmitRequestFromProto turns a SubmitJobRequest into the service's
// SubmitRequest without validating it (service.ValidateSubmit does that):
// empty params means {} and empty run_at means now, as an absent JSON field
// does over HTTP; unset optional integers stay nil so their defaults apply.
func SubmitRequestFromProto(m *jobqv1.SubmitJobRequest) service.SubmitRequest {
	req := service.SubmitRequest{JobKey: m.GetJobKey(), JobType: m.GetJobType()}
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
	return req
}

// SubmitRequestToProto is the inverse of SubmitRequestFromProto, for
// clients. Integers outside int32 are clamped to the nearest int32 value
// (the server rejects both the same way: out of range).
func SubmitRequestToProto(req service.SubmitRequest) *jobqv1.SubmitJobRequest {
	m := &jobqv1.SubmitJobRequest{JobKey: req.JobKey, JobType: req.JobType, Params: string(req.Params)}
	m.Priority = int32Ptr(req.Priority)
	m.MaxRetry = int32Ptr(req.MaxRetry)
	m.TimeoutMs = int32Ptr(req.TimeoutMs)
	if req.RunAt != nil {
		m.RunAt = *req.RunAt
	}
	return m
}

func int32Ptr(v *int) *int32 {
	if v == nil {
		return nil
	}
	n := min(max(*v, -1<<31), 1<<31-1)
	out := int32(n)
	return &out
}

// JobToProto converts a jobq.Job; nil times stay unset.
func JobToProto(j jobq.Job) *jobqv1.Job {
	return &jobqv1.Job{
		Id: j.ID, JobKey: j.JobKey, JobType: j.JobType, Params: string(j.Params), Status: string(j.Status),
		Priority: int32(j.Priority), RetryTimes: int32(j.RetryTimes), MaxRetry: int32(j.MaxRetry),
		TimeoutMs: int32(j.TimeoutMs), RunAt: timestamppb.New(j.RunAt), Attempt: int32(j.Attempt),
		Owner: j.Owner, LeaseUntil: tsPtr(j.LeaseUntil), LastError: j.LastError,
		StartedAt: tsPtr(j.StartedAt), FinishedAt: tsPtr(j.FinishedAt), CancelRequested: j.CancelRequested,
		CreateTime: timestamppb.New(j.CreateTime), UpdateTime: timestamppb.New(j.UpdateTime),
	}
}

// JobFromProto converts back to a jobq.Job (times in UTC; RequestHash is
// not carried over the wire and stays empty).
func JobFromProto(m *jobqv1.Job) jobq.Job {
	return jobq.Job{
		ID: m.GetId(), JobKey: m.GetJobKey(), JobType: m.GetJobType(), Params: json.RawMessage(m.GetParams()),
		Status: jobq.JobState(m.GetStatus()), Priority: int(m.GetPriority()), RetryTimes: int(m.GetRetryTimes()),
		MaxRetry: int(m.GetMaxRetry()), TimeoutMs: int(m.GetTimeoutMs()), RunAt: tsTime(m.GetRunAt()),
		Attempt: int(m.GetAttempt()), Owner: m.GetOwner(), LeaseUntil: tsTimePtr(m.GetLeaseUntil()),
		LastError: m.GetLastError(), StartedAt: tsTimePtr(m.GetStartedAt()), FinishedAt: tsTimePtr(m.GetFinishedAt()),
		CancelRequested: m.GetCancelRequested(), CreateTime: tsTime(m.GetCreateTime()), UpdateTime: tsTime(m.GetUpdateTime()),
	}
}

// ExecutionToProto converts a jobq.Execution.
func ExecutionToProto(e jobq.Execution) *jobqv1.Execution {
	return &jobqv1.Execution{
		JobId: e.JobID, Attempt: int32(e.Attempt), Owner: e.Owner, StartedAt: timestamppb.New(e.StartedAt),
		FinishedAt: tsPtr(e.FinishedAt), Outcome: string(e.Outcome), Error: e.Error,
	}
}

// ExecutionFromProto converts back to a jobq.Execution (times in UTC).
func ExecutionFromProto(m *jobqv1.Execution) jobq.Execution {
	return jobq.Execution{
		JobID: m.GetJobId(), Attempt: int(m.GetAttempt()), Owner: m.GetOwner(), StartedAt: tsTime(m.GetStartedAt()),
		FinishedAt: tsTimePtr(m.GetFinishedAt()), Outcome: jobq.Outcome(m.GetOutcome()), Error: m.GetError(),
	}
}

func tsPtr(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func tsTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime().UTC()
}

func tsTimePtr(ts *timestamppb.Timestamp) *time.Time {
	if ts == nil {
		return nil
	}
	t := ts.AsTime().UTC()
	return &t
}
