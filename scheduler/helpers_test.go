package scheduler_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fastConfig is a Config with short timers so tests run in seconds.
func fastConfig(owner string) scheduler.Config {
	return scheduler.Config{
		Owner: owner, PollInterval: 50 * time.Millisecond, PollJitter: 10 * time.Millisecond,
		Lease: 2 * time.Second, RescueInterval: 200 * time.Millisecond,
		RetryBackoffBase: 50 * time.Millisecond, Workers: 20, Logger: quietLogger(),
		ShutdownTimeout: 5 * time.Second,
	}
}

func startScheduler(t *testing.T, st scheduler.Store, db *sql.DB, reg *scheduler.Registry, cfg scheduler.Config) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(st, db, reg, cfg, true)
	if err != nil {
		t.Fatalf("new scheduler: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func submit(t *testing.T, st *store.Store, key, typ, params string, maxRetry int) store.Job {
	t.Helper()
	svc := service.New(st, nil, nil)
	mr := maxRetry
	job, _, err := svc.Submit(context.Background(), service.SubmitRequest{JobKey: key, JobType: typ, Params: []byte(params), MaxRetry: &mr})
	if err != nil {
		t.Fatalf("submit %s: %v", key, err)
	}
	return job
}

// waitFor polls cond (a database read) until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countStatus(st *store.Store, status string) (int64, error) {
	m, err := st.JobCountByStatus(context.Background())
	return m[status], err
}

func scalar(t *testing.T, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	var n sql.NullInt64
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n.Int64
}

func key(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
