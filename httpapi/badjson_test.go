package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jobq/jobq/apitype"
)

// A body that is not JSON says so, and where: encoding/json's own words
// ("body: must be a JSON object: EOF", "invalid character 'o' in literal
// null (expecting 'u')") left the caller guessing. Still a 400 naming body
// (or jobs, inside a batch's array), and nothing is written.
func TestHTTPBadJSONMessages(t *testing.T) {
	t.Parallel()
	a := startAPI(t)
	many := `{"jobs":[` + strings.TrimSuffix(strings.Repeat(`{"job_key":"k","job_type":"noop"},`, apitype.MaxBatchJobs+234), ",") + `]}`
	for _, tc := range []struct{ path, body, field, message string }{
		{"/v1/jobs", `{`, "body", "body: not valid JSON: unexpected end of input"},
		{"/v1/jobs", `{"job_key":"k1",`, "body", "body: not valid JSON: unexpected end of input"},
		{"/v1/jobs", `{"job_key":"k1","params":{"ms":`, "body", "body: not valid JSON: unexpected end of input"},
		{"/v1/jobs", `no`, "body", "body: not valid JSON at byte 2: invalid character 'o' in literal null (expecting 'u')"},
		{"/v1/jobs", `job_key=k1`, "body", "body: not valid JSON at byte 1: invalid character 'j' looking for beginning of value"},
		{"/v1/jobs", `{"job_key":"k1",}`, "body", "body: not valid JSON at byte 17: invalid character '}' looking for beginning of object key string"},
		{"/v1/jobs", ``, "body", "body: is empty; must be a JSON object"},
		{"/v1/jobs:batch", `{"jobs":[`, "jobs", "jobs: must be a JSON array of submit objects; not valid JSON: unexpected end of input"},
		{"/v1/jobs:batch", `no`, "body", `body: not valid JSON at byte 2: invalid character 'o' in literal null (expecting 'u'); must be a JSON object {"jobs": [ … ]}`},
		{"/v1/jobs:batch", `[]`, "body", `body: must be a JSON object {"jobs": [ … ]}, got an array`},
		{"/v1/jobs:batch", many, "jobs", "jobs: must hold at most 1000 jobs, got 1234"},
	} {
		before := a.table()
		var eb apitype.ErrorBody
		a.callJSON("POST", tc.path, tc.body, http.StatusBadRequest, &eb)
		if eb.Error.Code != "invalid_argument" || eb.Error.Field != tc.field || eb.Error.Message != tc.message {
			t.Errorf("POST %s %.40q: error %+v, want invalid_argument on %s: %q", tc.path, tc.body, eb.Error, tc.field, tc.message)
		}
		if after := a.table(); after != before {
			t.Errorf("POST %s %.40q: table changed: %s → %s", tc.path, tc.body, before, after)
		}
	}
}
