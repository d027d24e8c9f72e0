package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/service"
)

// TestOpsRejectsRepeatedFieldsAndQuery: the operations routes must refuse a
// body field given twice (encoding/json would keep the last one silently), a
// query parameter given twice, a malformed query string, and an @every
// interval robfig/cron would silently change, and write nothing.
func TestOpsRejectsRepeatedFieldsAndQuery(t *testing.T) {
	st := testdb.Store(t)
	ops := service.NewOps(service.OpsOptions{Store: st, KnownTypeFunc: func(typ string) bool { return registeredTypes[typ] }})
	h := httpapi.New(service.New(service.Options{Store: st, KnownTypeFunc: func(typ string) bool { return registeredTypes[typ] }}), httpapi.Options{Ops: ops})
	periodicRows := func() int {
		var n int
		if err := st.DB().QueryRowContext(context.Background(), "SELECT COUNT(*) FROM periodic_job").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	cases := []badCase{
		{name: "periodic name twice", path: "/v1/periodic", body: `{"name":"p2","cron":"* * * * *","job_type":"noop","name":"p3"}`, field: "name"},
		{name: "periodic every 0s", path: "/v1/periodic", body: `{"name":"p","cron":"@every 0s","job_type":"noop"}`, field: "cron"},
		{name: "periodic every negative", path: "/v1/periodic", body: `{"name":"p","cron":"@every -1s","job_type":"noop"}`, field: "cron"},
		{name: "periodic every 500ms", path: "/v1/periodic", body: `{"name":"p","cron":"@every 500ms","job_type":"noop"}`, field: "cron"},
		{name: "periodic every 1.5s", path: "/v1/periodic", body: `{"name":"p","cron":"@every 1.5s","job_type":"noop"}`, field: "cron"},
		{name: "bulk retry status twice", path: "/v1/jobs/retry", body: `{"status":"FAILED","status":"CANCELED"}`, field: "status"},
		{name: "purge older_than twice", path: "/v1/jobs/purge", body: `{"older_than":"3650d","older_than":"1m"}`, field: "older_than"},
		{name: "limit max_running twice", method: "PUT", path: "/v1/types/noop/limit", body: `{"max_running":1,"max_running":2}`, field: "max_running"},
		{name: "stats window twice", method: "GET", path: "/v1/stats?window=1m&window=2m", field: "window"},
		{name: "stats bad query", method: "GET", path: "/v1/stats?window=%zz", field: "query"},
		{name: "types bad query", method: "GET", path: "/v1/types?%zz", field: "query"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := c.method
			if method == "" {
				method = "POST"
			}
			before := periodicRows()
			rec := do(h, method, c.path, []byte(c.body), nil)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400; body %.300s", rec.Code, rec.Body.String())
			}
			if e := decodeError(t, rec); e.Field != c.field || !strings.HasPrefix(e.Message, c.field+":") {
				t.Errorf("error %+v does not name field %q", e, c.field)
			}
			if after := periodicRows(); after != before {
				t.Errorf("periodic_job rows %d → %d", before, after)
			}
		})
	}
	for _, cron := range []string{"@every 2s", "@every 1m30s", "CRON_TZ=Asia/Tokyo @every 1h"} {
		rec := do(h, "POST", "/v1/periodic", []byte(`{"name":"ok","cron":"`+cron+`","job_type":"noop"}`), nil)
		if rec.Code != http.StatusCreated && rec.Code != http.StatusOK {
			t.Fatalf("%q: status %d, body %s", cron, rec.Code, rec.Body.String())
		}
	}
}

// TestSubmitSubMicrosecondRunAt: a run_at finer than the database's
// microseconds is rounded up (never early), and re-submitting the run_at the
// API returned is the same request (200), not a 409.
func TestSubmitSubMicrosecondRunAt(t *testing.T) {
	h, _ := newRobustAPI(t, httpapi.Options{})
	rec := do(h, "POST", "/v1/jobs", []byte(`{"job_key":"ns","job_type":"noop","run_at":"2030-01-02T15:04:05.123456001+09:00"}`), nil)
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d, body %s", rec.Code, rec.Body.String())
	}
	var job struct {
		RunAt string `json:"run_at"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &job); err != nil {
		t.Fatal(err)
	}
	if job.RunAt != "2030-01-02T06:04:05.123457Z" {
		t.Fatalf("run_at = %s, want 2030-01-02T06:04:05.123457Z (rounded up, never early)", job.RunAt)
	}
	for _, runAt := range []string{job.RunAt, "2030-01-02T15:04:05.123456001+09:00"} {
		rec = do(h, "POST", "/v1/jobs", []byte(`{"job_key":"ns","job_type":"noop","run_at":"`+runAt+`"}`), nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("re-submit with run_at %s: status %d, body %s; want 200", runAt, rec.Code, rec.Body.String())
		}
	}
}
