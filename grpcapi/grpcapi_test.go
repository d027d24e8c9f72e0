package grpcapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/client"
	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
	"github.com/jobq/jobq/gen/jobq/v1/jobqv1connect"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startReplica runs a whole replica (scheduler + HTTP API + gRPC) on a
// fresh database and a free loopback port; it is stopped at cleanup.
// Each edit (if any) adjusts the config first.
func startReplica(t *testing.T, edits ...func(*app.Config)) *app.Replica {
	t.Helper()
	cfg := app.Config{
		DSN: testdb.DSN(t), Listen: "127.0.0.1:0", Logger: quietLogger(),
		Scheduler: scheduler.Config{PollInterval: 100 * time.Millisecond, PollJitter: 20 * time.Millisecond,
			Workers: 4, RetryBackoffBase: 50 * time.Millisecond, ShutdownTimeout: 2 * time.Second, Logger: quietLogger()},
	}
	for _, edit := range edits {
		edit(&cfg)
	}
	r, err := app.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("app.Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = r.Stop(ctx)
	})
	return r
}

// jobClient is one way of calling JobService; rpcError decodes its errors.
type jobClient interface {
	SubmitJob(context.Context, *jobqv1.SubmitJobRequest) (*jobqv1.SubmitJobResponse, error)
	GetJob(context.Context, *jobqv1.GetJobRequest) (*jobqv1.GetJobResponse, error)
	ListJobs(context.Context, *jobqv1.ListJobsRequest) (*jobqv1.ListJobsResponse, error)
	CancelJob(context.Context, *jobqv1.CancelJobRequest) (*jobqv1.CancelJobResponse, error)
	RetryJob(context.Context, *jobqv1.RetryJobRequest) (*jobqv1.RetryJobResponse, error)
	ListExecutions(context.Context, *jobqv1.ListExecutionsRequest) (*jobqv1.ListExecutionsResponse, error)
	// WatchJob calls fn for every message until the stream ends.
	WatchJob(ctx context.Context, req *jobqv1.WatchJobRequest, fn func(*jobqv1.Job)) error
	rpcError(err error) (code connect.Code, msg string, details []proto.Message)
}

// grpcGo calls JobService with grpc-go over h2c.
type grpcGo struct{ cc *grpc.ClientConn }

func newGRPCGo(t *testing.T, addr string) *grpcGo {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { cc.Close() })
	return &grpcGo{cc: cc}
}

func invoke[Resp any, PResp interface {
	*Resp
	proto.Message
}](ctx context.Context, cc *grpc.ClientConn, method string, req proto.Message) (PResp, error) {
	out := PResp(new(Resp))
	if err := cc.Invoke(ctx, method, req, out); err != nil {
		return nil, err
	}
	return out, nil
}

func (g *grpcGo) SubmitJob(ctx context.Context, r *jobqv1.SubmitJobRequest) (*jobqv1.SubmitJobResponse, error) {
	return invoke[jobqv1.SubmitJobResponse](ctx, g.cc, jobqv1connect.JobServiceSubmitJobProcedure, r)
}
func (g *grpcGo) GetJob(ctx context.Context, r *jobqv1.GetJobRequest) (*jobqv1.GetJobResponse, error) {
	return invoke[jobqv1.GetJobResponse](ctx, g.cc, jobqv1connect.JobServiceGetJobProcedure, r)
}
func (g *grpcGo) ListJobs(ctx context.Context, r *jobqv1.ListJobsRequest) (*jobqv1.ListJobsResponse, error) {
	return invoke[jobqv1.ListJobsResponse](ctx, g.cc, jobqv1connect.JobServiceListJobsProcedure, r)
}
func (g *grpcGo) CancelJob(ctx context.Context, r *jobqv1.CancelJobRequest) (*jobqv1.CancelJobResponse, error) {
	return invoke[jobqv1.CancelJobResponse](ctx, g.cc, jobqv1connect.JobServiceCancelJobProcedure, r)
}
func (g *grpcGo) RetryJob(ctx context.Context, r *jobqv1.RetryJobRequest) (*jobqv1.RetryJobResponse, error) {
	return invoke[jobqv1.RetryJobResponse](ctx, g.cc, jobqv1connect.JobServiceRetryJobProcedure, r)
}
func (g *grpcGo) ListExecutions(ctx context.Context, r *jobqv1.ListExecutionsRequest) (*jobqv1.ListExecutionsResponse, error) {
	return invoke[jobqv1.ListExecutionsResponse](ctx, g.cc, jobqv1connect.JobServiceListExecutionsProcedure, r)
}
func (g *grpcGo) WatchJob(ctx context.Context, r *jobqv1.WatchJobRequest, fn func(*jobqv1.Job)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := g.cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, jobqv1connect.JobServiceWatchJobProcedure)
	if err != nil {
		return err
	}
	if err := st.SendMsg(r); err != nil {
		return err
	}
	if err := st.CloseSend(); err != nil {
		return err
	}
	for {
		var m jobqv1.WatchJobResponse
		if err := st.RecvMsg(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		fn(m.GetJob())
	}
}
func (g *grpcGo) rpcError(err error) (connect.Code, string, []proto.Message) {
	st, ok := status.FromError(err)
	if !ok {
		return connect.CodeUnknown, err.Error(), nil
	}
	var ds []proto.Message
	for _, d := range st.Details() {
		if m, ok := d.(proto.Message); ok {
			ds = append(ds, m)
		}
	}
	return connect.Code(st.Code()), st.Message(), ds
}

// connectGo calls JobService with connect-go (Connect JSON or gRPC-Web).
type connectGo struct {
	c jobqv1connect.JobServiceClient
}

func newConnectGo(t *testing.T, addr string, opts ...connect.ClientOption) *connectGo {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &connectGo{c: jobqv1connect.NewJobServiceClient(&http.Client{Transport: tr}, "http://"+addr, opts...)}
}

func unary[Req, Resp any](ctx context.Context, fn func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), r *Req) (*Resp, error) {
	resp, err := fn(ctx, connect.NewRequest(r))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

func (c *connectGo) SubmitJob(ctx context.Context, r *jobqv1.SubmitJobRequest) (*jobqv1.SubmitJobResponse, error) {
	return unary(ctx, c.c.SubmitJob, r)
}
func (c *connectGo) GetJob(ctx context.Context, r *jobqv1.GetJobRequest) (*jobqv1.GetJobResponse, error) {
	return unary(ctx, c.c.GetJob, r)
}
func (c *connectGo) ListJobs(ctx context.Context, r *jobqv1.ListJobsRequest) (*jobqv1.ListJobsResponse, error) {
	return unary(ctx, c.c.ListJobs, r)
}
func (c *connectGo) CancelJob(ctx context.Context, r *jobqv1.CancelJobRequest) (*jobqv1.CancelJobResponse, error) {
	return unary(ctx, c.c.CancelJob, r)
}
func (c *connectGo) RetryJob(ctx context.Context, r *jobqv1.RetryJobRequest) (*jobqv1.RetryJobResponse, error) {
	return unary(ctx, c.c.RetryJob, r)
}
func (c *connectGo) ListExecutions(ctx context.Context, r *jobqv1.ListExecutionsRequest) (*jobqv1.ListExecutionsResponse, error) {
	return unary(ctx, c.c.ListExecutions, r)
}
func (c *connectGo) WatchJob(ctx context.Context, r *jobqv1.WatchJobRequest, fn func(*jobqv1.Job)) error {
	st, err := c.c.WatchJob(ctx, connect.NewRequest(r))
	if err != nil {
		return err
	}
	defer st.Close()
	for st.Receive() {
		fn(st.Msg().GetJob())
	}
	return st.Err()
}
func (c *connectGo) rpcError(err error) (connect.Code, string, []proto.Message) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return connect.CodeUnknown, err.Error(), nil
	}
	var ds []proto.Message
	for _, d := range ce.Details() {
		if m, err := d.Value(); err == nil {
			ds = append(ds, m)
		}
	}
	return ce.Code(), ce.Message(), ds
}

// clients returns one client per protocol against addr.
func clients(t *testing.T, addr string) []struct {
	name string
	c    jobClient
} {
	return []struct {
		name string
		c    jobClient
	}{
		{"grpc-go", newGRPCGo(t, addr)},
		{"connect-json", newConnectGo(t, addr, connect.WithProtoJSON())},
		{"grpc-web", newConnectGo(t, addr, connect.WithGRPCWeb())},
	}
}

// wantCode fails unless err carries code; it returns the message and details.
func wantCode(t *testing.T, c jobClient, err error, code connect.Code) (string, []proto.Message) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", code)
	}
	got, msg, ds := c.rpcError(err)
	if got != code {
		t.Fatalf("got code %v (%s), want %v", got, msg, code)
	}
	return msg, ds
}

func ptr[T any](v T) *T { return &v }

func TestJobServiceEveryMethodEveryProtocol(t *testing.T) {
	r := startReplica(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	for _, tc := range clients(t, r.Addr) {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano) // run_at is DATETIME(6)
			sub := &jobqv1.SubmitJobRequest{JobKey: tc.name + "-wait", JobType: "sleep", Params: `{"ms": 1}`,
				Priority: ptr[int32](7), MaxRetry: ptr[int32](2), TimeoutMs: ptr[int32](5000), RunAt: later}
			// SubmitJob: created, then the same request returns the same job.
			res, err := c.SubmitJob(ctx, sub)
			if err != nil {
				t.Fatalf("SubmitJob: %v", err)
			}
			job := res.GetJob()
			if !res.GetCreated() || job.GetId() == 0 || job.GetStatus() != "SCHEDULED" || job.GetPriority() != 7 ||
				job.GetMaxRetry() != 2 || job.GetTimeoutMs() != 5000 || job.GetParams() != `{"ms":1}` || job.GetJobType() != "sleep" {
				t.Fatalf("SubmitJob = %v", res)
			}
			if got := job.GetRunAt().AsTime().Format(time.RFC3339Nano); got != later {
				t.Fatalf("run_at = %s, want %s", got, later)
			}
			res2, err := c.SubmitJob(ctx, sub)
			if err != nil || res2.GetCreated() || res2.GetJob().GetId() != job.GetId() {
				t.Fatalf("resubmit = %v, %v; want created=false id=%d", res2, err, job.GetId())
			}
			// The same job_key with a different request: AlreadyExists.
			_, err = c.SubmitJob(ctx, &jobqv1.SubmitJobRequest{JobKey: sub.JobKey, JobType: "noop"})
			if msg, _ := wantCode(t, c, err, connect.CodeAlreadyExists); !strings.HasPrefix(msg, "job_key:") {
				t.Fatalf("AlreadyExists message %q does not name job_key", msg)
			}
			// GetJob.
			got, err := c.GetJob(ctx, &jobqv1.GetJobRequest{Id: job.GetId()})
			if err != nil || got.GetJob().GetJobKey() != sub.JobKey || got.GetJob().GetStatus() != "SCHEDULED" {
				t.Fatalf("GetJob = %v, %v", got, err)
			}
			// ListJobs: pages of 2, newest first, cursor to the end.
			ids := []uint64{job.GetId()}
			for i := range 2 {
				res, err := c.SubmitJob(ctx, &jobqv1.SubmitJobRequest{JobKey: tc.name + "-more-" + strconv.Itoa(i), JobType: "noop", RunAt: later})
				if err != nil {
					t.Fatalf("SubmitJob: %v", err)
				}
				ids = append(ids, res.GetJob().GetId())
			}
			var seen []uint64
			cursor := ""
			for pages := 0; ; pages++ {
				page, err := c.ListJobs(ctx, &jobqv1.ListJobsRequest{Status: "SCHEDULED", Limit: ptr[int32](2), Cursor: cursor})
				if err != nil {
					t.Fatalf("ListJobs: %v", err)
				}
				if len(page.GetJobs()) > 2 || pages > 100 {
					t.Fatalf("ListJobs page of %d jobs (page %d)", len(page.GetJobs()), pages)
				}
				for _, j := range page.GetJobs() {
					if j.GetStatus() != "SCHEDULED" {
						t.Fatalf("ListJobs(status=SCHEDULED) returned a %s job", j.GetStatus())
					}
					seen = append(seen, j.GetId())
				}
				if cursor = page.GetNextCursor(); cursor == "" {
					break
				}
			}
			if !slices.IsSortedFunc(seen, func(a, b uint64) int { return -cmpU(a, b) }) {
				t.Fatalf("ListJobs not newest first: %v", seen)
			}
			for _, id := range ids {
				if !slices.Contains(seen, id) {
					t.Fatalf("ListJobs pages %v miss job %d", seen, id)
				}
			}
			// ListExecutions of a job that never ran: none.
			ex, err := c.ListExecutions(ctx, &jobqv1.ListExecutionsRequest{Id: job.GetId()})
			if err != nil || len(ex.GetExecutions()) != 0 {
				t.Fatalf("ListExecutions = %v, %v; want none", ex, err)
			}
			// RetryJob on a SCHEDULED job: FailedPrecondition with a PreconditionFailure.
			_, err = c.RetryJob(ctx, &jobqv1.RetryJobRequest{Id: job.GetId()})
			msg, ds := wantCode(t, c, err, connect.CodeFailedPrecondition)
			if !hasPrecondition(ds, "jobs/"+strconv.FormatUint(job.GetId(), 10)) || !strings.Contains(msg, "is SCHEDULED: retry applies to FAILED or CANCELED jobs") {
				t.Fatalf("FailedPrecondition %q, details %v; want the status named and a STATE violation for the job", msg, ds)
			}
			// CancelJob: SCHEDULED → CANCELED; again → the same (idempotent).
			for range 2 {
				cres, err := c.CancelJob(ctx, &jobqv1.CancelJobRequest{Id: job.GetId()})
				if err != nil || cres.GetJob().GetStatus() != "CANCELED" {
					t.Fatalf("CancelJob = %v, %v", cres, err)
				}
			}
			// RetryJob: CANCELED → WAITING (due now, so it runs at once: the
			// row read after the retry may already be claimed or done).
			rres, err := c.RetryJob(ctx, &jobqv1.RetryJobRequest{Id: job.GetId()})
			if st := rres.GetJob().GetStatus(); err != nil || (st != "WAITING" && st != "RUNNING" && st != "SUCCESS") {
				t.Fatalf("RetryJob = %v, %v; want WAITING (or already RUNNING/SUCCESS)", rres, err)
			}

			// WatchJob sees SCHEDULED → (WAITING →) RUNNING → SUCCESS of a 700 ms sleep due in 800 ms.
			soon := time.Now().Add(800 * time.Millisecond).UTC().Format(time.RFC3339Nano)
			sres, err := c.SubmitJob(ctx, &jobqv1.SubmitJobRequest{JobKey: tc.name + "-watch", JobType: "sleep", Params: `{"ms":700}`, RunAt: soon})
			if err != nil {
				t.Fatalf("SubmitJob: %v", err)
			}
			id := sres.GetJob().GetId()
			var statuses []string
			err = c.WatchJob(ctx, &jobqv1.WatchJobRequest{Id: id}, func(j *jobqv1.Job) {
				if j.GetId() != id {
					t.Errorf("WatchJob sent job %d, want %d", j.GetId(), id)
				}
				if n := len(statuses); n == 0 || statuses[n-1] != j.GetStatus() {
					statuses = append(statuses, j.GetStatus())
				}
			})
			if err != nil {
				t.Fatalf("WatchJob: %v", err)
			}
			// WAITING lasts from the promotion to the claim, often less than
			// one watch poll, so it may or may not be seen.
			seenStatuses := slices.DeleteFunc(slices.Clone(statuses), func(s string) bool { return s == "WAITING" })
			if want := []string{"SCHEDULED", "RUNNING", "SUCCESS"}; !slices.Equal(seenStatuses, want) {
				t.Fatalf("WatchJob statuses = %v, want %v with an optional WAITING after SCHEDULED", statuses, want)
			}
			ex, err = c.ListExecutions(ctx, &jobqv1.ListExecutionsRequest{Id: id})
			if err != nil || len(ex.GetExecutions()) != 1 || ex.GetExecutions()[0].GetOutcome() != "SUCCESS" ||
				ex.GetExecutions()[0].GetAttempt() != 1 || ex.GetExecutions()[0].GetFinishedAt() == nil {
				t.Fatalf("ListExecutions = %v, %v; want one SUCCESS attempt", ex, err)
			}
			// A terminal job: WatchJob sends it once and ends; CancelJob refuses.
			var n int
			if err := c.WatchJob(ctx, &jobqv1.WatchJobRequest{Id: id}, func(*jobqv1.Job) { n++ }); err != nil || n != 1 {
				t.Fatalf("WatchJob(terminal) = %d messages, %v; want 1, nil", n, err)
			}
			_, err = c.CancelJob(ctx, &jobqv1.CancelJobRequest{Id: id})
			wantCode(t, c, err, connect.CodeFailedPrecondition)

			// NotFound and InvalidArgument (id) for every method that takes an id.
			for _, id := range []uint64{1 << 40, 0} {
				want, field := connect.CodeNotFound, ""
				if id == 0 {
					want, field = connect.CodeInvalidArgument, "id"
				}
				calls := map[string]func() error{
					"GetJob":         func() error { _, err := c.GetJob(ctx, &jobqv1.GetJobRequest{Id: id}); return err },
					"CancelJob":      func() error { _, err := c.CancelJob(ctx, &jobqv1.CancelJobRequest{Id: id}); return err },
					"RetryJob":       func() error { _, err := c.RetryJob(ctx, &jobqv1.RetryJobRequest{Id: id}); return err },
					"ListExecutions": func() error { _, err := c.ListExecutions(ctx, &jobqv1.ListExecutionsRequest{Id: id}); return err },
					"WatchJob": func() error {
						return c.WatchJob(ctx, &jobqv1.WatchJobRequest{Id: id}, func(*jobqv1.Job) { t.Errorf("WatchJob(%d) sent a job", id) })
					},
				}
				for name, call := range calls {
					msg, ds := wantCode(t, c, call(), want)
					if field != "" && badRequestField(ds) != field {
						t.Fatalf("%s(id=0): details %v, want a BadRequest violation of %q (%s)", name, ds, field, msg)
					}
				}
			}
		})
	}
}

func TestFailedJobRetry(t *testing.T) {
	r := startReplica(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := newGRPCGo(t, r.Addr)
	// flaky fails its first attempt; with max_retry 0 the job is FAILED.
	res, err := c.SubmitJob(ctx, &jobqv1.SubmitJobRequest{JobKey: "flaky", JobType: "flaky", Params: `{"failures":1}`, MaxRetry: ptr[int32](0)})
	if err != nil {
		t.Fatalf("SubmitJob: %v", err)
	}
	var last *jobqv1.Job
	if err := c.WatchJob(ctx, &jobqv1.WatchJobRequest{Id: res.GetJob().GetId()}, func(j *jobqv1.Job) { last = j }); err != nil {
		t.Fatalf("WatchJob: %v", err)
	}
	if last.GetStatus() != "FAILED" || last.GetLastError() == "" {
		t.Fatalf("last watched state = %v, want FAILED with last_error", last)
	}
	rres, err := c.RetryJob(ctx, &jobqv1.RetryJobRequest{Id: last.GetId()})
	// The answer is the row read after the retry: the replica may already
	// have claimed (or even finished) the re-queued job by then.
	if st := rres.GetJob().GetStatus(); err != nil || (st != "WAITING" && st != "RUNNING" && st != "SUCCESS") || rres.GetJob().GetRetryTimes() != 0 {
		t.Fatalf("RetryJob(FAILED) = %v, %v; want WAITING (or already RUNNING/SUCCESS) with retry_times 0", rres, err)
	}
	// Its second attempt succeeds.
	if err := c.WatchJob(ctx, &jobqv1.WatchJobRequest{Id: last.GetId()}, func(j *jobqv1.Job) { last = j }); err != nil || last.GetStatus() != "SUCCESS" {
		t.Fatalf("WatchJob after retry ended in %v, %v; want SUCCESS", last.GetStatus(), err)
	}
}

// badSubmits are the HTTP API's bad submit bodies, as SubmitJobRequests,
// each with the field the error must name.
var badSubmits = []struct {
	name  string
	req   *jobqv1.SubmitJobRequest
	field string
}{
	{"missing job_key", &jobqv1.SubmitJobRequest{JobType: "noop"}, "job_key"},
	{"job_key too long", &jobqv1.SubmitJobRequest{JobKey: strings.Repeat("k", 65), JobType: "noop"}, "job_key"},
	{"job_key with newline", &jobqv1.SubmitJobRequest{JobKey: "a\nb", JobType: "noop"}, "job_key"},
	{"job_key with NUL", &jobqv1.SubmitJobRequest{JobKey: "a\x00b", JobType: "noop"}, "job_key"},
	{"job_key padded", &jobqv1.SubmitJobRequest{JobKey: " k ", JobType: "noop"}, "job_key"},
	{"missing job_type", &jobqv1.SubmitJobRequest{JobKey: "k"}, "job_type"},
	{"unregistered job_type", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "nope"}, "job_type"},
	{"job_type too long", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: strings.Repeat("t", 65)}, "job_type"},
	{"params an array", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", Params: `[1]`}, "params"},
	{"params a string", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", Params: `"x"`}, "params"},
	{"params bad JSON", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", Params: `{"a":`}, "params"},
	{"params too large", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", Params: `{"a":"` + strings.Repeat("x", 1<<20) + `"}`}, "params"},
	{"priority negative", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", Priority: ptr[int32](-1)}, "priority"},
	{"priority too high", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", Priority: ptr[int32](1001)}, "priority"},
	{"max_retry negative", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", MaxRetry: ptr[int32](-1)}, "max_retry"},
	{"max_retry too high", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", MaxRetry: ptr[int32](101)}, "max_retry"},
	{"timeout_ms negative", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", TimeoutMs: ptr[int32](-1)}, "timeout_ms"},
	{"timeout_ms over 24h", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", TimeoutMs: ptr[int32](86400001)}, "timeout_ms"},
	{"run_at not a time", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", RunAt: "tomorrow"}, "run_at"},
	{"run_at without offset", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", RunAt: "2026-01-02T15:04:05"}, "run_at"},
	{"run_at year 0", &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", RunAt: "0000-01-02T15:04:05Z"}, "run_at"},
	{"unknown field", withUnknownField(&jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop"}), "body"},
}

var badLists = []struct {
	name  string
	req   *jobqv1.ListJobsRequest
	field string
}{
	{"unknown status", &jobqv1.ListJobsRequest{Status: "BOGUS"}, "status"},
	{"lower-case status", &jobqv1.ListJobsRequest{Status: "waiting"}, "status"},
	{"limit 0", &jobqv1.ListJobsRequest{Limit: ptr[int32](0)}, "limit"},
	{"limit over 1000", &jobqv1.ListJobsRequest{Limit: ptr[int32](1001)}, "limit"},
	{"cursor not a number", &jobqv1.ListJobsRequest{Cursor: "abc"}, "cursor"},
	{"job_type with control character", &jobqv1.ListJobsRequest{JobType: "a\tb"}, "job_type"},
}

// withUnknownField adds field number 99 (unknown to jobq.v1) to m.
func withUnknownField[M proto.Message](m M) M {
	raw := protowire.AppendTag(nil, 99, protowire.VarintType)
	m.ProtoReflect().SetUnknown(protowire.AppendVarint(raw, 1))
	return m
}

func TestBadInputsInvalidArgument(t *testing.T) {
	r := startReplica(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range clients(t, r.Addr) {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			for _, bc := range badSubmits {
				if bc.field == "body" && tc.name == "connect-json" {
					continue // protojson cannot carry unknown field numbers; TestConnectJSONOverPlainHTTP sends an unknown JSON field
				}
				_, err := c.SubmitJob(ctx, bc.req)
				msg, ds := wantCode(t, c, err, connect.CodeInvalidArgument)
				if !strings.HasPrefix(msg, bc.field+": ") || badRequestField(ds) != bc.field {
					t.Errorf("%s: message %q, BadRequest field %q; want both to name %q", bc.name, msg, badRequestField(ds), bc.field)
				}
			}
			for _, bc := range badLists {
				_, err := c.ListJobs(ctx, bc.req)
				msg, ds := wantCode(t, c, err, connect.CodeInvalidArgument)
				if !strings.HasPrefix(msg, bc.field+": ") || badRequestField(ds) != bc.field {
					t.Errorf("%s: message %q, BadRequest field %q; want both to name %q", bc.name, msg, badRequestField(ds), bc.field)
				}
			}
			// A message over the size limit: ResourceExhausted, nothing read.
			_, err := c.SubmitJob(ctx, &jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", Params: `{"a":"` + strings.Repeat("x", 2<<20) + `"}`})
			wantCode(t, c, err, connect.CodeResourceExhausted)
		})
	}
	// Nothing was written.
	page, err := newGRPCGo(t, r.Addr).ListJobs(ctx, &jobqv1.ListJobsRequest{})
	if err != nil || len(page.GetJobs()) != 0 {
		t.Fatalf("ListJobs after bad inputs = %v, %v; want no jobs", page, err)
	}
}

// TestConnectJSONOverPlainHTTP calls the Connect protocol the way curl
// would, and checks that unknown JSON fields are refused as over HTTP.
func TestConnectJSONOverPlainHTTP(t *testing.T) {
	r := startReplica(t)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	post := func(method, body string) (int, map[string]any) {
		t.Helper()
		resp, err := hc.Post("http://"+r.Addr+"/jobq.v1.JobService/"+method, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", method, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("POST %s: decode: %v", method, err)
		}
		return resp.StatusCode, out
	}
	code, out := post("SubmitJob", `{"job_key":"curl-1","job_type":"noop","params":"{\"a\":1}","priority":5}`)
	job, _ := out["job"].(map[string]any)
	if code != http.StatusOK || out["created"] != true || job["job_key"] != "curl-1" {
		t.Fatalf("SubmitJob over Connect JSON = %d %v", code, out)
	}
	code, out = post("SubmitJob", `{"job_key":"curl-2","job_type":"noop","priorty":5}`)
	if msg, _ := out["message"].(string); code != http.StatusBadRequest || out["code"] != "invalid_argument" || !strings.Contains(msg, "priorty") {
		t.Fatalf("unknown JSON field = %d %v; want 400 invalid_argument naming priorty", code, out)
	}
	code, out = post("GetJob", `{"id":"`+job["id"].(string)+`"}`)
	if code != http.StatusOK {
		t.Fatalf("GetJob over Connect JSON = %d %v", code, out)
	}
	// The HTTP API still answers on the same port.
	resp, err := hc.Get("http://" + r.Addr + "/v1/jobs/" + job["id"].(string))
	if err != nil {
		t.Fatalf("GET /v1/jobs/{id}: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"job_key":"curl-1"`)) {
		t.Fatalf("GET /v1/jobs/{id} = %d %s", resp.StatusCode, body)
	}
}

func TestHealthAndReflection(t *testing.T) {
	r := startReplica(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc := newGRPCGo(t, r.Addr).cc
	health := healthpb.NewHealthClient(cc)
	for _, svc := range []string{"", jobqv1connect.JobServiceName} {
		res, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Health.Check(%q) = %v, %v; want SERVING", svc, res, err)
		}
	}
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Fatalf("Health.Check(unknown) error = %v, want NotFound", err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatalf("ServerReflectionInfo: %v", err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatalf("reflection send: %v", err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection recv: %v", err)
	}
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, jobqv1connect.JobServiceName) || !slices.Contains(names, "grpc.health.v1.Health") {
		t.Fatalf("reflection lists %v", names)
	}
	// The descriptor of JobService is served, so grpcurl can describe it.
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: jobqv1connect.JobServiceName}}); err != nil {
		t.Fatalf("reflection send: %v", err)
	}
	if res, err = stream.Recv(); err != nil || len(res.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Fatalf("reflection FileContainingSymbol = %v, %v", res, err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatalf("reflection close: %v", err)
	}
}

// TestShutdownEndsWatch checks that a graceful stop ends an open WatchJob
// with Unavailable instead of waiting for the job.
func TestShutdownEndsWatch(t *testing.T) {
	r := startReplica(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newGRPCGo(t, r.Addr)
	res, err := c.SubmitJob(ctx, &jobqv1.SubmitJobRequest{JobKey: "later", JobType: "noop", RunAt: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	if err != nil {
		t.Fatalf("SubmitJob: %v", err)
	}
	first := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- c.WatchJob(ctx, &jobqv1.WatchJobRequest{Id: res.GetJob().GetId()}, func(*jobqv1.Job) { once.Do(func() { close(first) }) })
	}()
	select {
	case <-first:
	case err := <-done:
		t.Fatalf("WatchJob ended before its first message: %v", err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(ctx) }()
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Fatalf("WatchJob after Stop = %v, want Unavailable", err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// TestBearerTokenGatesGRPC checks that with auth tokens configured the
// gRPC API needs the same bearer token as the HTTP API, that the CLI's gRPC
// client sends it, and that health checks stay open for probes.
func TestBearerTokenGatesGRPC(t *testing.T) {
	const token = "grpc-test-token-0123456789"
	r := startReplica(t, func(c *app.Config) { c.AuthTokens = []string{token} })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range clients(t, r.Addr) {
		_, err := tc.c.ListJobs(ctx, &jobqv1.ListJobsRequest{})
		wantCode(t, tc.c, err, connect.CodeUnauthenticated)
	}
	g := newGRPCGo(t, r.Addr)
	authed := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	if _, err := g.ListJobs(authed, &jobqv1.ListJobsRequest{}); err != nil {
		t.Fatalf("ListJobs with the token: %v", err)
	}
	_, err := g.ListJobs(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer not-the-token-0123456789"), &jobqv1.ListJobsRequest{})
	wantCode(t, g, err, connect.CodeUnauthenticated)
	st, err := reflectionpb.NewServerReflectionClient(g.cc).ServerReflectionInfo(ctx)
	if err == nil { // the refusal shows on the first receive
		_ = st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		_, err = st.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("reflection without a token: %v, want Unauthenticated", err)
	}
	res, err := healthpb.NewHealthClient(g.cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Health.Check without a token = %v, %v; want SERVING", res, err)
	}
	// The CLI's gRPC transport sends its Token.
	c := client.NewGRPC("http://" + r.Addr)
	defer c.Close()
	if _, err := c.Get(ctx, 1); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("client without token: %v, want Unauthenticated", err)
	}
	c.Token = token
	job, created, err := c.Submit(ctx, apitype.SubmitRequest{JobKey: "cli", JobType: "sleep", Params: []byte(`{"ms":200}`)})
	if err != nil || !created || job.Status != "WAITING" || string(job.Params) != `{"ms":200}` {
		t.Fatalf("client Submit = %+v, %v, %v", job, created, err)
	}
	var seen []string
	if err := c.Watch(ctx, job.ID, func(j apitype.Job) error { seen = append(seen, string(j.Status)); return nil }); err != nil || seen[len(seen)-1] != "SUCCESS" {
		t.Fatalf("client Watch = %v, %v; want to end at SUCCESS", seen, err)
	}
	page, err := c.List(ctx, "SUCCESS", "sleep", 10, "")
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != job.ID {
		t.Fatalf("client List = %+v, %v", page, err)
	}
	ex, err := c.Executions(ctx, job.ID)
	if err != nil || len(ex) != 1 || ex[0].Outcome != "SUCCESS" {
		t.Fatalf("client Executions = %+v, %v", ex, err)
	}
	if _, err := c.Cancel(ctx, job.ID); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("client Cancel(SUCCESS) = %v, want FailedPrecondition", err)
	}
	if _, err := c.Retry(ctx, job.ID); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("client Retry(SUCCESS) = %v, want FailedPrecondition", err)
	}
}

// TestWatchOutlivesWriteTimeout checks that a WatchJob stream is not cut by
// the server's WriteTimeout (it lasts as long as the job), over HTTP/2 and
// HTTP/1.1.
func TestWatchOutlivesWriteTimeout(t *testing.T) {
	r := startReplica(t, func(c *app.Config) { c.WriteTimeout, c.ReadTimeout = 300*time.Millisecond, 300*time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range clients(t, r.Addr) {
		res, err := tc.c.SubmitJob(ctx, &jobqv1.SubmitJobRequest{JobKey: "long-" + tc.name, JobType: "sleep", Params: `{"ms":1000}`})
		if err != nil {
			t.Fatalf("%s: SubmitJob: %v", tc.name, err)
		}
		var last string
		if err := tc.c.WatchJob(ctx, &jobqv1.WatchJobRequest{Id: res.GetJob().GetId()}, func(j *jobqv1.Job) { last = j.GetStatus() }); err != nil || last != "SUCCESS" {
			t.Fatalf("%s: WatchJob across a 300 ms WriteTimeout ended at %q, %v; want SUCCESS", tc.name, last, err)
		}
	}
}

func badRequestField(ds []proto.Message) string {
	for _, d := range ds {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}

func hasPrecondition(ds []proto.Message, subject string) bool {
	for _, d := range ds {
		if pf, ok := d.(*errdetails.PreconditionFailure); ok {
			for _, v := range pf.GetViolations() {
				if v.GetType() == "STATE" && v.GetSubject() == subject {
					return true
				}
			}
		}
	}
	return false
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
