package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
)

// A remote success without an output takes the batched path (no
// execution row). Its resend after a lost answer is applied (200), not a
// 409; a different outcome is a conflict; the stale token of a rescued
// first attempt is 409 stale; nothing is written by the refused calls, and
// the executions API lists each attempt once.
func TestWorkerBatchedSuccessResendAndStale(t *testing.T) {
	w := startWorkerReplica(t, nil)
	id := w.submit("bk-1", "resize")
	first := w.fetch(resizeToken, "w1", []string{"resize"}, 1, 0)
	if len(first) != 1 || first[0].ID != id {
		t.Fatalf("fetch: %+v", first)
	}
	if _, err := w.db.Exec(`UPDATE job_queue SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.r.Store.JobRescueExpired(context.Background(), jobq.Fence{ID: id, Attempt: 1}); err != nil || !ok {
		t.Fatalf("rescue: %v %v", ok, err)
	}
	second := w.fetch(allToken, "w2", []string{"resize"}, 1, 0)
	if len(second) != 1 || second[0].Attempt != 2 {
		t.Fatalf("second fetch: %+v", second)
	}
	done := map[string]any{"task_token": second[0].TaskToken, "outcome": "success"}
	for i := range 3 {
		code, body := w.call(allToken, "POST", "/v1/workers/complete", done)
		var res apitype.CompleteResponse
		if code != http.StatusOK || json.Unmarshal(body, &res) != nil || res.Result != "applied" || res.Status != "SUCCESS" {
			t.Fatalf("completion %d: %d %s, want 200 applied SUCCESS", i+1, code, body)
		}
	}
	if n := w.count(`SELECT COUNT(*) FROM job_execution WHERE job_id = ? AND attempt = 2`, id); n != 0 {
		t.Fatalf("batched success wrote %d execution rows for attempt 2", n)
	}
	before := w.row(id)
	code, body := w.call(allToken, "POST", "/v1/workers/complete", map[string]any{"task_token": second[0].TaskToken, "outcome": "failure", "error": "late"})
	if e := errorOf(t, body); code != http.StatusConflict || e.Code != "conflict" {
		t.Fatalf("different outcome: %d %s, want 409 conflict", code, body)
	}
	for _, outcome := range []string{"success", "failure", "release"} {
		code, body := w.call(resizeToken, "POST", "/v1/workers/complete", map[string]any{"task_token": first[0].TaskToken, "outcome": outcome})
		if e := errorOf(t, body); code != http.StatusConflict || e.Code != "stale" {
			t.Fatalf("stale complete %s: %d %s, want 409 stale", outcome, code, body)
		}
	}
	code, body = w.call(allToken, "POST", "/v1/workers/complete", map[string]any{"task_token": forge(t, second[0].TaskToken), "outcome": "success"})
	if code != http.StatusForbidden {
		t.Fatalf("forged complete: %d %s, want 403", code, body)
	}
	if got := w.row(id); got != before {
		t.Fatalf("after refused calls: %+v, want %+v", got, before)
	}
	if got := fmt.Sprint(w.executions(id)); got != "[1:LEASE_EXPIRED 2:SUCCESS]" {
		t.Fatalf("job_attempt %s", got)
	}
	code, body = w.call(adminToken, "GET", fmt.Sprintf("/v1/jobs/%d/executions", id), nil)
	var ex struct {
		Executions []struct {
			Attempt int    `json:"attempt"`
			Owner   string `json:"owner"`
			Outcome string `json:"outcome"`
		} `json:"executions"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &ex) != nil {
		t.Fatalf("executions: %d %s", code, body)
	}
	if got := fmt.Sprint(ex.Executions); got != "[{1 worker:w1 LEASE_EXPIRED} {2 worker:w2 SUCCESS}]" {
		t.Fatalf("executions API %s", got)
	}
}
