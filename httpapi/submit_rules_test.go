package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/service"
	testbedtypes "github.com/jobq/jobq/testbed/jobtypes"
)

// startBuiltinAPI is the API with the built-in job types registered and
// their params checked at submit, as `jobq serve` runs it.
func startBuiltinAPI(t *testing.T) *apiServer {
	t.Helper()
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	if err := testbedtypes.RegisterTestbed(context.Background(), reg, st.DB()); err != nil {
		t.Fatal(err)
	}
	svc := service.New(service.Options{Store: st, KnownTypeFunc: func(typ string) bool { _, ok := reg.Lookup(typ); return ok },
		ValidateParamsFunc: reg.ValidateParams})
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	return &apiServer{t: t, srv: srv, st: st}
}

// A re-submit of a job_key is the same job (200) only when every field
// that shapes the job is the same: run_at, max_retry and timeout_ms each
// count (409), and run_at is compared as an instant (another UTC offset
// for the same instant is 200).
func TestIdempotencyHashCoversEveryField(t *testing.T) {
	t.Parallel()
	a := startBuiltinAPI(t)
	const first = `{"job_key":"k","job_type":"noop","params":{"a":1},"priority":3,"max_retry":2,"timeout_ms":5000,"run_at":"2030-01-02T15:04:05.5+09:00"}`
	a.callJSON("POST", "/v1/jobs", first, 201, nil)
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"identical", first, 200},
		{"same instant, UTC", `{"job_key":"k","job_type":"noop","params":{"a":1},"priority":3,"max_retry":2,"timeout_ms":5000,"run_at":"2030-01-02T06:04:05.500Z"}`, 200},
		{"same instant, another offset", `{"job_key":"k","job_type":"noop","params":{"a":1},"priority":3,"max_retry":2,"timeout_ms":5000,"run_at":"2030-01-01T20:34:05.5-09:30"}`, 200},
		{"run_at one microsecond later", `{"job_key":"k","job_type":"noop","params":{"a":1},"priority":3,"max_retry":2,"timeout_ms":5000,"run_at":"2030-01-02T06:04:05.500001Z"}`, 409},
		{"run_at left out (due now)", `{"job_key":"k","job_type":"noop","params":{"a":1},"priority":3,"max_retry":2,"timeout_ms":5000}`, 409},
		{"max_retry", `{"job_key":"k","job_type":"noop","params":{"a":1},"priority":3,"max_retry":3,"timeout_ms":5000,"run_at":"2030-01-02T06:04:05.5Z"}`, 409},
		{"timeout_ms", `{"job_key":"k","job_type":"noop","params":{"a":1},"priority":3,"max_retry":2,"timeout_ms":5001,"run_at":"2030-01-02T06:04:05.5Z"}`, 409},
		{"priority", `{"job_key":"k","job_type":"noop","params":{"a":1},"priority":4,"max_retry":2,"timeout_ms":5000,"run_at":"2030-01-02T06:04:05.5Z"}`, 409},
		{"params", `{"job_key":"k","job_type":"noop","params":{"a":2},"priority":3,"max_retry":2,"timeout_ms":5000,"run_at":"2030-01-02T06:04:05.5Z"}`, 409},
	} {
		before := a.table()
		code, body := a.call("POST", "/v1/jobs", tc.body)
		if code != tc.want {
			t.Errorf("%s: status %d, want %d; body %.200s", tc.name, code, tc.want, body)
		}
		if after := a.table(); after != before {
			t.Errorf("%s: job_queue changed: %s → %s", tc.name, before, after)
		}
	}
}

// Built-in job types check their params at submit: a 400 names the field
// and its bound, and nothing is written (a sleep of 2^63-1 ms used to
// overflow into an instant success, 9223372036854 ms into a 292-year sleep).
func TestBuiltinParamsValidatedAtSubmit(t *testing.T) {
	t.Parallel()
	a := startBuiltinAPI(t)
	for _, tc := range []struct {
		typ, params, field, rule string
	}{
		{"sleep", `{"ms":9223372036854775807}`, "params.ms", "must be an integer in [0, 86400000] (milliseconds), got 9223372036854775807"},
		{"sleep", `{"ms":9223372036854}`, "params.ms", "must be an integer in [0, 86400000] (milliseconds), got 9223372036854"},
		{"sleep", `{"ms":-1}`, "params.ms", "must be an integer in [0, 86400000] (milliseconds), got -1"},
		{"sleep", `{"ms":1.5}`, "params.ms", "must be an integer in [0, 86400000] (milliseconds), got 1.5"},
		{"effect", `{"ms":"10"}`, "params.ms", `must be an integer in [0, 86400000] (milliseconds), got "10"`},
		{"flaky", `{"ms":10,"failures":1001}`, "params.failures", "must be an integer in [0, 1000], got 1001"},
	} {
		before := a.table()
		code, body := a.call("POST", "/v1/jobs", `{"job_key":"v","job_type":"`+tc.typ+`","params":`+tc.params+`}`)
		var e struct {
			Error struct {
				Field   string `json:"field"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || code != 400 || e.Error.Field != tc.field || e.Error.Message != tc.field+": "+tc.rule {
			t.Errorf("%s %s: status %d body %s; want 400 naming %s: %s", tc.typ, tc.params, code, body, tc.field, tc.rule)
		}
		if after := a.table(); after != before {
			t.Errorf("%s %s: job_queue changed: %s → %s", tc.typ, tc.params, before, after)
		}
	}
	for i, ok := range []string{`{"ms":86400000}`, `{"ms":0,"failures":0}`, `{}`} {
		a.callJSON("POST", "/v1/jobs", fmt.Sprintf(`{"job_key":"ok-%d","job_type":"flaky","params":%s}`, i, ok), 201, nil)
	}
}

// A built-in job type refuses a params field it does not read, with 400
// naming it, and writes nothing: `sleep {"millis":3000}` was accepted and
// slept 0 ms. noop reads nothing and carries any params.
func TestBuiltinParamsRefuseUnknownFields(t *testing.T) {
	t.Parallel()
	a := startBuiltinAPI(t)
	for _, tc := range []struct{ typ, params, field, rule string }{
		{"sleep", `{"millis":3000}`, "params.millis", "unknown field; this job type reads only ms"},
		{"sleep", `{"ms":5,"failures":1}`, "params.failures", "unknown field; this job type reads only ms"},
		{"flaky", `{"ms":5,"failure":2}`, "params.failure", "unknown field; this job type reads only ms, failures"},
		{"effect", `{"msec":5}`, "params.msec", "unknown field; this job type reads only ms"},
	} {
		before := a.table()
		code, body := a.call("POST", "/v1/jobs", `{"job_key":"u","job_type":"`+tc.typ+`","params":`+tc.params+`}`)
		var e struct {
			Error struct {
				Field   string `json:"field"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || code != 400 || e.Error.Field != tc.field || e.Error.Message != tc.field+": "+tc.rule {
			t.Errorf("%s %s: status %d body %s; want 400 naming %s: %s", tc.typ, tc.params, code, body, tc.field, tc.rule)
		}
		if after := a.table(); after != before {
			t.Errorf("%s %s: job_queue changed: %s → %s", tc.typ, tc.params, before, after)
		}
	}
	a.callJSON("POST", "/v1/jobs", `{"job_key":"n","job_type":"noop","params":{"anything":1}}`, 201, nil)
}
