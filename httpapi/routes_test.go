package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/jobq/jobq/apitype"
)

// A request no route answers gets the API's JSON error format, not
// ServeMux's plain text: 404 not_found for an unknown path, 405
// method_not_allowed with the Allow header (and the allowed methods in
// the message) for a known path asked with another method.
func TestHTTPUnroutedRequestsAnswerJSON(t *testing.T) {
	t.Parallel()
	a := startAPI(t)
	var job apitype.Job
	a.callJSON("POST", "/v1/jobs", `{"job_key":"k1","job_type":"noop"}`, http.StatusCreated, &job)
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
		want         apitype.ErrorDetail
	}{
		{"DELETE", "/v1/jobs/1", 405, "GET, HEAD", apitype.ErrorDetail{Code: "method_not_allowed", Field: "method",
			Message: "DELETE /v1/jobs/1: method not allowed; allowed: GET, HEAD"}},
		{"PUT", "/v1/jobs", 405, "GET, HEAD, POST", apitype.ErrorDetail{Code: "method_not_allowed", Field: "method",
			Message: "PUT /v1/jobs: method not allowed; allowed: GET, HEAD, POST"}},
		{"GET", "/v1/jobs/1/cancel", 405, "POST", apitype.ErrorDetail{Code: "method_not_allowed", Field: "method",
			Message: "GET /v1/jobs/1/cancel: method not allowed; allowed: POST"}},
		{"GET", "/v1/nosuch", 404, "", apitype.ErrorDetail{Code: "not_found",
			Message: "GET /v1/nosuch: no such route (the API is under /v1/, see docs/api.md)"}},
		{"POST", "/nosuch", 404, "", apitype.ErrorDetail{Code: "not_found",
			Message: "POST /nosuch: no such route (the API is under /v1/, see docs/api.md)"}},
	} {
		req, err := http.NewRequest(tc.method, a.srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := a.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var eb apitype.ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != tc.status || err != nil || eb.Error != tc.want ||
			resp.Header.Get("Allow") != tc.allow || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %q, Allow %q, decode err %v, error %+v; want %d application/json, Allow %q, %+v",
				tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Allow"), err, eb.Error,
				tc.status, tc.allow, tc.want)
		}
	}
	// The routed requests are untouched: the job is still there, WAITING or further.
	var got apitype.Job
	a.callJSON("GET", "/v1/jobs/1", "", http.StatusOK, &got)
	if got.ID != job.ID || got.JobKey != "k1" {
		t.Fatalf("GET /v1/jobs/1 = %+v, want job %d k1", got, job.ID)
	}
}
