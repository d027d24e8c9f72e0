package chaos

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// The galera3 topology end to end: the harness bootstraps a 3-node Galera
// cluster (rsync SST for the joiners), one replica per node; node-2 is
// SIGKILLed mid-run and rejoins after mariadbd --wsrep-recover. Nothing may
// be lost, stuck, duplicated or accepted stale, and the rejoin must be an
// incremental transfer (IST), not a full copy.
func TestGaleraNodeKillIsValid(t *testing.T) {
	if _, err := os.Stat(GaleraProvider); err != nil {
		t.Skipf("no %s: run make ensure-galera (installs Debian's galera-4)", GaleraProvider)
	}
	cfg := quick(t, "galera-node-kill")
	cfg.Topology, cfg.Lease, cfg.RescueInterval = TopologyGalera3, 6*time.Second, time.Second
	cfg.Jobs, cfg.Duration = 400, 12*time.Second
	cfg.Schedule = "node-kill@4s:replica-2"
	rf, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	disk := readResult(t, cfg.OutDir)
	if !rf.Valid || !disk.Valid {
		t.Fatalf("valid = %v (on disk %v), violations %+v, fault errors %v", rf.Valid, disk.Valid, rf.Result.Violations, rf.FaultErrors)
	}
	c := rf.Result.Counts
	if c.Acknowledged != 400 || c.Completed != 400 || c.ByStatus["SUCCESS"] != 400 || c.AckedMissing != 0 {
		t.Fatalf("acknowledged %d, completed %d, by status %v, acked missing %d; want 400 SUCCESS", c.Acknowledged, c.Completed, c.ByStatus, c.AckedMissing)
	}
	tr := disk.Topology
	if tr == nil || tr.Kind != TopologyGalera3 || len(tr.Servers) != 3 {
		t.Fatalf("topology report %+v, want galera3 with 3 servers", tr)
	}
	if len(tr.Rejoins) != 1 || !strings.HasPrefix(tr.Rejoins[0], "node-2 from ") || !strings.HasSuffix(tr.Rejoins[0], ": IST (incremental)") {
		t.Fatalf("rejoins %q, want node-2 by IST", tr.Rejoins)
	}
	if f := rf.Result.Faults; len(f) != 1 || f[0].Kind != FaultNodeKill || f[0].Target != "replica-2" {
		t.Fatalf("faults %+v, want one node-kill on replica-2's node", f)
	}
}

// The primary-replica failover, measured both ways on the same workload:
// replication is cut for 3 s, then the primary is demoted and the replica
// promoted. Asynchronous replication must lose acknowledged submits (the
// primary acknowledged commits the replica never received); semi-sync
// (AFTER_SYNC, no fallback) must lose none and keep every guarantee.
func TestFailoverAsyncLosesSemiSyncDoesNot(t *testing.T) {
	for _, mode := range []string{ReplicationAsync, ReplicationSemiSync} {
		cfg := quick(t, "failover-"+mode)
		cfg.Topology, cfg.Replication = TopologyPrimaryReplica, mode
		cfg.Jobs, cfg.Duration = 400, 12*time.Second
		cfg.Schedule = "failover@5s"
		rf, err := Run(context.Background(), cfg)
		if rf == nil {
			t.Fatalf("%s: run: %v", mode, err)
		}
		disk := readResult(t, cfg.OutDir)
		c := rf.Result.Counts
		if disk.Topology == nil || len(disk.Topology.Failovers) != 1 || len(rf.FaultErrors) != 0 {
			t.Fatalf("%s: topology report %+v, fault errors %v; want one failover", mode, disk.Topology, rf.FaultErrors)
		}
		fo := disk.Topology.Failovers[0]
		if fo.AckedMissing != c.AckedMissing || fo.ReplicationCutS != 3 {
			t.Fatalf("%s: failover report %+v, checker acked missing %d", mode, fo, c.AckedMissing)
		}
		switch mode {
		case ReplicationAsync:
			if c.AckedMissing == 0 || rf.Valid {
				t.Fatalf("async: acked missing %d, valid %v; want acknowledged submits lost (violations %+v)", c.AckedMissing, rf.Valid, rf.Result.Violations)
			}
			if v := violationOf(rf, "acknowledged_submit_missing"); v != c.AckedMissing {
				t.Fatalf("async: acknowledged_submit_missing violation count %d, want %d", v, c.AckedMissing)
			}
		case ReplicationSemiSync:
			// A completion committed on the old primary while it waited for
			// the cut-off replica's acknowledgement was never acknowledged
			// to jobq (the failover killed its session): such a job may be
			// re-run (fo.Rerun), which is at-least-once, not a loss.
			if !rf.Valid || c.AckedMissing != 0 {
				t.Fatalf("semisync: valid %v, acked missing %d, failover %+v, violations %+v; want nothing lost", rf.Valid, c.AckedMissing, fo, rf.Result.Violations)
			}
			if c.Acknowledged != 400 || c.Completed != 400 {
				t.Fatalf("semisync: acknowledged %d, completed %d; want 400", c.Acknowledged, c.Completed)
			}
		}
	}
}

func violationOf(rf *ResultFile, check string) int {
	for _, v := range rf.Result.Violations {
		if v.Check == check {
			return v.Count
		}
	}
	return 0
}
