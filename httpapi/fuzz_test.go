package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/httpapi"
)

// FuzzSubmitHandler posts arbitrary bodies to POST /v1/jobs on a real
// database. The answer is always 201, 200, 400, 409 or 413 (never 5xx);
// every 4xx is a JSON error naming its field first and writes no row; a
// 201 writes exactly one.
func FuzzSubmitHandler(f *testing.F) {
	for _, c := range badRequests() {
		if c.method == "" && len(c.body) < 4096 {
			f.Add([]byte(c.body))
		}
	}
	f.Add([]byte(`{"job_key":"fz","job_type":"noop","params":{"a":"🙂"}}`))
	f.Add([]byte(`{"job_key":"fz","job_type":"noop","params":{"a":"other"}}`))
	f.Add([]byte(`{"job_key":"fz2","job_type":"sleep","priority":3,"run_at":"2030-01-02T03:04:05Z"}`))
	h, st := newRobustAPI(f, httpapi.Options{MaxBodyBytes: 64 << 10})
	f.Fuzz(func(t *testing.T, body []byte) {
		before := jobRows(t, st)
		rec := do(h, "POST", "/v1/jobs", body, nil)
		after := jobRows(t, st)
		switch rec.Code {
		case http.StatusCreated:
			if after != before+1 {
				t.Fatalf("201 changed job_queue rows %d → %d", before, after)
			}
			return
		case http.StatusOK:
		case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge:
			var eb apitype.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil {
				t.Fatalf("%d body is not a JSON error: %q", rec.Code, rec.Body.String())
			}
			if eb.Error.Field == "" || !strings.HasPrefix(eb.Error.Message, eb.Error.Field+":") {
				t.Fatalf("%d error does not name its field first: %+v", rec.Code, eb.Error)
			}
		default:
			t.Fatalf("status %d for body %q: %s", rec.Code, body, rec.Body.String())
		}
		if after != before {
			t.Fatalf("status %d changed job_queue rows %d → %d", rec.Code, before, after)
		}
	})
}
