package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/service"
)

// TestPeriodicParamsValidatedLikeSubmit: a schedule of a built-in type whose
// params a submit would refuse (sleep ms -1, flaky failures 5000) is refused
// with the submit's 400 naming the field, and nothing is written — it used to
// be stored (201), every run carrying the params a submit refuses.
func TestPeriodicParamsValidatedLikeSubmit(t *testing.T) {
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	known := func(typ string) bool { _, ok := reg.Lookup(typ); return ok }
	ops := service.NewOps(service.OpsOptions{Store: st, KnownTypeFunc: known, ValidateParamsFunc: reg.ValidateParams})
	svc := service.New(service.Options{Store: st, KnownTypeFunc: known, ValidateParamsFunc: reg.ValidateParams})
	h := httpapi.New(svc, httpapi.Options{Ops: ops, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rows := func() int {
		var n int
		if err := st.DB().QueryRowContext(context.Background(), "SELECT COUNT(*) FROM periodic_job").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct{ body, field, msg string }{
		{`{"name":"p","cron":"* * * * *","job_type":"sleep","params":{"ms":-1}}`, "params.ms",
			"params.ms: must be an integer in [0, 86400000] (milliseconds), got -1"},
		{`{"name":"p","cron":"* * * * *","job_type":"flaky","params":{"failures":5000}}`, "params.failures",
			"params.failures: must be an integer in [0, 1000], got 5000"},
	} {
		rec := do(h, "POST", "/v1/periodic", []byte(c.body), nil)
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400; body %s", c.body, rec.Code, rec.Body.String())
		}
		if e := decodeError(t, rec); e.Field != c.field || e.Message != c.msg {
			t.Errorf("%s: error %+v, want field %q message %q", c.body, e, c.field, c.msg)
		}
		if n := rows(); n != 0 {
			t.Errorf("%s: %d periodic_job rows written, want 0", c.body, n)
		}
	}
	rec := do(h, "POST", "/v1/periodic", []byte(`{"name":"ok","cron":"* * * * *","job_type":"sleep","params":{"ms":5}}`), nil)
	if rec.Code != http.StatusCreated || rows() != 1 {
		t.Fatalf("valid schedule: status %d, rows %d; body %s", rec.Code, rows(), rec.Body.String())
	}
}

// TestNotFoundNamesTheIDAsSent: an id above 2^63-1 is a valid BIGINT
// UNSIGNED that no job has; the 404 names it as sent, not wrapped negative
// ("job -1 not found" for 18446744073709551615).
func TestNotFoundNamesTheIDAsSent(t *testing.T) {
	h, _ := newRobustAPI(t, httpapi.Options{})
	for _, id := range []string{"18446744073709551615", "9223372036854775808"} {
		for _, r := range []struct{ method, path string }{{"GET", "/v1/jobs/" + id}, {"POST", "/v1/jobs/" + id + "/cancel"}, {"GET", "/v1/jobs/" + id + "/executions"}} {
			rec := do(h, r.method, r.path, nil, nil)
			if e := decodeError(t, rec); rec.Code != http.StatusNotFound || e.Message != "job "+id+" not found" {
				t.Errorf("%s %s: status %d, error %+v; want 404 \"job %s not found\"", r.method, r.path, rec.Code, e, id)
			}
		}
	}
}
