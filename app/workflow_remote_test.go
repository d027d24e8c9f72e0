package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/jobq/jobq/apitype"
)

// A remote worker's fetch answer carries its workflow job's parents with
// their outputs, and its completion may spawn jobs into the workflow,
// committed with the success (a token with the submit grant for their
// types: one without it may not).
func TestWorkflowRemoteParentsAndSpawn(t *testing.T) {
	t.Parallel()
	w := startWorkerReplica(t, nil)
	body := `{"workflow_key":"rw","jobs":[{"job_key":"rw-a","job_type":"resize"},{"job_key":"rw-b","job_type":"resize","depends_on":["rw-a"]}]}`
	if code, out := w.call(adminToken, "POST", "/v1/workflows", json.RawMessage(body)); code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, out)
	}
	a := w.fetch(allToken, "w1", []string{"resize"}, 5, 0)
	if len(a) != 1 || a[0].JobKey != "rw-a" || len(a[0].Parents) != 0 {
		t.Fatalf("first fetch: %+v, want rw-a alone", a)
	}
	done := apitype.CompleteRequest{TaskToken: a[0].TaskToken, Outcome: "success", Output: json.RawMessage(`{"size":7}`)}
	if code, out := w.call(allToken, "POST", "/v1/workers/complete", done); code != 200 {
		t.Fatalf("complete a: %d %s", code, out)
	}
	b := w.fetch(allToken, "w1", []string{"resize"}, 5, 0)
	if len(b) != 1 || b[0].JobKey != "rw-b" || len(b[0].Parents) != 1 || b[0].Parents[0].JobKey != "rw-a" ||
		string(b[0].Parents[0].Output) != `{"size":7}` || b[0].Parents[0].Status != "SUCCESS" {
		t.Fatalf("second fetch: %+v, want rw-b with rw-a's output", b)
	}
	spawn := &apitype.Spawn{Jobs: []apitype.WorkflowJob{
		{SubmitRequest: apitype.SubmitRequest{JobKey: "rw-m1", JobType: "resize"}},
		{SubmitRequest: apitype.SubmitRequest{JobKey: "rw-m2", JobType: "resize"}},
		{SubmitRequest: apitype.SubmitRequest{JobKey: "rw-r", JobType: "resize"}, DependsOn: []apitype.DependencyRef{{JobKey: "rw-m1"}, {JobKey: "rw-m2"}}},
	}}
	// resizeToken has no submit grant: the spawn is refused, nothing written.
	if code, out := w.call(resizeToken, "POST", "/v1/workers/complete", apitype.CompleteRequest{TaskToken: b[0].TaskToken, Outcome: "success", Spawn: spawn}); code != http.StatusForbidden {
		t.Fatalf("spawn without the submit grant: %d %s, want 403", code, out)
	}
	bad := &apitype.Spawn{Jobs: []apitype.WorkflowJob{{SubmitRequest: apitype.SubmitRequest{JobKey: "rw-x", JobType: "resize"}, DependsOn: []apitype.DependencyRef{{JobKey: "rw-x"}}}}}
	if code, out := w.call(allToken, "POST", "/v1/workers/complete", apitype.CompleteRequest{TaskToken: b[0].TaskToken, Outcome: "success", Spawn: bad}); code != 400 || !strings.Contains(string(out), "spawn.jobs[0].depends_on[0]") {
		t.Fatalf("bad spawn: %d %s, want 400 naming spawn.jobs[0].depends_on[0]", code, out)
	}
	if code, out := w.call(submitToken, "POST", "/v1/workers/complete", apitype.CompleteRequest{TaskToken: b[0].TaskToken, Outcome: "success", Spawn: spawn}); code != 200 {
		t.Fatalf("complete b with spawn: %d %s", code, out)
	}
	m := w.fetch(allToken, "w1", []string{"resize"}, 5, 0)
	if len(m) != 2 {
		t.Fatalf("after the spawn: fetched %+v, want rw-m1 and rw-m2 (rw-r waits for both)", m)
	}
	for _, j := range m {
		if code, out := w.call(allToken, "POST", "/v1/workers/complete", apitype.CompleteRequest{TaskToken: j.TaskToken, Outcome: "success"}); code != 200 {
			t.Fatalf("complete %s: %d %s", j.JobKey, code, out)
		}
	}
	r := w.fetch(allToken, "w1", []string{"resize"}, 5, 0)
	if len(r) != 1 || r[0].JobKey != "rw-r" || len(r[0].Parents) != 3 {
		t.Fatalf("reducer: %+v, want rw-r with 3 parents (rw-b, rw-m1, rw-m2)", r)
	}
}
