// Package sabotage holds the testbed build's decorators that break jobq's
// guarantees on purpose, so the chaos checker can prove it catches their
// absence (`make chaos-sabotage`). They live outside the product: no
// product type, statement or branch knows them.
package sabotage

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/scheduler"
)

// RemoteFencing is the switch name of RemoteCompletionUnfenced.
const RemoteFencing = "remote-fencing"

// remoteSuccessByIDSQL is the classic success report by job id: whatever
// attempt holds the job, whatever the token's secret (xxl-job's callback,
// PowerJob's late report that reopens a job).
const remoteSuccessByIDSQL = `UPDATE job_queue
SET status = 'SUCCESS', lease_until = NULL, finished_at = NOW(6), update_time = NOW(6)
WHERE id = ?`

// RemoteCompletionUnfenced wraps the API handler h so that a remote
// worker's success completion is not fenced by its task token's attempt or
// secret: when the replica refuses one (409 stale, 403 forbidden; in a
// batch, a stale or forbidden result), the decorator writes the success by
// job id alone on db and answers "applied", as a scheduler without task
// tokens would. Every other call passes through unchanged.
func RemoteCompletionUnfenced(h http.Handler, db *sql.DB, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/workers/complete:batch" {
			unfencedBatch(h, db, log, w, r)
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/workers/complete" {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var req apitype.CompleteRequest
		refused := rec.Code == http.StatusConflict || rec.Code == http.StatusForbidden
		if refused && json.Unmarshal(body, &req) == nil && req.Outcome == scheduler.CompleteSuccess {
			if f, err := scheduler.ParseTaskToken(req.TaskToken); err == nil {
				if _, err := db.ExecContext(r.Context(), remoteSuccessByIDSQL, f.ID); err == nil {
					log.Warn("SABOTAGE remote-fencing: refused completion written by job id", "job_id", f.ID, "attempt", f.Attempt)
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"result":"applied","job_id":%d,"attempt":%d,"status":"SUCCESS"}`+"\n", f.ID, f.Attempt)
					return
				}
			}
		}
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// unfencedBatch is RemoteCompletionUnfenced for a batch of completions:
// each refused success is written by job id and its result turned into
// "applied".
func unfencedBatch(h http.Handler, db *sql.DB, log *slog.Logger, w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	var req apitype.CompleteBatchRequest
	var resp apitype.CompleteBatchResponse
	if rec.Code == http.StatusOK && json.Unmarshal(body, &req) == nil && json.Unmarshal(rec.Body.Bytes(), &resp) == nil &&
		len(req.Completions) == len(resp.Results) {
		changed := false
		for i, c := range req.Completions {
			res := resp.Results[i]
			if (res.Result != apitype.CompleteStale && res.Result != apitype.CompleteForbidden) || c.Outcome != scheduler.CompleteSuccess {
				continue
			}
			f, err := scheduler.ParseTaskToken(c.TaskToken)
			if err != nil {
				continue
			}
			if _, err := db.ExecContext(r.Context(), remoteSuccessByIDSQL, f.ID); err == nil {
				log.Warn("SABOTAGE remote-fencing: refused completion written by job id", "job_id", f.ID, "attempt", f.Attempt)
				resp.Results[i] = apitype.CompleteBatchResult{Result: apitype.CompleteApplied, JobID: f.ID, Attempt: f.Attempt, Status: "SUCCESS"}
				changed = true
			}
		}
		if changed {
			resp.Count()
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(resp)
			return
		}
	}
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}
