package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// apiServer is the API over a real listener (httptest.Server), the service
// and a fresh database.
type apiServer struct {
	t   *testing.T
	srv *httptest.Server
	st  *store.Store
}

func startAPI(t *testing.T) *apiServer {
	t.Helper()
	st := testdb.Store(t)
	svc := service.New(service.Options{Store: st, KnownTypeFunc: func(typ string) bool { return typ == "noop" || typ == "sleep" }})
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	return &apiServer{t: t, srv: srv, st: st}
}

// call sends one request and returns the status and body.
func (a *apiServer) call(method, path, body string) (int, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.srv.Client().Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, out
}

// callJSON sends one request, checks the status and decodes the body into v.
func (a *apiServer) callJSON(method, path, body string, wantStatus int, v any) {
	a.t.Helper()
	code, out := a.call(method, path, body)
	if code != wantStatus {
		a.t.Fatalf("%s %s: status %d, want %d; body %.300s", method, path, code, wantStatus, out)
	}
	if v != nil {
		if err := json.Unmarshal(out, v); err != nil {
			a.t.Fatalf("%s %s: decode %q: %v", method, path, out, err)
		}
	}
}

// table returns a digest of job_queue (row count and a checksum over every
// column a request could change), to show a rejected request wrote nothing.
func (a *apiServer) table() string {
	a.t.Helper()
	var n int64
	var sum int64
	err := a.st.DB().QueryRow(`SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', id, job_key, status, retry_times,
		attempt, cancel_requested, run_at, update_time))), 0) FROM job_queue`).Scan(&n, &sum)
	if err != nil {
		a.t.Fatalf("digest job_queue: %v", err)
	}
	return fmt.Sprintf("%d rows, checksum %d", n, sum)
}

func (a *apiServer) count() int64 {
	a.t.Helper()
	var n int64
	if err := a.st.DB().QueryRow("SELECT COUNT(*) FROM job_queue").Scan(&n); err != nil {
		a.t.Fatalf("count job_queue: %v", err)
	}
	return n
}

// Every class of bad input gets its documented 4xx, an error naming the
// field, and writes nothing.
func TestHTTPBadInput(t *testing.T) {
	t.Parallel()
	a := startAPI(t)
	var done apitype.Job
	a.callJSON("POST", "/v1/jobs", `{"job_key":"done","job_type":"noop"}`, http.StatusCreated, &done)
	if _, err := a.st.DB().Exec("UPDATE job_queue SET status = 'SUCCESS', finished_at = NOW(6) WHERE id = ?", done.ID); err != nil {
		t.Fatalf("mark SUCCESS: %v", err)
	}
	var waiting apitype.Job
	a.callJSON("POST", "/v1/jobs", `{"job_key":"waiting","job_type":"noop"}`, http.StatusCreated, &waiting)

	ok := `"job_key":"k1","job_type":"noop"`
	cases := []struct {
		name         string
		method, path string
		body         string
		status       int
		field        string
		code         string
	}{
		{"bad JSON", "POST", "/v1/jobs", `{"job_key":"k1",`, 400, "body", "invalid_argument"},
		{"not JSON at all", "POST", "/v1/jobs", `job_key=k1`, 400, "body", "invalid_argument"},
		{"trailing object", "POST", "/v1/jobs", `{` + ok + `}{}`, 400, "body", "invalid_argument"},
		{"trailing garbage", "POST", "/v1/jobs", `{` + ok + `} x`, 400, "body", "invalid_argument"},
		{"unknown field", "POST", "/v1/jobs", `{` + ok + `,"colour":"red"}`, 400, "colour", "invalid_argument"},
		{"missing job_key", "POST", "/v1/jobs", `{"job_type":"noop"}`, 400, "job_key", "invalid_argument"},
		{"missing job_type", "POST", "/v1/jobs", `{"job_key":"k1"}`, 400, "job_type", "invalid_argument"},
		{"job_key 65 chars", "POST", "/v1/jobs", `{"job_key":"` + strings.Repeat("k", 65) + `","job_type":"noop"}`, 400, "job_key", "invalid_argument"},
		{"job_type 65 chars", "POST", "/v1/jobs", `{"job_key":"k1","job_type":"` + strings.Repeat("t", 65) + `"}`, 400, "job_type", "invalid_argument"},
		{"unregistered job_type", "POST", "/v1/jobs", `{"job_key":"k1","job_type":"nope"}`, 400, "job_type", "invalid_argument"},
		{"params array", "POST", "/v1/jobs", `{` + ok + `,"params":[1,2]}`, 400, "params", "invalid_argument"},
		{"params string", "POST", "/v1/jobs", `{` + ok + `,"params":"{}"}`, 400, "params", "invalid_argument"},
		{"params number", "POST", "/v1/jobs", `{` + ok + `,"params":42}`, 400, "params", "invalid_argument"},
		{"priority -1", "POST", "/v1/jobs", `{` + ok + `,"priority":-1}`, 400, "priority", "invalid_argument"},
		{"priority 1001", "POST", "/v1/jobs", `{` + ok + `,"priority":1001}`, 400, "priority", "invalid_argument"},
		{"priority a string", "POST", "/v1/jobs", `{` + ok + `,"priority":"5"}`, 400, "priority", "invalid_argument"},
		{"max_retry -1", "POST", "/v1/jobs", `{` + ok + `,"max_retry":-1}`, 400, "max_retry", "invalid_argument"},
		{"max_retry 101", "POST", "/v1/jobs", `{` + ok + `,"max_retry":101}`, 400, "max_retry", "invalid_argument"},
		{"timeout_ms negative", "POST", "/v1/jobs", `{` + ok + `,"timeout_ms":-1}`, 400, "timeout_ms", "invalid_argument"},
		{"run_at unparseable", "POST", "/v1/jobs", `{` + ok + `,"run_at":"next tuesday"}`, 400, "run_at", "invalid_argument"},
		{"run_at without offset", "POST", "/v1/jobs", `{` + ok + `,"run_at":"2030-01-02T15:04:05"}`, 400, "run_at", "invalid_argument"},
		{"get: id not a number", "GET", "/v1/jobs/abc", "", 400, "id", "invalid_argument"},
		{"get: id zero", "GET", "/v1/jobs/0", "", 400, "id", "invalid_argument"},
		{"get: id negative", "GET", "/v1/jobs/-3", "", 400, "id", "invalid_argument"},
		{"cancel: id not a number", "POST", "/v1/jobs/x1/cancel", "", 400, "id", "invalid_argument"},
		{"retry: id overflows", "POST", "/v1/jobs/18446744073709551616/retry", "", 400, "id", "invalid_argument"},
		{"executions: id not a number", "GET", "/v1/jobs/1.5/executions", "", 400, "id", "invalid_argument"},
		{"list: bad status", "GET", "/v1/jobs?status=DONE", "", 400, "status", "invalid_argument"},
		{"list: lower-case status", "GET", "/v1/jobs?status=waiting", "", 400, "status", "invalid_argument"},
		{"list: limit 0", "GET", "/v1/jobs?limit=0", "", 400, "limit", "invalid_argument"},
		{"list: limit 1001", "GET", "/v1/jobs?limit=1001", "", 400, "limit", "invalid_argument"},
		{"list: limit not a number", "GET", "/v1/jobs?limit=ten", "", 400, "limit", "invalid_argument"},
		{"list: cursor not a number", "GET", "/v1/jobs?cursor=abc", "", 400, "cursor", "invalid_argument"},
		{"list: cursor zero", "GET", "/v1/jobs?cursor=0", "", 400, "cursor", "invalid_argument"},
		{"list: unknown parameter", "GET", "/v1/jobs?order=asc", "", 400, "order", "invalid_argument"},
		{"body over the limit", "POST", "/v1/jobs", `{` + ok + `,"params":{"p":"` + strings.Repeat("x", httpapi.MaxBodyBytesDefault) + `"}}`,
			413, "body", "too_large"},
		{"retry a SUCCESS job", "POST", fmt.Sprintf("/v1/jobs/%d/retry", done.ID), "", 409, "status", "failed_precondition"},
		{"cancel a SUCCESS job", "POST", fmt.Sprintf("/v1/jobs/%d/cancel", done.ID), "", 409, "status", "failed_precondition"},
		{"retry a WAITING job", "POST", fmt.Sprintf("/v1/jobs/%d/retry", waiting.ID), "", 409, "status", "failed_precondition"},
		{"cancel an unknown id", "POST", "/v1/jobs/999999/cancel", "", 404, "", "not_found"},
		{"retry an unknown id", "POST", "/v1/jobs/999999/retry", "", 404, "", "not_found"},
		{"get an unknown id", "GET", "/v1/jobs/999999", "", 404, "", "not_found"},
		{"executions of an unknown id", "GET", "/v1/jobs/999999/executions", "", 404, "", "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &apiServer{t: t, srv: a.srv, st: a.st}
			before := a.table()
			code, body := a.call(c.method, c.path, c.body)
			if code != c.status {
				t.Fatalf("status = %d, want %d; body %.300s", code, c.status, body)
			}
			var eb apitype.ErrorBody
			if err := json.Unmarshal(body, &eb); err != nil {
				t.Fatalf("error body is not JSON: %v: %.300s", err, body)
			}
			if eb.Error.Field != c.field || eb.Error.Code != c.code {
				t.Fatalf("error field=%q code=%q, want %q %q (message %q)", eb.Error.Field, eb.Error.Code, c.field, c.code, eb.Error.Message)
			}
			if eb.Error.Message == "" {
				t.Fatalf("error has no message")
			}
			if after := a.table(); after != before {
				t.Fatalf("job_queue %s → %s: a rejected request wrote", before, after)
			}
		})
	}
	if n := a.count(); n != 2 {
		t.Fatalf("job_queue rows = %d, want the 2 fixtures", n)
	}
}

// The happy paths: create, idempotent resubmit, conflict, get, keyset
// pagination, cancel, retry, executions.
func TestHTTPHappyPaths(t *testing.T) {
	t.Parallel()
	a := startAPI(t)

	// 201 create, with Location.
	body := `{"job_key":"first","job_type":"sleep","params":{"ms":5,"tag":"x"},"priority":7,"max_retry":2,"timeout_ms":1000,"run_at":"2030-01-02T03:04:05+09:00"}`
	req, _ := http.NewRequest("POST", a.srv.URL+"/v1/jobs", strings.NewReader(body))
	resp, err := a.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created apitype.Job
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create status = %d, want 201", resp.StatusCode)
	}
	if loc, want := resp.Header.Get("Location"), fmt.Sprintf("/v1/jobs/%d", created.ID); loc != want {
		t.Fatalf("Location = %q, want %q", loc, want)
	}
	if created.JobKey != "first" || created.JobType != "sleep" || created.Status != jobq.StateScheduled ||
		created.Priority != 7 || created.MaxRetry != 2 || created.TimeoutMs != 1000 || created.Attempt != 0 ||
		string(created.Params) != `{"ms":5,"tag":"x"}` || !created.RunAt.Equal(mustTime(t, "2030-01-01T18:04:05Z")) {
		t.Fatalf("created job = %+v", created)
	}

	// 200: the same request again (params spelled differently) is the same job.
	var again apitype.Job
	a.callJSON("POST", "/v1/jobs", `{"job_type":"sleep","job_key":"first","params":{ "tag":"x", "ms":5 },"priority":7,"max_retry":2,"timeout_ms":1000,"run_at":"2030-01-01T18:04:05Z"}`,
		http.StatusOK, &again)
	if again.ID != created.ID {
		t.Fatalf("resubmit id = %d, want %d", again.ID, created.ID)
	}
	// 409: same key, different body.
	var conflict apitype.ErrorBody
	a.callJSON("POST", "/v1/jobs", `{"job_key":"first","job_type":"sleep","params":{"ms":6}}`, http.StatusConflict, &conflict)
	if conflict.Error.Field != "job_key" || conflict.Error.Code != "conflict" {
		t.Fatalf("conflict error = %+v, want field job_key code conflict", conflict.Error)
	}
	if n := a.count(); n != 1 {
		t.Fatalf("rows after resubmit and conflict = %d, want 1", n)
	}

	// get
	var got apitype.Job
	a.callJSON("GET", fmt.Sprintf("/v1/jobs/%d", created.ID), "", http.StatusOK, &got)
	if got.ID != created.ID || got.JobKey != "first" || got.Status != jobq.StateScheduled || !got.CreateTime.Equal(created.CreateTime) {
		t.Fatalf("get = %+v, want the created job", got)
	}

	// keyset pagination: 7 more jobs, pages of 3 → 3, 3, 2 (8 in all), newest first.
	ids := []uint64{created.ID}
	for i := range 7 {
		var j apitype.Job
		a.callJSON("POST", "/v1/jobs", fmt.Sprintf(`{"job_key":"page-%d","job_type":"noop"}`, i), http.StatusCreated, &j)
		ids = append(ids, j.ID)
	}
	var seen []uint64
	cursor := ""
	var sizes []int
	for page := 0; ; page++ {
		if page > 3 {
			t.Fatalf("more than 3 pages")
		}
		path := "/v1/jobs?limit=3"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var p apitype.ListPage
		a.callJSON("GET", path, "", http.StatusOK, &p)
		sizes = append(sizes, len(p.Jobs))
		for _, j := range p.Jobs {
			seen = append(seen, j.ID)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if fmt.Sprint(sizes) != "[3 3 2]" {
		t.Fatalf("page sizes = %v, want [3 3 2]", sizes)
	}
	want := make([]uint64, len(ids))
	for i, id := range ids {
		want[len(ids)-1-i] = id
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("listed ids = %v, want %v (newest first, each once)", seen, want)
	}
	var filtered apitype.ListPage
	a.callJSON("GET", "/v1/jobs?status=SCHEDULED&job_type=sleep", "", http.StatusOK, &filtered)
	if len(filtered.Jobs) != 1 || filtered.Jobs[0].ID != created.ID || filtered.NextCursor != "" {
		t.Fatalf("filtered list = %+v, want only job %d", filtered, created.ID)
	}

	// cancel SCHEDULED → CANCELED; retry CANCELED → WAITING.
	var canceled apitype.Job
	a.callJSON("POST", fmt.Sprintf("/v1/jobs/%d/cancel", created.ID), "", http.StatusOK, &canceled)
	if canceled.Status != jobq.StateCanceled || !canceled.CancelRequested || canceled.FinishedAt == nil {
		t.Fatalf("after cancel: status=%s cancel_requested=%v finished_at=%v, want CANCELED true set",
			canceled.Status, canceled.CancelRequested, canceled.FinishedAt)
	}
	var retried apitype.Job
	a.callJSON("POST", fmt.Sprintf("/v1/jobs/%d/retry", created.ID), "", http.StatusOK, &retried)
	if retried.Status != jobq.StateWaiting || retried.CancelRequested || retried.RetryTimes != 0 || retried.FinishedAt != nil {
		t.Fatalf("after retry: status=%s cancel_requested=%v retry_times=%d finished_at=%v, want WAITING false 0 nil",
			retried.Status, retried.CancelRequested, retried.RetryTimes, retried.FinishedAt)
	}

	// executions: none yet, then the attempts the database records.
	var ex struct {
		Executions []apitype.Execution `json:"executions"`
	}
	a.callJSON("GET", fmt.Sprintf("/v1/jobs/%d/executions", created.ID), "", http.StatusOK, &ex)
	if ex.Executions == nil || len(ex.Executions) != 0 {
		t.Fatalf("executions = %#v, want an empty list", ex.Executions)
	}
	if _, err := a.st.DB().ExecContext(context.Background(), `INSERT INTO job_execution (job_id, attempt, owner, started_at, finished_at, outcome, error)
		VALUES (?, 1, 'r1', NOW(6), NOW(6), 'FAILED', 'boom'), (?, 2, 'r2', NOW(6), NULL, NULL, NULL)`, created.ID, created.ID); err != nil {
		t.Fatalf("insert executions: %v", err)
	}
	a.callJSON("GET", fmt.Sprintf("/v1/jobs/%d/executions", created.ID), "", http.StatusOK, &ex)
	if len(ex.Executions) != 2 || ex.Executions[0].Attempt != 1 || ex.Executions[0].Owner != "r1" || ex.Executions[0].Outcome != "FAILED" ||
		ex.Executions[0].Error != "boom" || ex.Executions[1].Attempt != 2 || ex.Executions[1].FinishedAt != nil {
		t.Fatalf("executions = %+v", ex.Executions)
	}

	// /healthz and /readyz.
	a.callJSON("GET", "/healthz", "", http.StatusOK, nil)
	a.callJSON("GET", "/readyz", "", http.StatusOK, nil)
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}
