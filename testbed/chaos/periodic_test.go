package chaos

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq/testbed/chaos/checker"
)

// checkLedgerWindow fails unless the run judged one schedule whose window
// holds exactly want instants, each fired once or skipped with a reason,
// none missing or doubled.
func checkLedgerWindow(t *testing.T, rf *ResultFile, want int) checker.ScheduleResult {
	t.Helper()
	if len(rf.Result.Schedules) != 1 {
		t.Fatalf("schedules judged: %+v, want one", rf.Result.Schedules)
	}
	s := rf.Result.Schedules[0]
	skipped := 0
	for reason, n := range s.Skipped {
		if reason == "none" || reason == "" {
			t.Fatalf("%d instants skipped without a reason: %+v", n, s)
		}
		skipped += n
	}
	if s.Instants != want || s.Fired+s.Late+skipped != want || s.Missing != 0 || s.Doubled != 0 {
		t.Fatalf("schedule %+v: want %d instants, each fired once or skipped with its reason", s, want)
	}
	t.Logf("schedule %s (%s): %d instants: %d fired, %d late, skipped %v", s.Name, s.Cron, s.Instants, s.Fired, s.Late, s.Skipped)
	return s
}

// An every-second schedule beside the workload while a replica is
// SIGKILLed: the fire checks judge its ledger (every instant of the window
// fired once or skipped with its reason) and its jobs count as submitted
// by the schedule (no phantoms, none lost).
func TestChaosPeriodicScheduleJudged(t *testing.T) {
	cfg := quick(t, "periodic")
	cfg.Jobs, cfg.Duration = 300, 12*time.Second
	cfg.Periodic, cfg.PeriodicOverlap = "@every 1s", "skip"
	cfg.Schedule = "kill@5s:replica-1"
	rf := runValid(t, cfg)
	checkLedgerWindow(t, rf, 12)
	if rf.Result.Counts.Phantom != 0 {
		t.Fatalf("phantoms %d", rf.Result.Counts.Phantom)
	}
}

// The policy-fire-ledger scenario (`make chaos-ledger`, 10 minutes): an
// @every 10s schedule through six replica kills and one primary failover
// shows exactly 60 ledger entries, each fired once or skipped with its
// reason, and the run is VALID. Runs only with JOBQ_CHAOS_LEDGER=1.
func TestChaosFireLedgerSixtyInstants(t *testing.T) {
	if os.Getenv("JOBQ_CHAOS_LEDGER") != "1" {
		t.Skip("10 minutes: set JOBQ_CHAOS_LEDGER=1 (make chaos-ledger)")
	}
	cfg := quick(t, "policy-fire-ledger")
	cfg.Jobs, cfg.Runtime, cfg.DrainTimeout = 3000, "uniform:20ms-300ms", 60*time.Second
	if out := os.Getenv("JOBQ_CHAOS_LEDGER_OUT"); out != "" {
		cfg.OutDir = filepath.Join(out, cfg.Name)
	}
	FireLedger(&cfg)
	rf, err := Run(context.Background(), cfg)
	if rf == nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("report: %s", filepath.Join(cfg.OutDir, "report.md"))
	if !rf.Valid {
		t.Fatalf("INVALID: %v; violations %+v, fault errors %v", err, rf.Result.Violations, rf.FaultErrors)
	}
	checkLedgerWindow(t, rf, int(FireLedgerDuration/(10*time.Second)))
	failovers := 0
	for _, f := range rf.Result.Faults {
		if f.Kind == FaultFailover {
			failovers++
		}
	}
	if failovers != 1 {
		t.Fatalf("%d failovers, want 1 (faults %+v)", failovers, rf.Result.Faults)
	}
}
