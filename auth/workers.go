package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/service"
)

// workerRoute reports what a worker token may call (with a grant where noted).
func workerRoute(r *http.Request) bool {
	p := r.URL.Path
	if r.Method == http.MethodPost {
		switch p {
		case "/v1/workers/fetch", "/v1/workers/heartbeat", "/v1/workers/complete", "/v1/workers/complete:batch",
			"/v1/workers/log", "/v1/workers/progress",
			"/v1/jobs", "/v1/jobs:batch", // the submit grant, checked by the service
			"/jobq.v1.WorkerService/Fetch", "/jobq.v1.WorkerService/Heartbeat", "/jobq.v1.WorkerService/Complete",
			"/jobq.v1.WorkerService/CompleteBatch", "/jobq.v1.WorkerService/AppendLog", "/jobq.v1.WorkerService/ReportProgress",
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
		presented, ok := BearerToken(r.Header.Get("Authorization"))
		switch {
		case ok && len(admin) > 0 && isAdmin(presented):
			next.ServeHTTP(w, r)
			return
		case ok:
			if i := workerOf(presented); i >= 0 {
				scope := workers[i].Scope
				if !workerRoute(r) {
					log.Warn("worker token refused on a route outside its scope", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
					writeError(w, http.StatusForbidden, apitype.ErrorDetail{Code: "forbidden", Field: "Authorization",
						Message: "Authorization: a worker token may call only the worker routes and, with its grants, submit and read jobs of its types (" + scope.String() + ")"})
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
		writeError(w, http.StatusUnauthorized, apitype.ErrorDetail{Code: "unauthenticated", Field: "Authorization", Message: msg})
	})
}

// writeError answers status with a JSON error body (apitype.ErrorBody).
func writeError(w http.ResponseWriter, status int, d apitype.ErrorDetail) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(apitype.ErrorBody{Error: d})
}
