package httpapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

// TestConnectionLimitAnswers503: a server out of connections for jobq
// (1203 max_user_connections here; 1040 max_connections is the same
// refusal server-wide, which a test must not provoke on a shared server)
// makes every route answer 503 unavailable with Retry-After — it answered
// 500 internal, as if the request were at fault.
func TestConnectionLimitAnswers503(t *testing.T) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(testdb.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	admin := testdb.Store(t).DB()
	user := fmt.Sprintf("jq_connlimit_%d", rand.Uint32())
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'connlimit-pw' WITH MAX_USER_CONNECTIONS 1", user),
		fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", cfg.DBName, user),
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
	cfg.User, cfg.Passwd = user, "connlimit-pw"
	st, err := store.Open(ctx, cfg.FormatDSN(), store.PoolConfig{MaxOpen: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	held, err := st.DB().Conn(ctx) // the user's one connection
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	known := func(typ string) bool { return registeredTypes[typ] }
	h := httpapi.New(service.New(service.Options{Store: st, KnownTypeFunc: known}), httpapi.Options{Ops: service.NewOps(service.OpsOptions{Store: st, KnownTypeFunc: known})})
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/jobs", `{"job_key":"k","job_type":"noop"}`},
		{"POST", "/v1/jobs:batch", `{"jobs":[{"job_key":"k","job_type":"noop"}]}`},
		{"GET", "/v1/jobs/1", ``},
		{"GET", "/v1/jobs", ``},
		{"GET", "/v1/jobs/1/executions", ``},
		{"GET", "/v1/stats", ``},
		{"POST", "/v1/types/noop/pause", ``},
	} {
		rec := do(h, c.method, c.path, []byte(c.body), nil)
		if e := decodeError(t, rec); rec.Code != http.StatusServiceUnavailable || e.Code != "unavailable" || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s %s: status %d, error %+v, Retry-After %q; want 503 unavailable", c.method, c.path, rec.Code, e, rec.Header().Get("Retry-After"))
		}
	}
}
