package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/service"
)

type submitted struct {
	ID     uint64          `json:"id"`
	JobKey string          `json:"job_key"`
	Params json.RawMessage `json:"params"`
}

func submitOK(t *testing.T, h http.Handler, body string) submitted {
	t.Helper()
	rec := do(h, "POST", "/v1/jobs", []byte(body), nil)
	if rec.Code != http.StatusCreated {
		t.Fatalf("submit: status %d: %.300s", rec.Code, rec.Body.String())
	}
	var j submitted
	if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

func getJob(t *testing.T, h http.Handler, id uint64) submitted {
	t.Helper()
	rec := do(h, "GET", fmt.Sprintf("/v1/jobs/%d", id), nil, nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("get %d: status %d: %s", id, rec.Code, rec.Body.String())
	}
	var j submitted
	if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestEncodingsRoundTrip submits keys and params holding 4-byte UTF-8,
// escaped NUL and control characters, unpaired surrogate escapes, quotes,
// backslashes and SQL, and reads them back from the database byte for byte.
func TestEncodingsRoundTrip(t *testing.T) {
	h, st := newRobustAPI(t, httpapi.Options{})
	cases := []struct{ key, params string }{
		{strings.Repeat("🙂", service.MaxJobKeyRunes), `{}`},
		{"emoji-𝄞-👍🏽", `{"emoji":"🙂👍🏽𝄞","cjk":"日本語","rtl":"עברית"}`},
		{"nul-escape", `{"nul":"a\u0000b","ctl":"\u001f\u007f","tab":"\t"}`},
		{"surrogates", `{"lone":"\ud800","pair":"\ud83d\ude42","low":"\udfff"}`},
		{"quotes", `{"q":"\"'` + "`" + `","bs":"\\\\","sql":"'); DROP TABLE job_queue; --"}`},
		{`k'); DROP TABLE job_queue; --`, `{}`},
		{`k\'; DELETE FROM job_queue; #`, `{"a":"\\'"}`},
		{"nested", `{"a":[1,2.5e10,-0,true,false,null,{"b":{}}],"":""}`},
	}
	for _, c := range cases {
		body := `{"job_key":` + mustJSON(c.key) + `,"job_type":"noop","params":` + c.params + `}`
		j := submitOK(t, h, body)
		got := getJob(t, h, j.ID)
		if got.JobKey != c.key {
			t.Errorf("job_key %q came back as %q", c.key, got.JobKey)
		}
		if !bytes.Equal(got.Params, []byte(c.params)) {
			t.Errorf("params %s came back as %s", c.params, got.Params)
		}
	}
	if n := jobRows(t, st); n != len(cases) {
		t.Fatalf("job_queue has %d rows, want %d (SQL in a value must stay data)", n, len(cases))
	}
	// U+2028 and U+2029 come back escaped by encoding/json: the same JSON
	// value, byte for byte once decoded.
	raw := "{\"ls\":\"a\u2028b\u2029c\"}"
	j := submitOK(t, h, `{"job_key":"u2028","job_type":"noop","params":`+raw+`}`)
	var want, got any
	_ = json.Unmarshal([]byte(raw), &want)
	if err := json.Unmarshal(getJob(t, h, j.ID).Params, &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("U+2028 params: got %v (%v), want %v", got, err, want)
	}
}

// TestLargeParamsRoundTrip submits params of exactly service.MaxParamsBytes
// (1,000,000 bytes) through the default 1 MiB body limit and reads them back.
func TestLargeParamsRoundTrip(t *testing.T) {
	h, _ := newRobustAPI(t, httpapi.Options{})
	var sb strings.Builder
	sb.WriteString(`{"blob":"`)
	for sb.Len() < service.MaxParamsBytes-len(`🙂"}`)-64 {
		sb.WriteString("0123456789abcdef🙂")
	}
	sb.WriteString(strings.Repeat("x", service.MaxParamsBytes-sb.Len()-2))
	sb.WriteString(`"}`)
	params := sb.String()
	if len(params) != service.MaxParamsBytes {
		t.Fatalf("built %d bytes, want %d", len(params), service.MaxParamsBytes)
	}
	j := submitOK(t, h, `{"job_key":"big","job_type":"noop","params":`+params+`}`)
	if got := getJob(t, h, j.ID); string(got.Params) != params {
		t.Fatalf("1 MB params came back as %d bytes, differing", len(got.Params))
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
