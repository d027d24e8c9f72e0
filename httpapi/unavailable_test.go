package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

// TestWritesRefusedAnswer503: when the database refuses writes (here a
// read-only session, error 1792, the refusal a demoted primary gives as
// 1290), every writing route, ops routes included, answers 503
// "unavailable" with Retry-After — never 500. (Bulk retry and purge write
// nothing when no row matches, so a read-only server answers them 200.)
func TestWritesRefusedAnswer503(t *testing.T) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(testdb.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	rw, err := store.Open(ctx, cfg.FormatDSN(), store.PoolConfig{MaxOpen: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	known := func(typ string) bool { return registeredTypes[typ] }
	job, _, err := service.New(service.Options{Store: rw, KnownTypeFunc: known}).Submit(ctx, apitype.SubmitRequest{JobKey: "k1", JobType: "noop", Params: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["tx_read_only"] = "1"
	ro, err := store.Open(ctx, cfg.FormatDSN(), store.PoolConfig{MaxOpen: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	h := httpapi.New(service.New(service.Options{Store: ro, KnownTypeFunc: known}), httpapi.Options{Ops: service.NewOps(service.OpsOptions{Store: ro, KnownTypeFunc: known})})
	id := strconv.FormatUint(job.ID, 10)
	cases := []struct{ method, path, body string }{
		{"POST", "/v1/jobs", `{"job_key":"k2","job_type":"noop","params":{}}`},
		{"POST", "/v1/jobs/" + id + "/cancel", ``},
		{"POST", "/v1/jobs/" + id + "/retry", ``},
		{"POST", "/v1/types/noop/pause", ``},
		{"POST", "/v1/types/noop/resume", ``},
		{"PUT", "/v1/types/noop/limit", `{"max_running":1}`},
		{"POST", "/v1/periodic", `{"name":"p","cron":"* * * * *","job_type":"noop"}`},
		{"DELETE", "/v1/periodic/p", ``},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			rec := do(h, c.method, c.path, []byte(c.body), nil)
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("status = %d, want 503; body %.300s", rec.Code, rec.Body.String())
			}
			if got := rec.Header().Get("Retry-After"); got != "1" {
				t.Errorf("Retry-After = %q, want \"1\"", got)
			}
			if e := decodeError(t, rec); e.Code != "unavailable" {
				t.Errorf("code = %q, want unavailable", e.Code)
			}
		})
	}
}
