package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
)

// completeBatch POSTs completions to /v1/workers/complete:batch with token
// and returns the status, the decoded answer and the raw body.
func (w *workerReplica) completeBatch(token string, completions ...any) (int, apitype.CompleteBatchResponse, []byte) {
	w.t.Helper()
	code, body := w.call(token, "POST", "/v1/workers/complete:batch", map[string]any{"completions": completions})
	var resp apitype.CompleteBatchResponse
	if code == http.StatusOK {
		if err := json.Unmarshal(body, &resp); err != nil {
			w.t.Fatalf("batch answer %s: %v", body, err)
		}
	}
	return code, resp, body
}

// One batch of completions answers each as the single route would, at its
// index — applied, stale (the attempt was rescued and fetched again),
// conflict (another outcome was applied), forbidden (a forged secret, a
// job type outside the token's scope), invalid naming the field (a
// malformed token, an output too large, a token given twice, an unknown
// field) — and the refused ones change nothing. The same batch sent again
// (its answer lost) is applied once: the applied completion answers
// applied again and writes no second outcome.
func TestWorkerCompleteBatchAnswersEachCompletion(t *testing.T) {
	w := startWorkerReplica(t, nil)
	ids := map[string]uint64{}
	for _, k := range []string{"applied", "stale", "conflict", "forged", "toolarge"} {
		ids[k] = w.submit("batch-"+k, "resize")
	}
	ids["scope"] = w.submit("batch-scope", "provision")
	tok := map[string]string{}
	for _, j := range w.fetch(allToken, "w1", []string{"resize", "provision"}, 10, 0) {
		for k, id := range ids {
			if j.ID == id {
				tok[k] = j.TaskToken
			}
		}
	}
	if len(tok) != len(ids) {
		t.Fatalf("fetched %d of %d jobs", len(tok), len(ids))
	}
	// conflict: a success is applied first; stale: attempt 1 is rescued and
	// attempt 2 fetched.
	if code, body := w.call(resizeToken, "POST", "/v1/workers/complete", map[string]any{"task_token": tok["conflict"], "outcome": "success"}); code != http.StatusOK {
		t.Fatalf("first completion of the conflict job: %d %s", code, body)
	}
	if _, err := w.db.Exec(`UPDATE job_queue SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, ids["stale"]); err != nil {
		t.Fatal(err)
	}
	if ok, err := w.r.Store.JobRescueExpired(context.Background(), jobq.Fence{ID: ids["stale"], Attempt: 1}); err != nil || !ok {
		t.Fatalf("rescue: %v, %v", ok, err)
	}
	if again := w.fetch(resizeToken, "w2", []string{"resize"}, 1, 0); len(again) != 1 || again[0].ID != ids["stale"] || again[0].Attempt != 2 {
		t.Fatalf("second fetch: %+v, want job %d attempt 2", again, ids["stale"])
	}
	before := map[string]jobRow{}
	execs := map[string]string{}
	for k, id := range ids {
		before[k], execs[k] = w.row(id), fmt.Sprint(w.executions(id))
	}

	big := strings.Repeat("x", 70000)
	batch := []any{
		map[string]any{"task_token": tok["applied"], "outcome": "success", "output": map[string]any{"ok": true}},
		map[string]any{"task_token": tok["stale"], "outcome": "success"},
		map[string]any{"task_token": tok["conflict"], "outcome": "failure", "error": "late"},
		map[string]any{"task_token": forge(t, tok["forged"]), "outcome": "success"},
		map[string]any{"task_token": tok["scope"], "outcome": "success"},
		map[string]any{"task_token": "jqt1.x", "outcome": "success"},
		map[string]any{"task_token": tok["toolarge"], "outcome": "success", "output": map[string]any{"data": big}},
		map[string]any{"task_token": tok["applied"], "outcome": "success"},
		map[string]any{"task_token": tok["forged"], "outcome": "success", "colour": "red"},
	}
	want := []struct{ result, code, field string }{
		{"applied", "", ""},
		{"stale", "stale", "task_token"},
		{"conflict", "conflict", "outcome"},
		{"forbidden", "forbidden", "task_token"},
		{"forbidden", "forbidden", "task_token"},
		{"invalid", "invalid_argument", "task_token"},
		{"invalid", "too_large", "output"},
		{"invalid", "invalid_argument", "task_token"},
		{"invalid", "invalid_argument", "colour"},
	}
	for round := 1; round <= 2; round++ { // round 2: the same batch again, its first answer lost
		code, resp, body := w.completeBatch(resizeToken, batch...)
		if code != http.StatusOK || len(resp.Results) != len(want) {
			t.Fatalf("round %d: %d %s, want 200 with %d results", round, code, body, len(want))
		}
		for i, wr := range want {
			r := resp.Results[i]
			var ecode, efield, msg string
			if r.Error != nil {
				ecode, efield, msg = r.Error.Code, r.Error.Field, r.Error.Message
			}
			if r.Result != wr.result || ecode != wr.code || efield != wr.field || (wr.field != "" && !strings.HasPrefix(msg, wr.field+": ")) {
				t.Errorf("round %d, completion %d: %+v (error %+v), want %s %s naming %q and its rule", round, i+1, r, r.Error, wr.result, wr.code, wr.field)
			}
			if strings.Contains(msg, tok["forged"][5:]) || strings.Contains(msg, tok["applied"][5:]) {
				t.Errorf("round %d, completion %d: the error shows a task token: %s", round, i+1, msg)
			}
		}
		if r := resp.Results[0]; r.JobID != ids["applied"] || r.Attempt != 1 || r.Status != "SUCCESS" {
			t.Errorf("round %d: applied result %+v, want job %d attempt 1 SUCCESS", round, r, ids["applied"])
		}
		if resp.Applied != 1 || resp.Stale != 1 || resp.Conflict != 1 || resp.Forbidden != 2 || resp.Invalid != 4 {
			t.Errorf("round %d: counts applied %d stale %d conflict %d forbidden %d invalid %d, want 1 1 1 2 4",
				round, resp.Applied, resp.Stale, resp.Conflict, resp.Forbidden, resp.Invalid)
		}
		if got := fmt.Sprint(w.executions(ids["applied"])); got != "[1:SUCCESS]" {
			t.Fatalf("round %d: executions of the applied job %s, want one SUCCESS", round, got)
		}
		for k, id := range ids {
			if k == "applied" {
				continue
			}
			if got := w.row(id); got != before[k] {
				t.Errorf("round %d: job %s (%d) %+v, want unchanged %+v", round, k, id, got, before[k])
			}
			if got := fmt.Sprint(w.executions(id)); got != execs[k] {
				t.Errorf("round %d: job %s executions %s, want unchanged %s", round, k, got, execs[k])
			}
		}
	}
	if n := w.count(`SELECT COUNT(*) FROM job_attempt WHERE job_id = ? AND output = '{"ok":true}'`, ids["applied"]); n != 1 {
		t.Fatalf("the applied job's output is on %d executions, want 1", n)
	}
}

// A bad batch envelope is refused as a whole (400 naming the field and the
// rule) and writes nothing.
func TestWorkerCompleteBatchEnvelope(t *testing.T) {
	w := startWorkerReplica(t, nil)
	id := w.submit("envelope-1", "resize")
	jobs := w.fetch(resizeToken, "w1", []string{"resize"}, 1, 0)
	if len(jobs) != 1 {
		t.Fatal("no job fetched")
	}
	one := `{"task_token":"` + jobs[0].TaskToken + `","outcome":"success"}`
	many := strings.TrimSuffix(strings.Repeat(one+",", apitype.MaxCompleteBatch+1), ",")
	cases := []struct {
		name, body, field string
	}{
		{"not JSON", `{`, "body"},
		{"an array", `[` + one + `]`, "body"},
		{"no completions", `{}`, "completions"},
		{"empty completions", `{"completions":[]}`, "completions"},
		{"completions not an array", `{"completions":{}}`, "completions"},
		{"an unknown field", `{"completions":[` + one + `],"colour":"red"}`, "colour"},
		{"completions twice", `{"completions":[` + one + `],"completions":[` + one + `]}`, "completions"},
		{"1,001 completions", `{"completions":[` + many + `]}`, "completions"},
	}
	before := w.row(id)
	for _, c := range cases {
		code, body := w.call(resizeToken, "POST", "/v1/workers/complete:batch", c.body)
		e := errorOf(t, body)
		if code != http.StatusBadRequest || e.Field != c.field || !strings.HasPrefix(e.Message, c.field+": ") || len(e.Message) <= len(c.field)+2 {
			t.Errorf("%s: %d %s, want 400 naming %s and its rule", c.name, code, body, c.field)
		}
	}
	if got := w.row(id); got != before {
		t.Fatalf("after bad batches: %+v, want %+v", got, before)
	}
	if got := w.executions(id); len(got) != 0 {
		t.Fatalf("after bad batches: executions %v", got)
	}
	// Worker tokens may call the route; a token outside the job's scope is
	// told per completion.
	code, resp, body := w.completeBatch(submitToken, map[string]any{"task_token": jobs[0].TaskToken, "outcome": "success"})
	if code != http.StatusOK || resp.Applied != 1 {
		t.Fatalf("batch with a worker token: %d %s, want 200 applied", code, body)
	}
}
