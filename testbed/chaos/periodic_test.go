package chaos

import (
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
