package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/jobq/jobq/service"
)

// routeWorkers serves the worker protocol (docs/workers.md) and the reads
// that show workers' work.
func (a *api) routeWorkers(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/workers/fetch", a.workerFetch)
	mux.HandleFunc("POST /v1/workers/heartbeat", a.workerHeartbeat)
	mux.HandleFunc("POST /v1/workers/complete", a.workerComplete)
	mux.HandleFunc("POST /v1/workers/complete:batch", a.workerCompleteBatch)
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

// workerCompleteBatch serves POST /v1/workers/complete:batch: 200 with one
// result per completion (apitype.CompleteBatchResponse) whenever the
// envelope is valid, whatever each completion's answer; 400 for a bad
// envelope, 413 above MaxBatchBodyBytes, 503 when the database could not
// write them (send the same batch again).
func (a *api) workerCompleteBatch(w http.ResponseWriter, r *http.Request) {
	body, ok := a.readBody(w, r, a.opts.MaxBatchBodyBytes)
	if !ok {
		return
	}
	items, err := service.DecodeCompleteBatch(body)
	if err != nil {
		a.fail(w, err)
		return
	}
	resp, err := a.opts.Workers.CompleteMany(r.Context(), items)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
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
