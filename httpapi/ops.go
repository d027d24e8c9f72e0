package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/service"
)

// opsAPI serves the operations routes (registered by New when Options.Ops is set):
//
//	GET  /v1/types                       200 {"types":[TypeControl…]}
//	POST /v1/types/{job_type}/pause      200 TypeControl
//	POST /v1/types/{job_type}/resume     200 TypeControl
//	PUT  /v1/types/{job_type}/limit      200 TypeControl; body {"max_running": N}, 0 removes the limit
//	PUT  /v1/types/{job_type}/rate-limit 200 TypeControl; body {"starts": N, "period": "1s"}
//	DELETE /v1/types/{job_type}/rate-limit 200 TypeControl (rate limit removed)
//	GET  /v1/periodic                    200 {"periodic":[Periodic…]}
//	POST /v1/periodic                    201 created · 200 replaced; body apitype.PeriodicRequest
//	GET  /v1/periodic/{name}             200 Periodic · 404
//	DELETE /v1/periodic/{name}           200 {"deleted": name} · 404
//	GET  /v1/periodic/{name}/history?limit=N&before=T  200 FireHistory · 404 · 400 (limit, before)
//	POST /v1/jobs/retry                  200 {"retried": N}; body {"status": "FAILED"|"CANCELED", "job_type": T}
//	POST /v1/jobs/purge                  200 PurgeResult; body {"older_than": "7d"}
//	GET  /v1/stats?window=1m             200 QueueStats
//
// Invalid input gets 400 naming the field; nothing is written.
type opsAPI struct {
	*api
	ops *service.Ops
}

func (a *api) routeOps(mux *http.ServeMux, ops *service.Ops) {
	o := &opsAPI{api: a, ops: ops}
	mux.HandleFunc("GET /v1/types", o.types)
	mux.HandleFunc("POST /v1/types/{job_type}/pause", o.pause(true))
	mux.HandleFunc("POST /v1/types/{job_type}/resume", o.pause(false))
	mux.HandleFunc("PUT /v1/types/{job_type}/limit", o.limit)
	mux.HandleFunc("PUT /v1/types/{job_type}/rate-limit", o.rateLimit)
	mux.HandleFunc("DELETE /v1/types/{job_type}/rate-limit", o.rateLimitClear)
	mux.HandleFunc("GET /v1/periodic", o.periodicList)
	mux.HandleFunc("POST /v1/periodic", o.periodicPut)
	mux.HandleFunc("GET /v1/periodic/{name}", o.periodicGet)
	mux.HandleFunc("DELETE /v1/periodic/{name}", o.periodicDelete)
	mux.HandleFunc("GET /v1/periodic/{name}/history", o.periodicHistory)
	mux.HandleFunc("POST /v1/jobs/retry", o.retryBulk)
	mux.HandleFunc("POST /v1/jobs/purge", o.purge)
	mux.HandleFunc("GET /v1/stats", o.stats)
}

// decodeBody reads a body of at most MaxBodyBytes and decodes it strictly
// into v; false means an error response was written.
func (o *opsAPI) decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := readLimited(w, r, o.opts.MaxBodyBytes)
	if err != nil {
		if !errors.Is(err, errTooLarge) {
			o.fail(w, &service.ValidationError{Field: "body", Rule: "could not be read: " + err.Error()})
		}
		return false
	}
	if err := service.DecodeStrict(body, v); err != nil {
		o.fail(w, err)
		return false
	}
	return true
}

// reply writes v, or maps err; a missing schedule is a 404 naming it
// (r's {name} path value).
func (o *opsAPI) reply(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	switch {
	case errors.Is(err, jobq.ErrNotFound):
		writeJSON(w, http.StatusNotFound, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "not_found", Field: "name",
			Message: "periodic schedule " + strconv.Quote(r.PathValue("name")) + " not found"}})
	case err != nil:
		o.fail(w, err)
	default:
		writeJSON(w, status, v)
	}
}

func (o *opsAPI) types(w http.ResponseWriter, r *http.Request) {
	if !noQuery(o, w, r) {
		return
	}
	ts, err := o.ops.Types(r.Context())
	o.reply(w, r, http.StatusOK, apitype.TypeList{Types: each(ts, apitype.TypeControlFrom)}, err)
}

func (o *opsAPI) pause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tc, err := o.ops.SetPaused(r.Context(), r.PathValue("job_type"), paused)
		o.reply(w, r, http.StatusOK, apitype.TypeControlFrom(tc), err)
	}
}

func (o *opsAPI) limit(w http.ResponseWriter, r *http.Request) {
	var req apitype.LimitRequest
	if !o.decodeBody(w, r, &req) {
		return
	}
	tc, err := o.ops.SetLimit(r.Context(), r.PathValue("job_type"), req)
	o.reply(w, r, http.StatusOK, apitype.TypeControlFrom(tc), err)
}

func (o *opsAPI) rateLimit(w http.ResponseWriter, r *http.Request) {
	var req apitype.RateLimitRequest
	if !o.decodeBody(w, r, &req) {
		return
	}
	tc, err := o.ops.SetRateLimit(r.Context(), r.PathValue("job_type"), req)
	o.reply(w, r, http.StatusOK, apitype.TypeControlFrom(tc), err)
}

func (o *opsAPI) rateLimitClear(w http.ResponseWriter, r *http.Request) {
	tc, err := o.ops.ClearRateLimit(r.Context(), r.PathValue("job_type"))
	o.reply(w, r, http.StatusOK, apitype.TypeControlFrom(tc), err)
}

func (o *opsAPI) periodicList(w http.ResponseWriter, r *http.Request) {
	if !noQuery(o, w, r) {
		return
	}
	ps, err := o.ops.ListPeriodic(r.Context())
	o.reply(w, r, http.StatusOK, apitype.PeriodicList{Periodic: each(ps, apitype.PeriodicFrom)}, err)
}

func (o *opsAPI) periodicPut(w http.ResponseWriter, r *http.Request) {
	var req apitype.PeriodicRequest
	if !o.decodeBody(w, r, &req) {
		return
	}
	p, created, err := o.ops.PutPeriodic(r.Context(), req, jobq.PeriodicSourceAPI)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/periodic/"+p.Name)
	}
	o.reply(w, r, status, apitype.PeriodicFrom(p), err)
}

func (o *opsAPI) periodicGet(w http.ResponseWriter, r *http.Request) {
	p, err := o.ops.GetPeriodic(r.Context(), r.PathValue("name"))
	o.reply(w, r, http.StatusOK, apitype.PeriodicFrom(p), err)
}

func (o *opsAPI) periodicDelete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := o.ops.DeletePeriodic(r.Context(), name)
	o.reply(w, r, http.StatusOK, map[string]string{"deleted": name}, err)
}

// periodicHistory serves one page of a schedule's fire ledger, newest
// instant first; query limit (1–1000, default 50) and before (RFC 3339).
func (o *opsAPI) periodicHistory(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		o.fail(w, &service.ValidationError{Field: "query", Rule: "must be a valid URL query string: " + err.Error()})
		return
	}
	for k, vs := range q {
		if k != "limit" && k != "before" {
			o.fail(w, &service.ValidationError{Field: k, Rule: "unknown query parameter (use limit, before)"})
			return
		}
		if len(vs) > 1 {
			o.fail(w, &service.ValidationError{Field: k, Rule: "must be given at most once"})
			return
		}
	}
	name := r.PathValue("name")
	es, err := o.ops.FireHistory(r.Context(), name, q.Get("limit"), q.Get("before"))
	out := apitype.FireHistory{Name: name, History: each(es, apitype.FireEntryFrom)}
	if n := len(es); n > 0 && (q.Get("limit") == "" && n == service.FireHistoryLimitDefault || q.Get("limit") == strconv.Itoa(n)) {
		next := es[n-1].Instant
		out.NextBefore = &next
	}
	o.reply(w, r, http.StatusOK, out, err)
}

func (o *opsAPI) retryBulk(w http.ResponseWriter, r *http.Request) {
	var req apitype.RetryBulkRequest
	if !o.decodeBody(w, r, &req) {
		return
	}
	res, err := o.ops.RetryBulk(r.Context(), req)
	o.reply(w, r, http.StatusOK, res, err)
}

func (o *opsAPI) purge(w http.ResponseWriter, r *http.Request) {
	var req apitype.PurgeRequest
	if !o.decodeBody(w, r, &req) {
		return
	}
	res, err := o.ops.Purge(r.Context(), req)
	o.reply(w, r, http.StatusOK, apitype.PurgeResultFrom(res), err)
}

func (o *opsAPI) stats(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		o.fail(w, &service.ValidationError{Field: "query", Rule: "must be a valid URL query string: " + err.Error()})
		return
	}
	for k, vs := range q {
		if k != "window" {
			o.fail(w, &service.ValidationError{Field: k, Rule: "unknown query parameter (use window)"})
			return
		}
		if len(vs) > 1 {
			o.fail(w, &service.ValidationError{Field: k, Rule: "must be given at most once"})
			return
		}
	}
	st, err := o.ops.Stats(r.Context(), q.Get("window"))
	o.reply(w, r, http.StatusOK, apitype.QueueStatsFrom(st), err)
}

// noQuery rejects query parameters on routes that take none.
func noQuery(o *opsAPI, w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery == "" {
		return true
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		o.fail(w, &service.ValidationError{Field: "query", Rule: "must be a valid URL query string: " + err.Error()})
		return false
	}
	for k := range q {
		o.fail(w, &service.ValidationError{Field: k, Rule: "unknown query parameter (this route takes none)"})
		return false
	}
	return true
}

// each converts every element of in with from (an empty, non-nil result
// for an empty input, so lists encode as []).
func each[T, U any](in []T, from func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = from(v)
	}
	return out
}
