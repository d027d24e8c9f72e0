package console_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/jobq/jobq/app"
)

// A workflow submitted through the API is listed and drawn by the console:
// one box per job, coloured and labelled by its state, linking to the job's
// page, and one line per edge. Bad workflows get a 400 naming the edge or
// the rule; a resubmit with another body a 409.
func TestWorkflowAPIAndConsolePage(t *testing.T) {
	t.Parallel()
	base := startReplica(t, app.Config{})
	post := func(body string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Post(base+"/v1/workflows", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		b, _ := json.Marshal(m)
		return resp, string(b)
	}
	for _, tc := range []struct {
		body, want string
	}{
		{`{"workflow_key":"c","jobs":[{"job_key":"a","job_type":"noop","depends_on":["b"]},{"job_key":"b","job_type":"noop","depends_on":["a"]}]}`, `is on a cycle`},
		{`{"workflow_key":"u","jobs":[{"job_key":"a","job_type":"noop","depends_on":["zz"]}]}`, `jobs[0].depends_on[0]`},
		{`{"workflow_key":"d","jobs":[{"job_key":"a","job_type":"noop"},{"job_key":"a","job_type":"noop"}]}`, `job keys must be distinct`},
		{`{"workflow_key":"p","jobs":[{"job_key":"a","job_type":"noop"},{"job_key":"b","job_type":"noop","depends_on":[{"job_key":"a","on_parent_failure":"maybe"}]}]}`, `on_parent_failure`},
		{`{"workflow_key":"x","jobs":[{"job_key":"a","job_type":"nope"}]}`, `jobs[0].job_type`},
		{`{"workflow_key":"","jobs":[{"job_key":"a","job_type":"noop"}]}`, `workflow_key`},
		{`{"workflow_key":"e","jobs":[]}`, `at least one job`},
	} {
		resp, body := post(tc.body)
		if resp.StatusCode != 400 || !strings.Contains(body, tc.want) {
			t.Fatalf("%s: %d %s, want 400 naming %q", tc.body, resp.StatusCode, body, tc.want)
		}
	}
	good := `{"workflow_key":"ci-1","jobs":[{"job_key":"build","job_type":"noop"},{"job_key":"test","job_type":"noop","depends_on":["build"]},{"job_key":"deploy","job_type":"noop","depends_on":[{"job_key":"test","on_parent_failure":"run"}]}]}`
	if resp, body := post(good); resp.StatusCode != 201 || !strings.Contains(body, `"status":"RUNNING"`) {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post(good); resp.StatusCode != 200 {
		t.Fatalf("same body again: %d, want 200", resp.StatusCode)
	}
	if resp, body := post(strings.Replace(good, `"noop"}`, `"sleep"}`, 1)); resp.StatusCode != 409 || !strings.Contains(body, "workflow_key") {
		t.Fatalf("other body: %d %s, want 409", resp.StatusCode, body)
	}
	resp, page := call(t, "GET", base+"/ui/workflows/ci-1", nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("workflow page: %d", resp.StatusCode)
	}
	for _, want := range []string{`<svg id="graph"`, `data-job="build" data-status="waiting"`, `data-job="test" data-status="blocked"`,
		`<line class="edge"`, `stroke-dasharray`, `href="/ui/jobs/`, `>BLOCKED<`} {
		if !strings.Contains(page, want) {
			t.Fatalf("workflow page lacks %q", want)
		}
	}
	if strings.Count(page, `<line class="edge"`) != 2 {
		t.Fatalf("workflow page draws %d edges, want 2", strings.Count(page, `<line class="edge"`))
	}
	if resp, list := call(t, "GET", base+"/ui/workflows", nil, nil); resp.StatusCode != 200 || !strings.Contains(list, `data-workflow="ci-1"`) {
		t.Fatalf("workflows page: %d", resp.StatusCode)
	}
	if resp, _ := call(t, "GET", base+"/ui/workflows/nope", nil, nil); resp.StatusCode != 404 {
		t.Fatalf("unknown workflow page: %d, want 404", resp.StatusCode)
	}
	// Cancel through the API: every job ends CANCELED.
	resp2, err := http.Post(base+"/v1/workflows/ci-1/cancel", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Status string
		Counts map[string]int
	}
	_ = json.NewDecoder(resp2.Body).Decode(&wf)
	resp2.Body.Close()
	if resp2.StatusCode != 200 || wf.Status != "CANCELED" || wf.Counts["CANCELED"] != 3 {
		t.Fatalf("cancel: %d %+v", resp2.StatusCode, wf)
	}
}
