package app_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
)

// A default replica (loopback, no token) and a web page that points a name
// of its own at 127.0.0.1 (DNS rebinding): the browser sends that name as
// Host, and Origin and Sec-Fetch-Site say same-origin. Every surface — the
// HTTP API, Connect, gRPC-Web, the console and /metrics — refuses it with
// 403 naming Host and writes nothing; loopback names, --allowed-host names
// and the probes pass.
func TestForeignHostRefusedOnEverySurface(t *testing.T) {
	t.Parallel()
	dsn := testdb.DSN(t)
	r, err := app.Start(context.Background(), app.Config{DSN: dsn, Listen: "127.0.0.1:0", Migrate: true,
		AllowedHosts: []string{"jobq.internal", "*.svc.example"}, Logger: quiet(),
		Scheduler: scheduler.Config{Logger: quiet(), ShutdownTimeout: time.Second}, NoScheduler: true})
	if err != nil {
		t.Fatalf("app.Start: %v", err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, port, _ := strings.Cut(r.Addr, ":")

	send := func(host, method, path, ctype, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+r.Addr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		origin := "http://" + host
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	submit := func(key string) string {
		return `{"job_key":"` + key + `","job_type":"noop"}`
	}
	foreign := "rebind.attacker.example:" + port
	surfaces := []struct{ name, method, path, ctype, body string }{
		{"api submit", "POST", "/v1/jobs", "text/plain", submit("a")},
		{"api list", "GET", "/v1/jobs", "", ""},
		{"api cancel", "POST", "/v1/jobs/1/cancel", "text/plain", ""},
		{"api periodic add", "POST", "/v1/periodic", "text/plain", `{"name":"tick","cron":"* * * * *","job_type":"noop"}`},
		{"connect submit", "POST", "/jobq.v1.JobService/SubmitJob", "application/json", submit("c")},
		{"grpc-web submit", "POST", "/jobq.v1.JobService/SubmitJob", "application/grpc-web+proto", "\x00\x00\x00\x00\x00"},
		{"console overview", "GET", "/ui/", "", ""},
		{"console pause", "POST", "/ui/types/noop/pause", "application/x-www-form-urlencoded", ""},
		{"metrics", "GET", "/metrics", "", ""},
	}
	for _, s := range surfaces {
		code, body := send(foreign, s.method, s.path, s.ctype, s.body)
		var e struct {
			Error struct{ Code, Field, Message string }
		}
		_ = json.Unmarshal([]byte(body), &e)
		if code != http.StatusForbidden || e.Error.Field != "Host" || !strings.Contains(e.Error.Message, "rebind.attacker.example") {
			t.Errorf("%s with Host %s: %d %s, want 403 naming Host", s.name, foreign, code, body)
		}
	}
	var n int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM job_queue) + (SELECT COUNT(*) FROM periodic_job) + (SELECT COUNT(*) FROM job_type_control)").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("refused requests wrote %d rows", n)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := send(foreign, "GET", path, "", ""); code != http.StatusOK {
			t.Errorf("probe %s with a foreign Host: %d %s, want 200", path, code, body)
		}
	}
	for i, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST.:" + port, "app.localhost:" + port,
		"[::1]:" + port, "jobq.internal:" + port, "a.svc.example:" + port, "jobq.internal"} {
		if code, body := send(host, "POST", "/v1/jobs", "application/json", submit("ok"+string(rune('a'+i)))); code != http.StatusCreated {
			t.Errorf("submit with Host %s: %d %s, want 201", host, code, body)
		}
	}
	for _, host := range []string{"svc.example:" + port, "10.9.8.7:" + port, "jobq.internal.attacker.example"} {
		if code, body := send(host, "GET", "/v1/jobs", "", ""); code != http.StatusForbidden {
			t.Errorf("list with Host %s: %d %s, want 403", host, code, body)
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
