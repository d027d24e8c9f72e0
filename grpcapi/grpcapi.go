// Package grpcapi serves jobq's JobService (api/jobq/v1/jobq.proto) and
// OpsService (api/jobq/v1/ops.proto, see ops.go) over
// gRPC, gRPC-Web and Connect with connect-go, plus gRPC health checking
// (grpc.health.v1.Health) and server reflection (v1 and v1alpha), so
// grpcurl and other standard gRPC tools work. Validation and behaviour live
// in package service, shared with the HTTP API; this package only maps them
// to protobuf messages and RPC status codes:
//
//	*service.ValidationError  → InvalidArgument, message "field: rule", google.rpc.BadRequest detail
//	service.ErrNotFound       → NotFound
//	service.ErrKeyConflict    → AlreadyExists (SubmitJob: job_key reused with a different request)
//	*service.StateError       → FailedPrecondition, google.rpc.PreconditionFailure detail (type "STATE")
//	jobq.ErrUnavailable       → Unavailable (read-only, node not ready, lost
//	                            connection, a conflict that outlived the
//	                            service's retries; also: server shutting down)
//	context ended             → Canceled / DeadlineExceeded
//	anything else             → Internal (logged; the message says only "internal error")
package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/jobq/jobq"
	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
	"github.com/jobq/jobq/gen/jobq/v1/jobqv1connect"
	"github.com/jobq/jobq/service"
)

// Defaults for Options.
const (
	// WatchIntervalDefault is how often WatchJob polls the job's row.
	WatchIntervalDefault = 150 * time.Millisecond
	// MaxRequestBytesDefault bounds one request message (1 MiB of params
	// plus 64 KiB for the other fields); larger ones get ResourceExhausted.
	MaxRequestBytesDefault = 1<<20 + 64<<10
	// ReadyTimeoutDefault bounds the database ping behind a health check.
	ReadyTimeoutDefault = 2 * time.Second
)

// Options configures the gRPC/Connect handlers.
type Options struct {
	// WatchInterval is how often WatchJob reads the job. Defaults to
	// WatchIntervalDefault (150 ms).
	WatchInterval time.Duration
	// MaxRequestBytes bounds one (decompressed) request message. Defaults
	// to MaxRequestBytesDefault (1 MiB + 64 KiB).
	MaxRequestBytes int64
	// ReadyFunc reports readiness for health checks (e.g. a database ping):
	// nil error → SERVING, else NOT_SERVING. Nil means always SERVING
	// until Shutdown.
	ReadyFunc func(ctx context.Context) error
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Ops, if set, is served as OpsService (api/jobq/v1/ops.proto) next to
	// JobService. Nil leaves OpsService unmounted.
	Ops *service.Ops
	// Workers, if set, is served as WorkerService (api/jobq/v1/workers.proto).
	Workers *service.Workers
}

// Server implements jobqv1connect.JobServiceHandler on a service.Service.
type Server struct {
	svc       *service.Service
	opts      Options
	log       *slog.Logger
	closeOnce sync.Once
	closing   chan struct{}
}

var _ jobqv1connect.JobServiceHandler = (*Server)(nil)

// New returns a Server for svc; call Register to mount it.
func New(svc *service.Service, opts Options) *Server {
	if opts.WatchInterval <= 0 {
		opts.WatchInterval = WatchIntervalDefault
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = MaxRequestBytesDefault
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Server{svc: svc, opts: opts, log: opts.Logger.With("component", "grpcapi"), closing: make(chan struct{})}
}

// Register mounts JobService, OpsService (when Options.Ops is set), grpc.health.v1.Health and server reflection
// (grpc.reflection.v1 and v1alpha) on mux under their gRPC paths
// ("/jobq.v1.JobService/", …). Every protocol connect-go speaks is served:
// gRPC and gRPC-Web (HTTP/1.1 or HTTP/2) and Connect; gRPC needs HTTP/2,
// which a plain-TCP listener offers as h2c when the http.Server enables
// unencrypted HTTP/2. gate, if not nil, wraps JobService and reflection
// (e.g. auth.RequireBearer); health stays open, like /healthz, so
// probes need no credentials.
func (s *Server) Register(mux *http.ServeMux, gate func(http.Handler) http.Handler) {
	if gate == nil {
		gate = func(h http.Handler) http.Handler { return h }
	}
	opts := append(strictJSONCodecs(), connect.WithReadMaxBytes(int(s.opts.MaxRequestBytes)))
	path, h := jobqv1connect.NewJobServiceHandler(s, opts...)
	mux.Handle(path, gate(streamDeadlines(h)))
	services := []string{jobqv1connect.JobServiceName, grpchealth.HealthV1ServiceName}
	path, h = jobqv1connect.NewWorkflowServiceHandler(&WorkflowServer{s: s}, opts...)
	mux.Handle(path, gate(h))
	services = append(services, jobqv1connect.WorkflowServiceName)
	if s.opts.Ops != nil {
		path, h = jobqv1connect.NewOpsServiceHandler(&OpsServer{s: s, ops: s.opts.Ops}, opts...)
		mux.Handle(path, gate(h))
		services = append(services, jobqv1connect.OpsServiceName)
	}
	if s.opts.Workers != nil {
		path, h = jobqv1connect.NewWorkerServiceHandler(&WorkerServer{s: s, w: s.opts.Workers}, opts...)
		mux.Handle(path, gate(workerDeadlines(h)))
		services = append(services, jobqv1connect.WorkerServiceName)
	}
	mux.Handle(grpchealth.NewHandler(&healthChecker{s: s}))
	reflector := grpcreflect.NewStaticReflector(services...)
	path, h = grpcreflect.NewHandlerV1(reflector)
	mux.Handle(path, gate(h))
	path, h = grpcreflect.NewHandlerV1Alpha(reflector)
	mux.Handle(path, gate(h))
}

// streamDeadlines lifts the http.Server's read and write timeouts for
// WatchJob, whose stream lasts as long as the job runs; the stream still
// ends when the job is terminal, the client goes away or Shutdown is called.
func streamDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == jobqv1connect.JobServiceWatchJobProcedure {
			rc := http.NewResponseController(w)
			_ = rc.SetWriteDeadline(time.Time{})
			_ = rc.SetReadDeadline(time.Time{})
		}
		next.ServeHTTP(w, r)
	})
}

// workerDeadlines lifts the http.Server's read and write timeouts for
// Fetch, whose long poll may wait up to a minute before it answers.
func workerDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == jobqv1connect.WorkerServiceFetchProcedure {
			// Past the read deadline the connection's background read would
			// cancel the call's context; past the write deadline its answer
			// would be dropped.
			until := time.Now().Add(time.Duration(service.MaxFetchWaitMs)*time.Millisecond + 30*time.Second)
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(until)
			_ = rc.SetWriteDeadline(until)
		}
		next.ServeHTTP(w, r)
	})
}

// Shutdown makes health checks answer NOT_SERVING and ends every open
// WatchJob stream with Unavailable, so an http.Server's graceful Shutdown
// does not wait on them. It is safe to call more than once (e.g. from
// http.Server.RegisterOnShutdown).
func (s *Server) Shutdown() { s.closeOnce.Do(func() { close(s.closing) }) }

func (s *Server) shuttingDown() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// SubmitJobs validates and creates a batch of jobs with one multi-row
// insert (see service.Service.SubmitMany). A job with unknown fields is an
// invalid item, not a failed call.
func (s *Server) SubmitJobs(ctx context.Context, req *connect.Request[jobqv1.SubmitJobsRequest]) (*connect.Response[jobqv1.SubmitJobsResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, s.fail(err)
	}
	items := make([]service.BatchItem, len(req.Msg.GetJobs()))
	for i, m := range req.Msg.GetJobs() {
		items[i] = service.BatchItem{Req: SubmitRequestFromProto(m), Err: rejectUnknownFields(m)}
	}
	resp, err := s.svc.SubmitMany(ctx, items)
	if err != nil {
		return nil, s.fail(err)
	}
	return connect.NewResponse(SubmitBatchToProto(resp)), nil
}

// SubmitJob validates and creates a job (see service.Service.Submit).
func (s *Server) SubmitJob(ctx context.Context, req *connect.Request[jobqv1.SubmitJobRequest]) (*connect.Response[jobqv1.SubmitJobResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, s.fail(err)
	}
	job, created, err := s.svc.Submit(ctx, SubmitRequestFromProto(req.Msg))
	if err != nil {
		if errors.Is(err, service.ErrKeyConflict) {
			return nil, connect.NewError(connect.CodeAlreadyExists,
				fmt.Errorf("job_key: already used by job %d with a different request", job.ID))
		}
		return nil, s.fail(err)
	}
	return connect.NewResponse(&jobqv1.SubmitJobResponse{Job: JobToProto(job), Created: created}), nil
}

// GetJob returns one job.
func (s *Server) GetJob(ctx context.Context, req *connect.Request[jobqv1.GetJobRequest]) (*connect.Response[jobqv1.GetJobResponse], error) {
	id, err := requestID(req.Msg)
	if err != nil {
		return nil, s.fail(err)
	}
	job, err := s.svc.Get(ctx, id)
	if err != nil {
		return nil, s.failJob(id, err)
	}
	return connect.NewResponse(&jobqv1.GetJobResponse{Job: JobToProto(job)}), nil
}

// ListJobs returns one page of jobs, newest first.
func (s *Server) ListJobs(ctx context.Context, req *connect.Request[jobqv1.ListJobsRequest]) (*connect.Response[jobqv1.ListJobsResponse], error) {
	if err := rejectUnknownFields(req.Msg); err != nil {
		return nil, s.fail(err)
	}
	lr := service.ListRequest{Status: req.Msg.GetStatus(), JobType: req.Msg.GetJobType(), Cursor: req.Msg.GetCursor()}
	if req.Msg.Limit != nil {
		lr.Limit = strconv.Itoa(int(req.Msg.GetLimit()))
	}
	jobs, next, err := s.svc.List(ctx, lr)
	if err != nil {
		return nil, s.fail(err)
	}
	out := &jobqv1.ListJobsResponse{Jobs: make([]*jobqv1.Job, 0, len(jobs)), NextCursor: next}
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, JobToProto(j))
	}
	return connect.NewResponse(out), nil
}

// CancelJob cancels a WAITING or SCHEDULED job or requests cancellation of a RUNNING one.
func (s *Server) CancelJob(ctx context.Context, req *connect.Request[jobqv1.CancelJobRequest]) (*connect.Response[jobqv1.CancelJobResponse], error) {
	id, err := requestID(req.Msg)
	if err != nil {
		return nil, s.fail(err)
	}
	job, err := s.svc.Cancel(ctx, id)
	if err != nil {
		return nil, s.failState(id, err)
	}
	return connect.NewResponse(&jobqv1.CancelJobResponse{Job: JobToProto(job)}), nil
}

// RetryJob re-queues a FAILED or CANCELED job.
func (s *Server) RetryJob(ctx context.Context, req *connect.Request[jobqv1.RetryJobRequest]) (*connect.Response[jobqv1.RetryJobResponse], error) {
	id, err := requestID(req.Msg)
	if err != nil {
		return nil, s.fail(err)
	}
	job, err := s.svc.Retry(ctx, id)
	if err != nil {
		return nil, s.failState(id, err)
	}
	return connect.NewResponse(&jobqv1.RetryJobResponse{Job: JobToProto(job)}), nil
}

// ListExecutions lists a job's attempts, oldest first.
func (s *Server) ListExecutions(ctx context.Context, req *connect.Request[jobqv1.ListExecutionsRequest]) (*connect.Response[jobqv1.ListExecutionsResponse], error) {
	id, err := requestID(req.Msg)
	if err != nil {
		return nil, s.fail(err)
	}
	ex, err := s.svc.Executions(ctx, id)
	if err != nil {
		return nil, s.failJob(id, err)
	}
	out := &jobqv1.ListExecutionsResponse{Executions: make([]*jobqv1.Execution, 0, len(ex))}
	for _, e := range ex {
		out.Executions = append(out.Executions, ExecutionToProto(e))
	}
	return connect.NewResponse(out), nil
}

// WatchJob sends the job now and after each state change until it is
// terminal, polling every Options.WatchInterval.
func (s *Server) WatchJob(ctx context.Context, req *connect.Request[jobqv1.WatchJobRequest], stream *connect.ServerStream[jobqv1.WatchJobResponse]) error {
	id, err := requestID(req.Msg)
	if err != nil {
		return s.fail(err)
	}
	tick := time.NewTicker(s.opts.WatchInterval)
	defer tick.Stop()
	var last *jobq.Job
	for {
		job, err := s.svc.Get(ctx, id)
		if err != nil {
			return s.failJob(id, err)
		}
		if last == nil || stateChanged(*last, job) {
			if err := stream.Send(&jobqv1.WatchJobResponse{Job: JobToProto(job)}); err != nil {
				return err
			}
			last = &job
		}
		if job.Terminal() {
			return nil
		}
		select {
		case <-ctx.Done():
			return s.fail(ctx.Err())
		case <-s.closing:
			return connect.NewError(connect.CodeUnavailable, errors.New("server shutting down; watch again on another replica"))
		case <-tick.C:
		}
	}
}

// stateChanged reports whether b differs from a in what WatchJob reports as
// a change (not update_time or lease_until, which every heartbeat moves).
func stateChanged(a, b jobq.Job) bool {
	return a.Status != b.Status || a.Attempt != b.Attempt || a.RetryTimes != b.RetryTimes ||
		a.CancelRequested != b.CancelRequested || a.LastError != b.LastError || !a.RunAt.Equal(b.RunAt)
}

// requestID checks a request that names a job by id: no unknown fields,
// and the HTTP API's id rule (service.ParseID: a positive integer).
func requestID(m interface {
	proto.Message
	GetId() uint64
}) (uint64, error) {
	if err := rejectUnknownFields(m); err != nil {
		return 0, err
	}
	return service.ParseID(strconv.FormatUint(m.GetId(), 10))
}

// rejectUnknownFields refuses a request carrying fields this server does
// not know (a newer client's), as the HTTP API refuses unknown JSON fields:
// silently dropping one could change what the call does. Binary requests
// keep unknown fields for this check; JSON requests are refused earlier by
// strictJSONCodec.
func rejectUnknownFields(m proto.Message) error {
	raw := m.ProtoReflect().GetUnknown()
	if len(raw) == 0 {
		return nil
	}
	num, _, n := protowire.ConsumeTag(raw)
	if n < 0 {
		return &service.ValidationError{Field: "body", Rule: "holds malformed unknown fields"}
	}
	return &service.ValidationError{Field: "body", Rule: fmt.Sprintf("field number %d is not part of %s (is the client newer than the server?)",
		num, m.ProtoReflect().Descriptor().FullName())}
}

// failJob is fail with the job id named in NotFound.
func (s *Server) failJob(id uint64, err error) error {
	if errors.Is(err, service.ErrNotFound) {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("job %d not found", id))
	}
	return s.fail(err)
}

// failState is failJob for CancelJob and RetryJob: a *service.StateError
// becomes FailedPrecondition with its message (the job's status and what
// the operation applies to) and a PreconditionFailure detail (type
// "STATE", subject "jobs/<id>").
func (s *Server) failState(id uint64, err error) error {
	var se *service.StateError
	if !errors.As(err, &se) {
		return s.failJob(id, err)
	}
	desc := se.Error()
	ce := connect.NewError(connect.CodeFailedPrecondition, errors.New(desc))
	if d, derr := connect.NewErrorDetail(&errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{{
		Type: "STATE", Subject: "jobs/" + strconv.FormatUint(id, 10), Description: desc,
	}}}); derr == nil {
		ce.AddDetail(d)
	}
	return ce
}

// fail maps a service error to a *connect.Error (see the package comment).
func (s *Server) fail(err error) error {
	var ve *service.ValidationError
	var fb *service.Forbidden
	switch {
	case errors.As(err, &fb):
		// A worker token's scope refused the call (HTTP answers 403).
		return connect.NewError(connect.CodePermissionDenied, errors.New(fb.Error()))
	case errors.As(err, &ve):
		ce := connect.NewError(connect.CodeInvalidArgument, errors.New(ve.Error()))
		if d, derr := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
			Field: ve.Field, Description: ve.Rule,
		}}}); derr == nil {
			ce.AddDetail(d)
		}
		return ce
	case errors.Is(err, service.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, service.ErrKeyConflict):
		return connect.NewError(connect.CodeAlreadyExists, errors.New("job_key: already used with a different request"))
	case errors.Is(err, service.ErrInvalidState):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	case errors.Is(err, jobq.ErrUnavailable):
		s.log.Warn("database unavailable", "cause", service.Cause(err), "err", err)
		return connect.NewError(connect.CodeUnavailable, errors.New("database unavailable, retry later"))
	default:
		s.log.Error("internal error", "err", err)
		return connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
}

// healthChecker answers grpc.health.v1.Health for "" (the whole server) and
// jobq.v1.JobService: SERVING while ReadyFunc succeeds within
// ReadyTimeoutDefault, NOT_SERVING when it fails or after Shutdown;
// NotFound for any other service name.
type healthChecker struct{ s *Server }

func (h *healthChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && req.Service != jobqv1connect.JobServiceName && (req.Service != jobqv1connect.OpsServiceName || h.s.opts.Ops == nil) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %s", req.Service))
	}
	if h.s.shuttingDown() {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	if h.s.opts.ReadyFunc != nil {
		ctx, cancel := context.WithTimeout(ctx, ReadyTimeoutDefault)
		defer cancel()
		if err := h.s.opts.ReadyFunc(ctx); err != nil {
			h.s.log.Warn("health check: not ready", "err", err)
			return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
		}
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}
