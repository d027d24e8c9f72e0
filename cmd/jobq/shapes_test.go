package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
)

// `jobq stats` says what its recent counts are: a job that failed once and
// then succeeded is one SUCCESS job in the status table and two attempts
// finished (FAILED 1, SUCCESS 1) — labelled as attempts, every outcome
// listed. `jobq executions -o json` has the API's shape,
// {"executions":[…]}, as `jobq list -o json` has {"jobs":[…]}.
func TestStatsAndExecutionsOutputShapes(t *testing.T) {
	r, c := startReplica(t, nil)
	srv := "--server=http://" + r.Addr
	mr := 1
	job := submitJob(t, c, apitype.SubmitRequest{JobKey: "flaky-once", JobType: "flaky",
		Params: json.RawMessage(`{"failures":1}`), MaxRetry: &mr})
	awaitJob(t, c, job.ID, jobq.StateSuccess, 30*time.Second)

	out := mustCLI(t, "stats", "-o", "table", srv)
	if !strings.Contains(out, "attempts finished 2 ") || !strings.Contains(out, "by outcome [FAILED 1, SUCCESS 1]") {
		t.Errorf("stats table does not count attempts as attempts:\n%s", out)
	}
	if strings.Contains(out, ", finished 2") {
		t.Errorf("stats table still says \"finished\" for attempts:\n%s", out)
	}

	var ex map[string][]apitype.Execution
	out = mustCLI(t, "executions", "-o", "json", srv, strconv.FormatUint(job.ID, 10))
	if err := json.Unmarshal([]byte(out), &ex); err != nil || len(ex["executions"]) != 2 || len(ex) != 1 {
		t.Errorf("executions -o json = %s (err %v), want {\"executions\":[2 attempts]}", out, err)
	}
	var list map[string]json.RawMessage
	out = mustCLI(t, "list", "-o", "json", srv)
	if err := json.Unmarshal([]byte(out), &list); err != nil || list["jobs"] == nil {
		t.Errorf("list -o json = %s (err %v), want {\"jobs\":[…]}", out, err)
	}
}
