package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/testbed/chaos/checker"
)

// `jobq check` on every shipped history: the clean one passes (exit 0),
// every failing one fails (exit 1) with its check marked FAIL in the
// verdict table.
func TestCheckCommandOnShippedHistories(t *testing.T) {
	files, err := filepath.Glob("../../testbed/chaos/checker/testdata/*.ndjson")
	if err != nil || len(files) < len(checker.Checks())+1 {
		t.Fatalf("shipped histories: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		// rate_limit_exceeded.per_key.ndjson: a second history of one check.
		name, _, _ := strings.Cut(strings.TrimSuffix(filepath.Base(f), ".ndjson"), ".")
		out, err := runCLI(t, "check", f)
		if name == "clean" {
			if err != nil || !strings.Contains(out, ": VALID") {
				t.Fatalf("%s: err %v, out:\n%s", f, err, out)
			}
			continue
		}
		if !errors.Is(err, errViolations) {
			t.Fatalf("%s: err = %v, want errViolations", f, err)
		}
		if !strings.Contains(out, fmt.Sprintf("\n%-*s  FAIL", len(longestCheck()), name)) {
			t.Fatalf("%s: no FAIL row for %s:\n%s", f, name, out)
		}
	}
	// The CSV adapter, converted to NDJSON on the way, judges the same.
	conv := filepath.Join(t.TempDir(), "failing.ndjson")
	_, err = runCLI(t, "check", "--lease", "10s", "--write-ndjson", conv, "../../testbed/chaos/checker/testdata/csv/failing.csv")
	if !errors.Is(err, errViolations) || !strings.Contains(err.Error(), "overlapping_leases=1") {
		t.Fatalf("failing.csv: %v", err)
	}
	_, err2 := runCLI(t, "check", conv)
	if err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("converted history: %v, want %v", err2, err)
	}
	if _, err := runCLI(t, "check", "../../testbed/chaos/checker/testdata/csv/clean.csv"); err != nil {
		t.Fatalf("clean.csv: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.ndjson")
	if err := os.WriteFile(bad, []byte(`{"type":"claim","t":"2026-01-02T03:04:05Z"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "check", bad); !errors.Is(err, checker.ErrHistory) || !strings.Contains(err.Error(), "line 1 (claim)") {
		t.Fatalf("bad history: %v", err)
	}
}

func longestCheck() string {
	l := ""
	for _, c := range checker.Checks() {
		if len(c) > len(l) {
			l = c
		}
	}
	return l
}

// The adapter from jobq's own tables: jobs a real replica ran, read from
// its database with `jobq check --dsn`, are a valid history; a job left
// RUNNING past its lease in the same database is caught as stuck.
func TestCheckFromJobqTables(t *testing.T) {
	dsn := testdb.DSN(t)
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	r, err := app.Start(context.Background(), app.Config{
		DSN: dsn, Listen: "127.0.0.1:0", Registry: reg, Logger: quiet,
		Scheduler: scheduler.Config{Owner: "check-test", PollInterval: 50 * time.Millisecond, PollJitter: 10 * time.Millisecond,
			Lease: 2 * time.Second, RescueInterval: time.Second, Workers: 5, ShutdownTimeout: 5 * time.Second, Logger: quiet},
	})
	if err != nil {
		t.Fatalf("start replica: %v", err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	c := client.New("http://" + r.Addr)
	ctx := context.Background()
	var ids []uint64
	for i := range 5 {
		j, _, err := c.Submit(ctx, apitype.SubmitRequest{JobKey: fmt.Sprintf("chk-%d", i), JobType: "noop"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		for {
			j, err := c.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.Status == "SUCCESS" {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	out, err := runCLI(t, "check", "--dsn", dsn, "--lease", "2s")
	if err != nil || !strings.Contains(out, "jobq tables: VALID — 5 submitted, 5 acknowledged, 5 completed, 5 executions") {
		t.Fatalf("err %v, out:\n%s", err, out)
	}
	// The replica stops first: its rescuer would otherwise rescue the
	// planted job before the check reads the tables.
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("stop replica: %v", err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE job_queue SET status='RUNNING', attempt=attempt+1, owner='gone', lease_until=NOW(6) - INTERVAL 1 MINUTE WHERE id=?`, ids[0]); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI(t, "check", "--dsn", dsn, "--lease", "2s")
	if !errors.Is(err, errViolations) || !strings.Contains(err.Error(), "stuck=1") {
		t.Fatalf("stuck job: %v", err)
	}
}
