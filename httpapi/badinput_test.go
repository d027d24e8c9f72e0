package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

// registeredTypes are the job types the robustness tests' API accepts.
var registeredTypes = map[string]bool{"noop": true, "sleep": true}

// newRobustAPI returns the API handler over a fresh database and its store.
func newRobustAPI(t testing.TB, opts httpapi.Options) (http.Handler, *store.Store) {
	t.Helper()
	st := testdb.Store(t)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	svc := service.New(service.Options{Store: st, KnownTypeFunc: func(typ string) bool { return registeredTypes[typ] }})
	return httpapi.New(svc, opts), st
}

func do(h http.Handler, method, path string, body []byte, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func jobRows(t testing.TB, st *store.Store) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRowContext(context.Background(), "SELECT COUNT(*) FROM job_queue").Scan(&n); err != nil {
		t.Fatalf("count job_queue: %v", err)
	}
	return n
}

func decodeError(t testing.TB, rec *httptest.ResponseRecorder) apitype.ErrorDetail {
	t.Helper()
	var eb apitype.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil {
		t.Fatalf("error body is not JSON: %v: %q", err, rec.Body.String())
	}
	return eb.Error
}

type badCase struct {
	name   string
	method string // default POST
	path   string // default /v1/jobs
	body   string
	status int    // default 400
	field  string // the field the error must name
}

func badRequests() []badCase {
	long := strings.Repeat("k", service.MaxJobKeyRunes+1)
	emoji65 := strings.Repeat("🙂", service.MaxJobKeyRunes+1)
	deep := strings.Repeat(`{"a":`, service.MaxParamsDepth+1) + "1" + strings.Repeat("}", service.MaxParamsDepth+1)
	bigParams := `{"p":"` + strings.Repeat("x", service.MaxParamsBytes-7+1) + `"}` // 1,000,001 bytes
	ok := `"job_key":"k1","job_type":"noop"`
	return []badCase{
		{name: "empty body", body: "", field: "body"},
		{name: "not JSON", body: "job_key=k1", field: "body"},
		{name: "array body", body: `[{"job_key":"k1","job_type":"noop"}]`, field: "body"},
		{name: "string body", body: `"k1"`, field: "body"},
		{name: "null body", body: `null`, field: "body"},
		{name: "truncated object", body: `{"job_key":"k1"`, field: "body"},
		{name: "two objects", body: `{` + ok + `}{}`, field: "body"},
		{name: "trailing garbage", body: `{` + ok + `} x`, field: "body"},
		{name: "invalid UTF-8", body: "{\"job_key\":\"k\xff\",\"job_type\":\"noop\"}", field: "body"},
		{name: "raw NUL in a string", body: "{\"job_key\":\"k\x00\",\"job_type\":\"noop\"}", field: "body"},
		{name: "unknown field", body: `{` + ok + `,"colour":"red"}`, field: "colour"},
		{name: "field in other case", body: `{"JOB_KEY":"k1","job_type":"noop"}`, field: "JOB_KEY"},
		{name: "field given twice", body: `{` + ok + `,"job_key":"k2"}`, field: "job_key"},
		{name: "job_key missing", body: `{"job_type":"noop"}`, field: "job_key"},
		{name: "job_key empty", body: `{"job_key":"","job_type":"noop"}`, field: "job_key"},
		{name: "job_key null", body: `{"job_key":null,"job_type":"noop"}`, field: "job_key"},
		{name: "job_key 65 characters", body: `{"job_key":"` + long + `","job_type":"noop"}`, field: "job_key"},
		{name: "job_key 65 emoji", body: `{"job_key":"` + emoji65 + `","job_type":"noop"}`, field: "job_key"},
		{name: "job_key newline", body: `{"job_key":"a\nb","job_type":"noop"}`, field: "job_key"},
		{name: "job_key escaped NUL", body: `{"job_key":"a\u0000b","job_type":"noop"}`, field: "job_key"},
		{name: "job_key lone surrogate", body: `{"job_key":"a\ud800b","job_type":"noop"}`, field: "job_key"},
		{name: "job_key leading space", body: `{"job_key":" k1","job_type":"noop"}`, field: "job_key"},
		{name: "job_key a number", body: `{"job_key":5,"job_type":"noop"}`, field: "job_key"},
		{name: "job_type missing", body: `{"job_key":"k1"}`, field: "job_type"},
		{name: "job_type unregistered", body: `{"job_key":"k1","job_type":"nope"}`, field: "job_type"},
		{name: "job_type an object", body: `{"job_key":"k1","job_type":{}}`, field: "job_type"},
		{name: "params an array", body: `{` + ok + `,"params":[1]}`, field: "params"},
		{name: "params a string", body: `{` + ok + `,"params":"{}"}`, field: "params"},
		{name: "params a number", body: `{` + ok + `,"params":1}`, field: "params"},
		{name: "params a boolean", body: `{` + ok + `,"params":true}`, field: "params"},
		{name: "params over 1 MB", body: `{` + ok + `,"params":` + bigParams + `}`, field: "params"},
		{name: "params repeated key", body: `{` + ok + `,"params":{"a":1,"a":2}}`, field: "params"},
		{name: "params nested too deep", body: `{` + ok + `,"params":` + deep + `}`, field: "params"},
		{name: "priority below range", body: `{` + ok + `,"priority":-1}`, field: "priority"},
		{name: "priority above range", body: `{` + ok + `,"priority":1001}`, field: "priority"},
		{name: "priority fractional", body: `{` + ok + `,"priority":1.5}`, field: "priority"},
		{name: "priority a string", body: `{` + ok + `,"priority":"5"}`, field: "priority"},
		{name: "priority overflows", body: `{` + ok + `,"priority":1e400}`, field: "priority"},
		{name: "max_retry below range", body: `{` + ok + `,"max_retry":-1}`, field: "max_retry"},
		{name: "max_retry above range", body: `{` + ok + `,"max_retry":101}`, field: "max_retry"},
		{name: "timeout_ms below range", body: `{` + ok + `,"timeout_ms":-1}`, field: "timeout_ms"},
		{name: "timeout_ms above range", body: `{` + ok + `,"timeout_ms":86400001}`, field: "timeout_ms"},
		{name: "run_at prose", body: `{` + ok + `,"run_at":"tomorrow"}`, field: "run_at"},
		{name: "run_at without offset", body: `{` + ok + `,"run_at":"2030-01-02T15:04:05"}`, field: "run_at"},
		{name: "run_at month 13", body: `{` + ok + `,"run_at":"2030-13-02T15:04:05Z"}`, field: "run_at"},
		{name: "run_at before 1970", body: `{` + ok + `,"run_at":"0999-01-02T15:04:05Z"}`, field: "run_at"},
		{name: "run_at a number", body: `{` + ok + `,"run_at":1767225600}`, field: "run_at"},
		{name: "unique_for_ms zero", body: `{` + ok + `,"unique_for_ms":0}`, field: "unique_for_ms"},
		{name: "unique_for_ms above 365 days", body: `{` + ok + `,"unique_for_ms":31536000001}`, field: "unique_for_ms"},
		{name: "unique_for_ms a string", body: `{` + ok + `,"unique_for_ms":"10m"}`, field: "unique_for_ms"},
		{name: "unique_while not active", body: `{` + ok + `,"unique_while":"forever"}`, field: "unique_while"},
		{name: "unique_while a boolean", body: `{` + ok + `,"unique_while":true}`, field: "unique_while"},
		{name: "body over 1 MiB", body: `{` + ok + `,"params":{"p":"` + strings.Repeat("x", httpapi.MaxBodyBytesDefault) + `"}}`,
			status: http.StatusRequestEntityTooLarge, field: "body"},
		{name: "list: bad status", method: "GET", path: "/v1/jobs?status=DONE", field: "status"},
		{name: "list: limit 0", method: "GET", path: "/v1/jobs?limit=0", field: "limit"},
		{name: "list: limit not a number", method: "GET", path: "/v1/jobs?limit=ten", field: "limit"},
		{name: "list: negative cursor", method: "GET", path: "/v1/jobs?cursor=-1", field: "cursor"},
		{name: "list: unknown parameter", method: "GET", path: "/v1/jobs?sort=asc", field: "sort"},
		{name: "list: status twice", method: "GET", path: "/v1/jobs?status=WAITING&status=FAILED", field: "status"},
		{name: "get: id not a number", method: "GET", path: "/v1/jobs/abc", field: "id"},
		{name: "get: id zero", method: "GET", path: "/v1/jobs/0", field: "id"},
		{name: "cancel: id overflows", method: "POST", path: "/v1/jobs/18446744073709551616/cancel", field: "id"},
	}
}

// TestBadRequests sends each bad request through the HTTP handler to a real
// database and checks the 4xx status, that the error names the field (in
// "field" and at the start of the message), and that no row was written.
func TestBadRequests(t *testing.T) {
	h, st := newRobustAPI(t, httpapi.Options{})
	cases := badRequests()
	if len(cases) < 25 {
		t.Fatalf("only %d bad requests; the table needs at least 25", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method, path, status := c.method, c.path, c.status
			if method == "" {
				method = "POST"
			}
			if path == "" {
				path = "/v1/jobs"
			}
			if status == 0 {
				status = http.StatusBadRequest
			}
			before := jobRows(t, st)
			rec := do(h, method, path, []byte(c.body), nil)
			if rec.Code != status {
				t.Fatalf("status = %d, want %d; body %.300s", rec.Code, status, rec.Body.String())
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			e := decodeError(t, rec)
			if e.Field != c.field {
				t.Errorf("field = %q, want %q (message %q)", e.Field, c.field, e.Message)
			}
			if !strings.HasPrefix(e.Message, c.field+":") {
				t.Errorf("message %q does not start by naming the field %q", e.Message, c.field)
			}
			if len(e.Message) > 2000 {
				t.Errorf("message is %d bytes; an error must not echo the whole input", len(e.Message))
			}
			if after := jobRows(t, st); after != before {
				t.Errorf("job_queue rows %d → %d: a rejected request wrote a row", before, after)
			}
		})
	}
	// The same handler still accepts a good request: the table did not pass
	// because everything fails.
	rec := do(h, "POST", "/v1/jobs", []byte(`{"job_key":"k1","job_type":"noop","priority":1000,"max_retry":100,"timeout_ms":86400000,"run_at":"1970-01-01T00:00:00Z"}`), nil)
	if rec.Code != http.StatusCreated {
		t.Fatalf("good request: status %d, body %s", rec.Code, rec.Body.String())
	}
	if n := jobRows(t, st); n != 1 {
		t.Fatalf("after the good request job_queue has %d rows, want 1", n)
	}
}

// TestBodyLimitConfigurable checks Options.MaxBodyBytes: a body one byte
// over the limit gets 413 and writes nothing; one at the limit is accepted.
func TestBodyLimitConfigurable(t *testing.T) {
	const limit = 1024
	h, st := newRobustAPI(t, httpapi.Options{MaxBodyBytes: limit})
	mk := func(size int) []byte {
		head := `{"job_key":"big","job_type":"noop","params":{"p":"`
		tail := `"}}`
		return []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
	}
	rec := do(h, "POST", "/v1/jobs", mk(limit+1), nil)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("body of %d bytes: status %d, want 413; %s", limit+1, rec.Code, rec.Body.String())
	}
	if e := decodeError(t, rec); e.Field != "body" || e.Code != "too_large" || !strings.Contains(e.Message, "1024 bytes") {
		t.Errorf("413 error = %+v, want field body, code too_large, the limit in the message", e)
	}
	if n := jobRows(t, st); n != 0 {
		t.Fatalf("413 wrote %d rows", n)
	}
	if rec := do(h, "POST", "/v1/jobs", mk(limit), nil); rec.Code != http.StatusCreated {
		t.Fatalf("body of exactly %d bytes: status %d, want 201; %s", limit, rec.Code, rec.Body.String())
	}
}

// A client that declares a body over the limit and waits for "100
// Continue" before sending it (curl does for bodies over 1 MiB) gets the 413
// at once: the server refuses on Content-Length, before any read. Reading
// first sent "100 Continue" and then closed the connection with the body
// unread, which such clients saw as a reset, not a 413. Single and batch
// submit (the ops API reads through the same readLimited).
func TestDeclaredOversizeBodyRefusedBeforeContinue(t *testing.T) {
	const limit = 1024
	h, st := newRobustAPI(t, httpapi.Options{MaxBodyBytes: limit})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, path := range []string{"/v1/jobs", "/v1/jobs:batch"} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		// The bound only keeps a broken build from hanging the suite.
		_ = conn.SetDeadline(time.Now().Add(time.Minute))
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", path, 64<<20)
		line, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if err != nil {
			t.Fatalf("%s: reading the answer: %v", path, err)
		}
		if !strings.HasPrefix(line, "HTTP/1.1 413") {
			t.Fatalf("%s: first answer line %q, want HTTP/1.1 413 before any 100 Continue", path, strings.TrimSpace(line))
		}
	}
	if n := jobRows(t, st); n != 0 {
		t.Fatalf("413 wrote %d rows", n)
	}
}

// A browser's cross-site POST (a text/plain form post, which needs no CORS
// preflight) is refused with 403 and writes nothing; the same body from a
// client that is not a browser, or from the same origin, is accepted.
func TestCrossOriginBrowserPostRefused(t *testing.T) {
	h, st := newRobustAPI(t, httpapi.Options{})
	body := []byte(`{"job_key":"csrf","job_type":"noop"}`)
	rec := do(h, "POST", "/v1/jobs", body, http.Header{"Content-Type": {"text/plain"}, "Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}})
	if rec.Code != http.StatusForbidden {
		t.Fatalf("cross-site browser POST: status %d, want 403; %s", rec.Code, rec.Body.String())
	}
	if e := decodeError(t, rec); e.Code != "forbidden" || e.Field != "Origin" {
		t.Fatalf("403 error = %+v, want code forbidden, field Origin", e)
	}
	if n := jobRows(t, st); n != 0 {
		t.Fatalf("the refused request wrote %d rows", n)
	}
	if rec := do(h, "POST", "/v1/jobs", body, http.Header{"Sec-Fetch-Site": {"same-origin"}}); rec.Code != http.StatusCreated {
		t.Fatalf("same-origin POST: status %d, want 201; %s", rec.Code, rec.Body.String())
	}
	if rec := do(h, "GET", "/v1/jobs", nil, http.Header{"Sec-Fetch-Site": {"cross-site"}}); rec.Code != http.StatusOK {
		t.Fatalf("cross-site GET: status %d, want 200", rec.Code)
	}
}
