// Package httpapi serves jobq's HTTP/JSON API: /v1/jobs (create, get, list,
// cancel, retry, executions), /healthz and /readyz. Validation and
// behaviour live in package service; this package only maps them to HTTP.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/auth"
	"github.com/jobq/jobq/service"
)

// MaxBodyBytesDefault is the default request body limit: 1 MiB
// (1,048,576 bytes); larger bodies get 413. It holds the largest params
// (service.MaxParamsBytes, 10^6 bytes) plus the rest of the envelope.
const MaxBodyBytesDefault = 1 << 20

// MaxBatchBodyBytesDefault is the default body limit of POST /v1/jobs:batch:
// 16 MiB, room for apitype.MaxBatchJobs jobs of about 16 KiB each.
const MaxBatchBodyBytesDefault = 16 << 20

// Options configures the API handler.
type Options struct {
	// MaxBodyBytes limits request bodies. Defaults to MaxBodyBytesDefault.
	MaxBodyBytes int64
	// MaxBatchBodyBytes limits POST /v1/jobs:batch bodies. Defaults to
	// MaxBatchBodyBytesDefault.
	MaxBatchBodyBytes int64
	// AuthTokens, when non-empty, are the accepted bearer tokens: every
	// request except /healthz and /readyz must carry
	// "Authorization: Bearer <token>" or gets 401. Defaults to none (no
	// authentication). See auth.LoadTokens.
	AuthTokens []string
	// ReadyFunc reports readiness for /readyz (e.g. a database ping).
	ReadyFunc func(ctx context.Context) error
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Ops, if set, serves the operations routes (/v1/types, /v1/periodic,
	// /v1/jobs/retry, /v1/jobs/purge, /v1/stats; see ops.go).
	Ops *service.Ops
	// Workers, if set, serves the worker protocol (/v1/workers/…, GET
	// /v1/workers, GET /v1/jobs/{id}/logs; see workers.go).
	Workers *service.Workers
	// Callouts, if set, serves the call-out bindings (/v1/callouts).
	Callouts Callouts
	// Alerts, if set, serves the alert rules (/v1/alerts; see alerts.go).
	Alerts Alerts
	// WorkerTokens are the worker credentials (see Authenticate). With
	// any, authentication is Authenticate's; else AuthTokens' alone.
	WorkerTokens []service.WorkerCredential
}

// New returns the API handler.
func New(svc *service.Service, opts Options) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = MaxBodyBytesDefault
	}
	if opts.MaxBatchBodyBytes <= 0 {
		opts.MaxBatchBodyBytes = MaxBatchBodyBytesDefault
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &api{svc: svc, opts: opts, log: opts.Logger.With("component", "httpapi")}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", a.submit)
	mux.HandleFunc("POST /v1/jobs:batch", a.submitBatch)
	mux.HandleFunc("GET /v1/jobs", a.list)
	mux.HandleFunc("GET /v1/jobs/{id}", a.get)
	mux.HandleFunc("POST /v1/jobs/{id}/cancel", a.cancel)
	mux.HandleFunc("POST /v1/jobs/{id}/retry", a.retry)
	mux.HandleFunc("GET /v1/jobs/{id}/executions", a.executions)
	a.routeWorkflows(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", a.ready)
	if opts.Ops != nil {
		a.routeOps(mux, opts.Ops)
	}
	if opts.Workers != nil {
		a.routeWorkers(mux)
	}
	if opts.Callouts != nil {
		a.routeCallouts(mux, opts.Callouts)
	}
	if opts.Alerts != nil {
		a.routeAlerts(mux, opts.Alerts)
	}
	var h http.Handler = jsonRouteErrors(mux)
	switch {
	case len(opts.WorkerTokens) > 0:
		h = auth.Authenticate(opts.AuthTokens, opts.WorkerTokens, a.log, h)
	case len(opts.AuthTokens) > 0:
		h = auth.RequireBearer(opts.AuthTokens, a.log, h)
	}
	return crossOrigin.Handler(h)
}

// crossOrigin refuses state-changing requests (POST …) that a browser sends
// from another origin (net/http's CrossOriginProtection: Sec-Fetch-Site, or
// Origin against Host). The API reads any Content-Type as JSON, so without
// it a page on another site could submit or cancel jobs through a
// text/plain form post to a jobq listening on the visitor's machine.
// Clients that are not browsers (curl, the Go client, k6) send neither
// header and pass; GET, HEAD and OPTIONS always pass. Refusals are 403
// forbidden in the API's error format.
var crossOrigin = func() *http.CrossOriginProtection {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusForbidden, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "forbidden", Field: "Origin",
			Message: "Origin: cross-origin " + r.Method + " requests from a browser are refused"}})
	}))
	return p
}()

// jsonRouteErrors answers the requests mux has no route for in the API's
// error format instead of ServeMux's plain text: 404 not_found for an
// unknown path, 405 method_not_allowed (with Allow) for a known path asked
// with another method. Requests that match a route go straight to mux.
func jsonRouteErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// The mux's own answer tells 404 from 405 and lists the allowed
		// methods; anything else (a redirect to a cleaned path) is passed on.
		mux.ServeHTTP(&routeErrorWriter{ResponseWriter: w, route: r.Method + " " + r.URL.Path}, r)
	})
}

// routeErrorWriter is the ResponseWriter jsonRouteErrors gives the mux for
// a request no route matches: a 404 or 405 status is answered in the API's
// error format instead (the mux's plain-text body is dropped); any other
// status passes through with its body.
type routeErrorWriter struct {
	http.ResponseWriter
	route    string
	answered bool // the JSON error is written; the mux's body is dropped
}

func (w *routeErrorWriter) WriteHeader(code int) {
	if w.answered {
		return
	}
	switch code {
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		w.answered = true
		h := w.Header()
		h.Del("X-Content-Type-Options") // set by http.Error for its plain text
		if code == http.StatusNotFound {
			writeJSON(w.ResponseWriter, http.StatusNotFound, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "not_found",
				Message: w.route + ": no such route (the API is under /v1/, see docs/api.md)"}})
			return
		}
		allow := h.Get("Allow") // set by the mux before it answers 405
		writeJSON(w.ResponseWriter, http.StatusMethodNotAllowed, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "method_not_allowed",
			Field: "method", Message: w.route + ": method not allowed; allowed: " + allow}})
	default:
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *routeErrorWriter) Write(b []byte) (int, error) {
	if w.answered {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *routeErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type api struct {
	svc  *service.Service
	opts Options
	log  *slog.Logger
}

func (a *api) submit(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readBody(w, r, a.opts.MaxBodyBytes)
	if !ok {
		return
	}
	req, err := service.DecodeSubmit(body)
	if err != nil {
		a.fail(w, err)
		return
	}
	job, created, err := a.svc.Submit(r.Context(), req)
	if err != nil {
		if errors.Is(err, service.ErrKeyConflict) {
			writeJSON(w, http.StatusConflict, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "conflict", Field: "job_key",
				Message: "job_key: already used by job " + itoa(int64(job.ID)) + " with a different request"}})
			return
		}
		a.fail(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/jobs/"+itoa(int64(job.ID)))
	}
	writeJSON(w, status, apitype.JobFrom(job))
}

// submitBatch serves POST /v1/jobs:batch: 200 with one result per job
// (apitype.SubmitBatchResponse) whenever the envelope is valid, whatever
// each job's outcome; 400 for a bad envelope, 413 above MaxBatchBodyBytes.
func (a *api) submitBatch(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readBody(w, r, a.opts.MaxBatchBodyBytes)
	if !ok {
		return
	}
	items, err := service.DecodeSubmitBatch(body)
	if err != nil {
		a.fail(w, err)
		return
	}
	resp, err := a.svc.SubmitMany(r.Context(), items)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// readBody reads a request body of at most limit bytes; on failure it has
// answered (413 or 400) and returns false.
func (a *api) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body, err := readLimited(w, r, limit)
	if err != nil {
		if !errors.Is(err, errTooLarge) {
			a.fail(w, &service.ValidationError{Field: "body", Rule: "could not be read: " + err.Error()})
		}
		return nil, false
	}
	return body, true
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		a.fail(w, &service.ValidationError{Field: "query", Rule: "must be a valid URL query string: " + err.Error()})
		return
	}
	for k, vs := range q {
		switch k {
		case "status", "job_type", "key_prefix", "limit", "cursor":
			if len(vs) > 1 {
				a.fail(w, &service.ValidationError{Field: k, Rule: "must be given at most once"})
				return
			}
		default:
			a.fail(w, &service.ValidationError{Field: k, Rule: "unknown query parameter (use status, job_type, key_prefix, limit, cursor)"})
			return
		}
	}
	jobs, next, err := a.svc.List(r.Context(), service.ListRequest{
		Status: q.Get("status"), JobType: q.Get("job_type"), KeyPrefix: q.Get("key_prefix"), Limit: q.Get("limit"), Cursor: q.Get("cursor"),
	})
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apitype.ListPage{Jobs: each(jobs, apitype.JobFrom), NextCursor: next})
}

func (a *api) withID(w http.ResponseWriter, r *http.Request, fn func(id uint64) (any, error)) {
	id, err := service.ParseID(r.PathValue("id"))
	if err != nil {
		a.fail(w, err)
		return
	}
	out, err := fn(id)
	if errors.Is(err, service.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "not_found", Message: "job " + strconv.FormatUint(id, 10) + " not found"}})
		return
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	a.withID(w, r, func(id uint64) (any, error) {
		j, err := a.svc.Get(r.Context(), id)
		return apitype.JobFrom(j), err
	})
}

func (a *api) cancel(w http.ResponseWriter, r *http.Request) {
	a.withID(w, r, func(id uint64) (any, error) {
		j, err := a.svc.Cancel(r.Context(), id)
		return apitype.JobFrom(j), err
	})
}

func (a *api) retry(w http.ResponseWriter, r *http.Request) {
	a.withID(w, r, func(id uint64) (any, error) {
		j, err := a.svc.Retry(r.Context(), id)
		return apitype.JobFrom(j), err
	})
}

func (a *api) executions(w http.ResponseWriter, r *http.Request) {
	a.withID(w, r, func(id uint64) (any, error) {
		ex, err := a.svc.Executions(r.Context(), id)
		return apitype.ExecutionList{Executions: each(ex, apitype.ExecutionFrom)}, err
	})
}

func (a *api) ready(w http.ResponseWriter, r *http.Request) {
	if a.opts.ReadyFunc != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := a.opts.ReadyFunc(ctx); err != nil {
			// Name the failing check: read_only, innodb_read_only,
			// super_read_only, wsrep_ready, wsrep_local_state, schema, connect.
			check := "connect"
			var nr interface{ ReadyCheck() string } // *store.NotReadyError
			if errors.As(err, &nr) {
				check = nr.ReadyCheck()
			}
			w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
			writeJSON(w, http.StatusServiceUnavailable, apitype.ReadyBody{Status: "unavailable", Check: check,
				Error: &apitype.ErrorDetail{Code: "unavailable", Message: "database: " + err.Error()}})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// fail maps a service error to its status code (service.ErrorFor) and
// writes it.
func (a *api) fail(w http.ResponseWriter, err error) {
	status, d := service.ErrorFor(err)
	switch status {
	case http.StatusServiceUnavailable:
		a.log.Warn("database unavailable", "cause", service.Cause(err), "err", err)
		unavailable(w, d.Message)
		return
	case service.StatusClientClosedRequest:
		a.log.Debug("client disconnected before its answer", "err", err)
	case http.StatusInternalServerError:
		a.log.Error("internal error", "err", err)
	}
	writeJSON(w, status, apitype.ErrorBody{Error: d})
}

// RetryAfterSeconds is the Retry-After a 503 unavailable answer carries:
// readiness is re-checked at least once a second.
const RetryAfterSeconds = 1

// unavailable writes 503 {"error":{"code":"unavailable",...}} with Retry-After.
func unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	writeJSON(w, http.StatusServiceUnavailable, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "unavailable", Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// errTooLarge: readLimited has answered 413.
var errTooLarge = errors.New("body too large")

// readLimited reads a request body of at most limit bytes. A body over the
// limit gets 413 too_large naming the limit, and errTooLarge. A declared
// Content-Length over the limit is refused before any read: reading is what
// makes the server send "100 Continue" to a client that asked for it
// (curl does for bodies over 1 MiB), and a connection closed after that,
// with the body unread, reached such clients as a reset instead of the 413.
func readLimited(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		writeTooLarge(w, limit)
		return nil, errTooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeTooLarge(w, mbe.Limit)
		return nil, errTooLarge
	}
	return body, err
}

func writeTooLarge(w http.ResponseWriter, limit int64) {
	writeJSON(w, http.StatusRequestEntityTooLarge, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "too_large", Field: "body",
		Message: "body: must be at most " + itoa(limit) + " bytes"}})
}
