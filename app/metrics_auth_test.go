package app_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
)

// With bearer tokens, which paths answer without one — and the docs say
// the same: robustness.md lists every open path among the exceptions to
// the token rule, and metrics.md says /metrics needs no authentication.
// (The two disagreed: robustness.md said only /healthz and /readyz.)
func TestOpenPathsWithTokensAsDocumented(t *testing.T) {
	t.Parallel()
	r, err := app.Start(context.Background(), app.Config{DSN: testdb.DSN(t), Listen: "127.0.0.1:0", Migrate: true, NoScheduler: true,
		AuthTokens: []string{"0123456789abcdef-token"}, Logger: quiet(), Scheduler: scheduler.Config{Logger: quiet(), ShutdownTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	var open []string
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/v1/jobs", "/v1/stats", "/ui/"} {
		resp, err := http.Get("http://" + r.Addr + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			open = append(open, path)
		case http.StatusUnauthorized, http.StatusSeeOther, http.StatusFound:
		default:
			t.Errorf("GET %s without a token: %d", path, resp.StatusCode)
		}
	}
	if want := []string{"/healthz", "/readyz", "/metrics"}; strings.Join(open, " ") != strings.Join(want, " ") {
		t.Fatalf("paths open without a token: %v, want %v", open, want)
	}
	rob, err := os.ReadFile("../docs/robustness.md")
	if err != nil {
		t.Fatal(err)
	}
	_, bullet, _ := strings.Cut(string(rob), "**API security**")
	bullet, _, _ = strings.Cut(bullet, "needs `Authorization: Bearer")
	for _, p := range open {
		if !strings.Contains(bullet, "`"+p+"`") {
			t.Errorf("docs/robustness.md: the token rule's exceptions do not name %s, which answers without a token: %q", p, bullet)
		}
	}
	met, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(string(met)), " "), "(its own registry; no authentication, like `/healthz` and `/readyz`)") {
		t.Errorf("docs/metrics.md no longer says /metrics needs no authentication")
	}
}
