package client

import (
	"encoding/json"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
)

// The client's half of the protobuf conversions (grpcapi holds the server's
// half), so that the client never links the server.

// submitRequestToProto is the inverse of grpcapi.SubmitRequestFromProto.
// Integers outside int32 are clamped to the nearest int32 value (the server
// rejects both the same way: out of range).
func submitRequestToProto(req apitype.SubmitRequest) *jobqv1.SubmitJobRequest {
	m := &jobqv1.SubmitJobRequest{JobKey: req.JobKey, JobType: req.JobType, Params: string(req.Params)}
	m.Priority = int32Ptr(req.Priority)
	m.MaxRetry = int32Ptr(req.MaxRetry)
	m.TimeoutMs = int32Ptr(req.TimeoutMs)
	if req.RunAt != nil {
		m.RunAt = *req.RunAt
	}
	m.UniqueForMs, m.UniqueWhile = req.UniqueForMs, req.UniqueWhile
	m.ConcurrencyKey = req.ConcurrencyKey
	m.ConcurrencyLimit = int32Ptr(req.ConcurrencyLimit)
	m.RateKey = req.RateKey
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

// jobFromProto converts a job from the wire (times in UTC).
func jobFromProto(m *jobqv1.Job) apitype.Job {
	return apitype.Job{
		ID: m.GetId(), JobKey: m.GetJobKey(), JobType: m.GetJobType(), Params: json.RawMessage(m.GetParams()),
		Status: jobq.JobState(m.GetStatus()), Priority: int(m.GetPriority()), RetryTimes: int(m.GetRetryTimes()),
		MaxRetry: int(m.GetMaxRetry()), TimeoutMs: int(m.GetTimeoutMs()), RunAt: tsTime(m.GetRunAt()),
		Attempt: int(m.GetAttempt()), Owner: m.GetOwner(), LeaseUntil: tsTimePtr(m.GetLeaseUntil()),
		LastError: m.GetLastError(), StartedAt: tsTimePtr(m.GetStartedAt()), FinishedAt: tsTimePtr(m.GetFinishedAt()),
		CancelRequested: m.GetCancelRequested(), CreateTime: tsTime(m.GetCreateTime()), UpdateTime: tsTime(m.GetUpdateTime()),
		Output: rawOrNil(m.GetOutput()), UniqueUntil: tsTimePtr(m.GetUniqueUntil()), UniqueWhile: m.GetUniqueWhile(),
		KeyReleased: m.GetKeyReleased(), ConcurrencyKey: m.GetConcurrencyKey(), RateKey: m.GetRateKey(),
	}
}

// rawOrNil is s as a JSON value, nil when empty.
func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// executionFromProto converts an execution from the wire (times in UTC).
func executionFromProto(m *jobqv1.Execution) apitype.Execution {
	return apitype.Execution{
		JobID: m.GetJobId(), Attempt: int(m.GetAttempt()), Owner: m.GetOwner(), StartedAt: tsTime(m.GetStartedAt()),
		FinishedAt: tsTimePtr(m.GetFinishedAt()), Outcome: jobq.Outcome(m.GetOutcome()), Error: m.GetError(),
		Output: rawOrNil(m.GetOutput()), Progress: m.Progress, ProgressMessage: m.GetProgressMessage(),
	}
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
