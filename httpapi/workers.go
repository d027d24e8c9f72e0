package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/service"
)

// routeWorkers serves the worker protocol (docs/workers.md) and the reads
// that show workers' work.
func (a *api) routeWorkers(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/workers/fetch", a.workerFetch)
	mux.HandleFunc("POST /v1/workers/heartbeat", a.workerHeartbeat)
	mux.HandleFunc("POST /v1/workers/complete", a.workerComplete)
	mux.HandleFunc("POST /v1/workers/log", a.workerLog)
	mux.HandleFunc("POST /v1/workers/progress", a.workerProgress)
	mux.HandleFunc("GET /v1/workers", a.workerList)
	mux.HandleFunc("GET /v1/jobs/{id}/logs", a.logs)
}

// fetchWriteSlack is how long past its wait a fetch's answer may take to
// be written (the server's WriteTimeout is shorter than the longest wait).
const fetchWriteSlack = 30 * time.Second

func (a *api) workerFetch(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readBody(w, r, a.opts.MaxBodyBytes)
	if !ok {
		return
	}
	req, err := service.DecodeFetch(body)
	if err != nil {
		a.fail(w, err)
		return
	}
	wait := service.FetchWaitMsDefault
	if req.WaitMs != nil {
		wait = max(0, min(*req.WaitMs, service.MaxFetchWaitMs))
	}
	// The server's ReadTimeout and WriteTimeout (30 s) are shorter than the
	// longest wait: past the read deadline the connection's background read
	// would cancel the request's context, past the write deadline the answer
	// would be dropped. Both are moved past this fetch's wait.
	rc := http.NewResponseController(w)
	until := time.Now().Add(time.Duration(wait)*time.Millisecond + fetchWriteSlack)
	_ = rc.SetReadDeadline(until)
	_ = rc.SetWriteDeadline(until)
	resp, release, err := a.opts.Workers.Fetch(r.Context(), req)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away; its claimed jobs were released
		}
		a.fail(w, err)
		return
	}
	if werr := writeJSONFlushed(w, rc, http.StatusOK, resp); werr != nil && len(resp.Jobs) > 0 {
		a.log.Warn("fetch answer could not be delivered; releasing its jobs", "jobs", len(resp.Jobs), "err", werr)
		release()
	}
}

// writeJSONFlushed is writeJSON that flushes and reports a failed write.
func writeJSONFlushed(w http.ResponseWriter, rc *http.ResponseController, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return rc.Flush()
}

func (a *api) workerHeartbeat(w http.ResponseWriter, r *http.Request) {
	workerCall(a, w, r, service.DecodeHeartbeat, a.opts.Workers.Heartbeat)
}

func (a *api) workerComplete(w http.ResponseWriter, r *http.Request) {
	workerCall(a, w, r, service.DecodeComplete, a.opts.Workers.Complete)
}

func (a *api) workerLog(w http.ResponseWriter, r *http.Request) {
	workerCall(a, w, r, service.DecodeLog, a.opts.Workers.AppendLog)
}

func (a *api) workerProgress(w http.ResponseWriter, r *http.Request) {
	workerCall(a, w, r, service.DecodeProgress, a.opts.Workers.ReportProgress)
}

func workerCall[Req, Resp any](a *api, w http.ResponseWriter, r *http.Request, decode func([]byte) (Req, error), call func(context.Context, Req) (Resp, error)) {
	body, ok := a.readBody(w, r, a.opts.MaxBodyBytes)
	if !ok {
		return
	}
	req, err := decode(body)
	if err != nil {
		a.fail(w, err)
		return
	}
	resp, err := call(r.Context(), req)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (a *api) workerList(w http.ResponseWriter, r *http.Request) {
	list, err := a.opts.Workers.List(r.Context())
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (a *api) logs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k, vs := range q {
		switch k {
		case "attempt", "after", "limit":
			if len(vs) > 1 {
				a.fail(w, &service.ValidationError{Field: k, Rule: "must be given at most once"})
				return
			}
		default:
			a.fail(w, &service.ValidationError{Field: k, Rule: "unknown query parameter (use attempt, after, limit)"})
			return
		}
	}
	a.withID(w, r, func(id uint64) (any, error) {
		return a.svc.Logs(r.Context(), id, q.Get("attempt"), q.Get("after"), q.Get("limit"))
	})
}

// workerErrorFor maps the worker protocol's refusals: 403 forbidden, 409
// stale or conflict, 413 too_large; ok is false for any other error.
func workerErrorFor(err error) (int, apitype.ErrorDetail, bool) {
	var fb *service.Forbidden
	var cf *service.Conflict
	var tl *service.TooLarge
	switch {
	case errors.As(err, &fb):
		return http.StatusForbidden, apitype.ErrorDetail{Code: "forbidden", Field: fb.Field, Message: fb.Error()}, true
	case errors.As(err, &cf):
		return http.StatusConflict, apitype.ErrorDetail{Code: cf.Code, Field: cf.Field, Message: cf.Error()}, true
	case errors.As(err, &tl):
		return http.StatusRequestEntityTooLarge, apitype.ErrorDetail{Code: "too_large", Field: tl.Field, Message: tl.Error()}, true
	}
	return 0, apitype.ErrorDetail{}, false
}

// workerRoutes are what a worker token may call (with a grant where noted).
func workerRoute(r *http.Request) bool {
	p := r.URL.Path
	if r.Method == http.MethodPost {
		switch p {
		case "/v1/workers/fetch", "/v1/workers/heartbeat", "/v1/workers/complete", "/v1/workers/log", "/v1/workers/progress",
			"/v1/jobs", "/v1/jobs:batch", // the submit grant, checked by the service
			"/jobq.v1.WorkerService/Fetch", "/jobq.v1.WorkerService/Heartbeat", "/jobq.v1.WorkerService/Complete",
			"/jobq.v1.WorkerService/AppendLog", "/jobq.v1.WorkerService/ReportProgress",
			"/jobq.v1.JobService/SubmitJob", "/jobq.v1.JobService/SubmitJobs", "/jobq.v1.JobService/GetJob",
			"/jobq.v1.JobService/ListExecutions":
			return true
		}
		return false
	}
	if r.Method != http.MethodGet {
		return false
	}
	// GET /v1/jobs/{id}, /v1/jobs/{id}/executions, /v1/jobs/{id}/logs: the read grant.
	rest, ok := strings.CutPrefix(p, "/v1/jobs/")
	if !ok || rest == "" {
		return false
	}
	id, sub, _ := strings.Cut(rest, "/")
	return id != "" && (sub == "" || sub == "executions" || sub == "logs")
}

// Authenticate is the API's authentication with worker tokens beside the
// admin tokens (docs/workers.md, "Credentials"): an admin token may call
// everything; a worker token only the worker routes and, with its grants,
// submit and read routes (others answer 403 forbidden naming its scope);
// the request's context carries the caller (service.WithCaller) so the
// service checks the job types. Without a token a request is an admin's
// when no admin token is configured (the API's open default), else 401.
// /healthz and /readyz stay open. Tokens are never logged.
func Authenticate(admin []string, workers []service.WorkerCredential, log *slog.Logger, next http.Handler) http.Handler {
	isAdmin := TokenMatcher(admin)
	digests := make([][sha256.Size]byte, len(workers))
	for i, c := range workers {
		digests[i] = sha256.Sum256([]byte(c.Token))
	}
	workerOf := func(presented string) int {
		d := sha256.Sum256([]byte(presented))
		found := -1
		for i := range digests {
			if subtle.ConstantTimeCompare(d[:], digests[i][:]) == 1 {
				found = i
			}
		}
		return found
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unauthenticatedPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		presented, ok := bearerToken(r.Header.Get("Authorization"))
		switch {
		case ok && len(admin) > 0 && isAdmin(presented):
			next.ServeHTTP(w, r)
			return
		case ok:
			if i := workerOf(presented); i >= 0 {
				scope := workers[i].Scope
				if !workerRoute(r) {
					log.Warn("worker token refused on a route outside its scope", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
					writeJSON(w, http.StatusForbidden, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "forbidden", Field: "Authorization",
						Message: "Authorization: a worker token may call only the worker routes and, with its grants, submit and read jobs of its types (" + scope.String() + ")"}})
					return
				}
				next.ServeHTTP(w, r.WithContext(service.WithCaller(r.Context(), service.Caller{Worker: &scope})))
				return
			}
		case len(admin) == 0:
			next.ServeHTTP(w, r)
			return
		}
		challenge := `Bearer realm="jobq"`
		msg := `Authorization: required, as "Bearer <token>"`
		if ok {
			challenge += `, error="invalid_token"`
			msg = "Authorization: the bearer token is not accepted"
		}
		log.Warn("unauthenticated request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "token_given", ok)
		w.Header().Set("WWW-Authenticate", challenge)
		writeJSON(w, http.StatusUnauthorized, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "unauthenticated", Field: "Authorization", Message: msg}})
	})
}
