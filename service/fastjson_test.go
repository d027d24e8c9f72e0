package service

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

var fastJSONSeeds = []string{
	`{"job_key":"k","job_type":"noop"}`,
	` { "job_key" : "k" , "job_type":"noop", "params" : {"a":[1,{"b":null}],"c":"x\"y"} , "priority":7,"max_retry":0,"timeout_ms":5,"run_at":"2030-01-02T03:04:05Z" } `,
	`{"job_key":"k","job_type":"noop","job_key":"k"}`,
	`{"job_key":"k","job_type":"noop","params":{"a":1,"a":2}}`,
	`{"job_key":"k","job_type":"noop","params":{"a":{"a":1},"b":[{"a":1},{"a":2}]}}`,
	`{"job_key":"k","job_type":"noop","params":{"a":1,"\u0061":2}}`,
	`{"job\u005fkey":"k","job_type":"noop"}`,
	`{"JOB_KEY":"k","job_type":"noop"}`,
	`{"job_key":"k","job_type":"noop"}{}`,
	`{"job_key":"k","job_type":"noop"} x`,
	`{"job_key":"k\"","job_type":"noop","params":{"k\"":1,"k\\":2}}`,
	`{}`, `[]`, ``, `null`, `"{}"`, `{"params":{}}`, `{"params":[]}`, `{"params":{"":1,"":2}}`,
	`{"params":` + strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100) + `}`,
	`{"params":` + strings.Repeat(`{"a":`, 101) + `1` + strings.Repeat(`}`, 101) + `}`,
}

// The fast pre-checks accept only what the token walks accept (they are
// only ever allowed to skip a walk that would have passed).
func FuzzFastJSONAgreesWithTokenWalk(f *testing.F) {
	for _, s := range fastJSONSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return
		}
		if plainSubmitObject(body) {
			if err := checkSubmitObject(body); err != nil {
				t.Fatalf("plainSubmitObject accepts %q, the token walk says %v", body, err)
			}
		}
		var buf bytes.Buffer
		if json.Compact(&buf, body) == nil && plainParamsShape(buf.Bytes()) {
			if err := checkParamsShapeTokens(buf.Bytes()); err != nil {
				t.Fatalf("plainParamsShape accepts %q, the token walk says %v", buf.Bytes(), err)
			}
		}
	})
}

// The fast pre-checks do take the common case (else they only cost).
func TestFastJSONTakesPlainRequests(t *testing.T) {
	for _, s := range []string{fastJSONSeeds[0], fastJSONSeeds[1], `{}`, `{"params":{}}`, fastJSONSeeds[19]} {
		if !plainSubmitObject([]byte(s)) {
			t.Errorf("plainSubmitObject(%s) = false, want true", s)
		}
	}
	for _, s := range []string{`{}`, `{"n":1}`, `{"a":[1,{"b":null}],"c":"x\"y","d":{"a":1}}`, `[{"a":1},{"a":2}]`} {
		if !plainParamsShape([]byte(s)) {
			t.Errorf("plainParamsShape(%s) = false, want true", s)
		}
	}
	for _, s := range []string{`{"a":1,"a":2}`, `{"x":{"a":1,"b":2,"a":3}}`, strings.Repeat(`[`, 101) + strings.Repeat(`]`, 101)} {
		if plainParamsShape([]byte(s)) {
			t.Errorf("plainParamsShape(%s) = true, want false", s)
		}
	}
}
