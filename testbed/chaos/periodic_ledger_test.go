//go:build chaosledger

package chaos

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The policy-fire-ledger scenario (`make chaos-ledger`, 10 minutes): an
// @every 10s schedule through six replica kills and one primary failover
// shows exactly 60 ledger entries, each fired once or skipped with its
// reason, and the run is VALID. It is built only with the chaosledger
// tag (make chaos-ledger), so make test neither runs nor lists it.
func TestChaosFireLedgerSixtyInstants(t *testing.T) {
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
