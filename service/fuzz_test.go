package service_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jobq/jobq/service"
)

// FuzzDecodeSubmit feeds arbitrary bytes to the submit decoder and
// validator. Nothing may panic; every rejection is a *ValidationError whose
// message starts with the field it names; every acceptance is within the
// documented limits, with params a compact JSON object; and re-encoding an
// accepted request yields the same request hash (so a retried submit of
// the same request is recognised as the same job).
func FuzzDecodeSubmit(f *testing.F) {
	for _, s := range []string{
		`{"job_key":"k","job_type":"noop"}`,
		`{"job_key":"🙂","job_type":"noop","params":{"a":[1,{"b":null}]},"priority":7,"max_retry":0,"timeout_ms":5,"run_at":"2030-01-02T03:04:05.123456+09:00"}`,
		`{"job_key":"k","job_type":"noop","params":{"a":1,"a":2}}`,
		`{"job_key":"k","job_type":"noop","params":"{}"}`,
		`{"JOB_KEY":"k","job_type":"noop"}`,
		`{"job_key":"k","job_type":"noop"}{}`,
		`{"job_key":"a\ud800","job_type":"noop"}`,
		`{"job_key":"k","job_type":"noop","priority":1e400}`,
		"{\"job_key\":\"\xff\",\"job_type\":\"noop\"}",
		`[]`, ``, `null`, `{"params":{"x":"\u0000"}}`,
	} {
		f.Add([]byte(s))
	}
	svc := service.New(service.Options{KnownTypeFunc: func(typ string) bool { return typ == "noop" }})
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := service.DecodeSubmit(body)
		if err == nil {
			_, err = svc.ValidateSubmit(req)
		}
		if err != nil {
			var ve *service.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("rejection is %T %v, want *ValidationError", err, err)
			}
			if ve.Field == "" || !strings.HasPrefix(err.Error(), ve.Field+": ") {
				t.Fatalf("error %q does not name its field %q first", err, ve.Field)
			}
			return
		}
		p, _ := svc.ValidateSubmit(req)
		if n := utf8.RuneCountInString(p.JobKey); n < 1 || n > service.MaxJobKeyRunes || !utf8.ValidString(p.JobKey) {
			t.Fatalf("accepted job_key %q", p.JobKey)
		}
		if p.Priority < service.MinPriority || p.Priority > service.MaxPriority || p.MaxRetry < 0 || p.MaxRetry > service.MaxRetryLimit ||
			p.TimeoutMs < 0 || p.TimeoutMs > service.MaxTimeoutMs {
			t.Fatalf("accepted out-of-range numbers: %+v", p)
		}
		if len(p.Params) > service.MaxParamsBytes || !utf8.ValidString(p.Params) {
			t.Fatalf("accepted params of %d bytes", len(p.Params))
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(p.Params), &obj); err != nil {
			t.Fatalf("accepted params %q are not a JSON object: %v", p.Params, err)
		}
		if p.RunAt != nil && (p.RunAt.Location().String() != "UTC" || p.RunAt.Year() < 1970 || p.RunAt.Year() > 9999) {
			t.Fatalf("accepted run_at %v", p.RunAt)
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		req2, err := service.DecodeSubmit(again)
		if err != nil {
			t.Fatalf("re-encoded request %s rejected: %v", again, err)
		}
		p2, err := svc.ValidateSubmit(req2)
		if err != nil {
			t.Fatalf("re-encoded request %s rejected: %v", again, err)
		}
		if p2.RequestHash != p.RequestHash {
			t.Fatalf("request hash changed on re-encoding: %s → %s", body, again)
		}
	})
}
