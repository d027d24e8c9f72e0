package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jobq/jobq/apitype"
)

// POST /v1/jobs:batch answers each job as POST /v1/jobs would have, at its
// index, and writes exactly the created jobs.
func TestHTTPSubmitBatch(t *testing.T) {
	t.Parallel()
	a := startAPI(t)
	var first apitype.Job
	a.callJSON("POST", "/v1/jobs", `{"job_key":"pre-1","job_type":"noop","params":{"n":1}}`, http.StatusCreated, &first)
	var pre2 apitype.Job
	a.callJSON("POST", "/v1/jobs", `{"job_key":"pre-2","job_type":"noop","params":{"n":2}}`, http.StatusCreated, &pre2)

	body := `{"jobs":[
		{"job_key":"b-0","job_type":"noop","params":{"a":1}},
		{"job_key":"pre-1","job_type":"noop","params":{"n":1}},
		{"job_key":"pre-2","job_type":"noop","params":{"n":3}},
		{"job_key":"b-3","job_type":"nope"},
		{"job_key":"b-4","job_type":"noop","priority":5000},
		{"job_key":"b-0","job_type":"noop","params":{ "a" : 1 }},
		{"job_key":"b-0","job_type":"noop","params":{"a":2}},
		{"job_key":"b-7","job_type":"sleep","params":{"ms":5},"run_at":"2030-01-02T03:04:05Z","max_retry":7},
		{"JOB_KEY":"b-8","job_type":"noop"}
	]}`
	var resp apitype.SubmitBatchResponse
	a.callJSON("POST", "/v1/jobs:batch", body, http.StatusOK, &resp)
	if len(resp.Results) != 9 {
		t.Fatalf("results = %d, want 9: %+v", len(resp.Results), resp.Results)
	}
	var b0, b7 apitype.Job
	a.callJSON("GET", fmt.Sprintf("/v1/jobs/%d", resp.Results[0].ID), "", http.StatusOK, &b0)
	a.callJSON("GET", fmt.Sprintf("/v1/jobs/%d", resp.Results[7].ID), "", http.StatusOK, &b7)
	if b0.JobKey != "b-0" || string(b0.Params) != `{"a":1}` || b0.Status != "WAITING" {
		t.Fatalf("b-0 = %+v", b0)
	}
	if b7.JobKey != "b-7" || b7.JobType != "sleep" || b7.MaxRetry != 7 || b7.Status != "SCHEDULED" || b7.RunAt.Format("2006-01-02T15:04:05Z07:00") != "2030-01-02T03:04:05Z" {
		t.Fatalf("b-7 = %+v", b7)
	}
	want := []string{
		fmt.Sprintf("created %d", b0.ID),
		fmt.Sprintf("existing %d", first.ID),
		fmt.Sprintf("conflict %d job_key", pre2.ID),
		"invalid 0 job_type",
		"invalid 0 priority",
		fmt.Sprintf("existing %d", b0.ID),
		fmt.Sprintf("conflict %d job_key", b0.ID),
		fmt.Sprintf("created %d", b7.ID),
		`invalid 0 JOB_KEY`,
	}
	for i, r := range resp.Results {
		got := fmt.Sprintf("%s %d", r.Status, r.ID)
		if r.Error != nil {
			got += " " + r.Error.Field
		}
		if got != want[i] {
			t.Errorf("result %d = %q, want %q (%+v)", i, got, want[i], r.Error)
		}
	}
	if resp.Created != 2 || resp.Existing != 2 || resp.Conflict != 2 || resp.Invalid != 3 {
		t.Fatalf("counts created=%d existing=%d conflict=%d invalid=%d, want 2 2 2 3", resp.Created, resp.Existing, resp.Conflict, resp.Invalid)
	}
	if n := scalarInt(t, a, "SELECT COUNT(*) FROM job_queue"); n != 4 {
		t.Fatalf("jobs in the table = %d, want 4 (2 before, 2 created)", n)
	}

	// Re-sending the same batch creates nothing: every created job is now existing.
	var again apitype.SubmitBatchResponse
	a.callJSON("POST", "/v1/jobs:batch", body, http.StatusOK, &again)
	if again.Created != 0 || again.Existing != 4 || again.Conflict != 2 || again.Invalid != 3 {
		t.Fatalf("resend counts created=%d existing=%d conflict=%d invalid=%d, want 0 4 2 3", again.Created, again.Existing, again.Conflict, again.Invalid)
	}
	if again.Results[0].ID != b0.ID || again.Results[7].ID != b7.ID {
		t.Fatalf("resend ids %d %d, want %d %d", again.Results[0].ID, again.Results[7].ID, b0.ID, b7.ID)
	}
}

// A bad envelope is refused as a whole (400 naming the field) and writes nothing.
func TestHTTPSubmitBatchBadEnvelope(t *testing.T) {
	t.Parallel()
	a := startAPI(t)
	many := `{"jobs":[` + strings.TrimSuffix(strings.Repeat(`{"job_key":"k","job_type":"noop"},`, apitype.MaxBatchJobs+1), ",") + `]}`
	for _, tc := range []struct{ name, body, field string }{
		{"empty body", ``, "body"},
		{"array", `[]`, "body"},
		{"no jobs", `{}`, "jobs"},
		{"empty jobs", `{"jobs":[]}`, "jobs"},
		{"jobs not an array", `{"jobs":{}}`, "jobs"},
		{"unknown field", `{"jobs":[],"x":1}`, "x"},
		{"unknown field first", `{"x":1}`, "x"},
		{"too many", many, "jobs"},
		{"trailing", `{"jobs":[{"job_key":"k","job_type":"noop"}]} {}`, "body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := a.table()
			var eb apitype.ErrorBody
			a.callJSON("POST", "/v1/jobs:batch", tc.body, http.StatusBadRequest, &eb)
			if eb.Error.Field != tc.field || eb.Error.Code != "invalid_argument" {
				t.Fatalf("error = %+v, want invalid_argument on %q", eb.Error, tc.field)
			}
			if after := a.table(); after != before {
				t.Fatalf("table changed: %s → %s", before, after)
			}
		})
	}
}

func scalarInt(t *testing.T, a *apiServer, q string) int64 {
	t.Helper()
	var n int64
	if err := a.st.DB().QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
