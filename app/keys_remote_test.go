package app

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/jobq/jobq/apitype"
)

// A remote worker's completion frees its job's concurrency-key slot like a
// handler's: the key's next job is fetchable only after it, and a failure
// that retries keeps the slot.
func TestRemoteCompletionFreesTheKeySlot(t *testing.T) {
	t.Parallel()
	w := startWorkerReplica(t, nil)
	for _, k := range []string{"rk-a", "rk-b"} {
		body := `{"job_key":"` + k + `","job_type":"resize","concurrency_key":"bucket-1","max_retry":1}`
		if code, out := w.call(adminToken, "POST", "/v1/jobs", json.RawMessage(body)); code != http.StatusCreated {
			t.Fatalf("submit %s: %d %s", k, code, out)
		}
	}
	a := w.fetch(allToken, "w1", []string{"resize"}, 5, 0)
	if len(a) != 1 || a[0].JobKey != "rk-a" {
		t.Fatalf("first fetch: %+v, want rk-a alone (rk-b is parked behind it)", a)
	}
	yes := true
	retry := apitype.CompleteRequest{TaskToken: a[0].TaskToken, Outcome: "failure", Error: "try again", Retry: &yes}
	if code, out := w.call(allToken, "POST", "/v1/workers/complete", retry); code != 200 {
		t.Fatalf("fail a: %d %s", code, out)
	}
	var b apitype.Job
	if code, out := w.call(adminToken, "GET", "/v1/jobs/2", nil); code != 200 || json.Unmarshal(out, &b) != nil || b.Status != "PARKED" {
		t.Fatalf("rk-b after rk-a's retry: %d %s, want PARKED (the retry keeps the slot)", code, out)
	}
	var again []apitype.FetchedJob
	for try := 0; len(again) == 0 && try < 30; try++ { // rk-a waits out its retry backoff; each fetch long-polls 1 s
		again = w.fetch(allToken, "w1", []string{"resize"}, 5, 1000)
	}
	if len(again) != 1 || again[0].JobKey != "rk-a" {
		t.Fatalf("second fetch: %+v, want rk-a again", again)
	}
	done := apitype.CompleteRequest{TaskToken: again[0].TaskToken, Outcome: "success"}
	if code, out := w.call(allToken, "POST", "/v1/workers/complete", done); code != 200 {
		t.Fatalf("complete a: %d %s", code, out)
	}
	next := w.fetch(allToken, "w1", []string{"resize"}, 5, 0)
	if len(next) != 1 || next[0].JobKey != "rk-b" {
		t.Fatalf("after rk-a's success: %+v, want rk-b", next)
	}
}
