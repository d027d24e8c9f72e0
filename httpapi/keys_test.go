package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jobq/jobq/apitype"
)

// A keyed submit is shown with its key (PARKED while its key is full); a
// bad key or limit is 400 naming the field and its rule, and writes
// nothing; the key and limit are part of the request hash.
func TestSubmitConcurrencyKey(t *testing.T) {
	t.Parallel()
	a := startBuiltinAPI(t)
	var first, second apitype.Job
	a.callJSON("POST", "/v1/jobs", `{"job_key":"a","job_type":"noop","concurrency_key":"device-1"}`, 201, &first)
	a.callJSON("POST", "/v1/jobs", `{"job_key":"b","job_type":"noop","concurrency_key":"device-1","concurrency_limit":1}`, 201, &second)
	if first.ConcurrencyKey != "device-1" || first.Status != "WAITING" || second.Status != "PARKED" {
		t.Fatalf("submits: %s %q, %s %q; want WAITING and PARKED with key device-1", first.Status, first.ConcurrencyKey, second.Status, second.ConcurrencyKey)
	}
	var got apitype.Job
	a.callJSON("GET", "/v1/jobs/"+jsonID(second.ID), "", 200, &got)
	if got.ConcurrencyKey != "device-1" {
		t.Fatalf("GET shows concurrency_key %q, want device-1", got.ConcurrencyKey)
	}
	a.callJSON("POST", "/v1/jobs", `{"job_key":"a","job_type":"noop","concurrency_key":"device-1"}`, 200, nil)
	a.callJSON("POST", "/v1/jobs", `{"job_key":"a","job_type":"noop","concurrency_key":"device-2"}`, 409, nil)
	a.callJSON("POST", "/v1/jobs", `{"job_key":"a","job_type":"noop","concurrency_key":"device-1","concurrency_limit":2}`, 409, nil)
	a.expectRefused(t, []refusal{
		{`{"job_key":"x","job_type":"noop","concurrency_key":"` + strings.Repeat("k", 129) + `"}`, "concurrency_key", "must be 1–128 characters, got 129"},
		{`{"job_key":"x","job_type":"noop","concurrency_key":" k"}`, "concurrency_key", "must not start or end with whitespace"},
		{`{"job_key":"x","job_type":"noop","concurrency_key":"k","concurrency_limit":0}`, "concurrency_limit", "must be an integer in [1, 1000], got 0"},
		{`{"job_key":"x","job_type":"noop","concurrency_key":"k","concurrency_limit":1001}`, "concurrency_limit", "must be an integer in [1, 1000], got 1001"},
		{`{"job_key":"x","job_type":"noop","concurrency_limit":2}`, "concurrency_limit", "is allowed only with a concurrency_key"},
		{`{"job_key":"x","job_type":"noop","concurrency_key":7}`, "concurrency_key", "must be a JSON string of 1–128 characters"},
	})
}

// A submit's rate key is stored and shown, is part of the request hash,
// and a bad one is 400 naming rate_key and its rule, writing nothing.
func TestSubmitRateKey(t *testing.T) {
	t.Parallel()
	a := startBuiltinAPI(t)
	var first, got apitype.Job
	a.callJSON("POST", "/v1/jobs", `{"job_key":"a","job_type":"noop","rate_key":"account-1"}`, 201, &first)
	a.callJSON("GET", "/v1/jobs/"+jsonID(first.ID), "", 200, &got)
	if first.RateKey != "account-1" || got.RateKey != "account-1" {
		t.Fatalf("submit shows rate_key %q, GET %q; want account-1", first.RateKey, got.RateKey)
	}
	a.callJSON("POST", "/v1/jobs", `{"job_key":"a","job_type":"noop","rate_key":"account-1"}`, 200, nil)
	a.callJSON("POST", "/v1/jobs", `{"job_key":"a","job_type":"noop","rate_key":"account-2"}`, 409, nil)
	a.callJSON("POST", "/v1/jobs", `{"job_key":"a","job_type":"noop"}`, 409, nil)
	a.expectRefused(t, []refusal{
		{`{"job_key":"x","job_type":"noop","rate_key":"` + strings.Repeat("k", 129) + `"}`, "rate_key", "must be 1–128 characters, got 129"},
		{`{"job_key":"x","job_type":"noop","rate_key":"k\n"}`, "rate_key", "must not contain control characters"},
		{`{"job_key":"x","job_type":"noop","rate_key":7}`, "rate_key", "must be a JSON string of 1–128 characters"},
	})
}

// refusal is a submit body and the field and rule its 400 must name.
type refusal struct{ body, field, rule string }

// expectRefused submits each body: 400 naming its field and rule, and
// nothing written.
func (a *apiServer) expectRefused(t *testing.T, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		before := a.table()
		var body apitype.ErrorBody
		a.callJSON("POST", "/v1/jobs", tc.body, 400, &body)
		if body.Error.Field != tc.field || !strings.Contains(body.Error.Message, tc.rule) {
			t.Errorf("%s: 400 %s %q, want field %s with %q", tc.body, body.Error.Field, body.Error.Message, tc.field, tc.rule)
		}
		if after := a.table(); after != before {
			t.Errorf("%s: the refused submit wrote: %s → %s", tc.body, before, after)
		}
	}
}

func jsonID(id uint64) string { b, _ := json.Marshal(id); return string(b) }
