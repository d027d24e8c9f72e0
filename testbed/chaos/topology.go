package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/testbed/chaos/checker"
)

// Topologies: the database a run's replicas talk to.
const (
	// TopologySingle is one server: the provider's (JOBQ_DSN, Docker, a
	// local mariadbd) or, for db-restart, a throwaway mariadbd.
	TopologySingle = "single"
	// TopologyGalera3 is a 3-node MariaDB Galera cluster on loopback that
	// the harness starts (Debian galera-4); replica i talks to node i
	// through its own link. Faults: node-kill, node-restart, node-isolate.
	TopologyGalera3 = "galera3"
	// TopologyPrimaryReplica is two mariadbd with MariaDB GTID replication
	// (async or semi-sync, see Config.Replication); every replica reaches
	// the primary through one proxy address. Fault: failover.
	TopologyPrimaryReplica = "primary-replica"
)

// Topologies lists every topology.
var Topologies = []string{TopologySingle, TopologyGalera3, TopologyPrimaryReplica}

// Replication modes of the primary-replica topology.
const (
	// ReplicationAsync is MariaDB's default asynchronous replication: the
	// primary acknowledges a commit before any replica has it.
	ReplicationAsync = "async"
	// ReplicationSemiSync is MariaDB's built-in semi-synchronous
	// replication with rpl_semi_sync_master_wait_point=AFTER_SYNC and no
	// fallback to async (rpl_semi_sync_master_timeout of one hour): the
	// primary acknowledges a commit only after the replica has written it
	// to its relay log.
	ReplicationSemiSync = "semisync"
)

// topology is the database side of a run that is more than one server.
type topology interface {
	// serverDSN is the DSN (no database) the harness itself uses; it
	// reaches a server that accepts writes.
	serverDSN() string
	// upstream is the address replica i's link forwards to.
	upstream(i int) string
	// describe names the topology and its servers for the report.
	describe() string
	// inject injects pf if it is one of the topology's fault kinds,
	// filling f, and reports whether it was.
	inject(ctx context.Context, in *injector, pf plannedFault, f *checker.Fault) bool
	// report adds the topology's own figures to rf once the run is over
	// (h is the history the checker judged).
	report(ctx context.Context, rf *ResultFile, h *checker.History)
	// close stops every server and removes their datadirs.
	close()
}

// startTopology starts cfg's topology, or returns nil for TopologySingle.
func startTopology(ctx context.Context, cl *cluster) (topology, error) {
	switch cl.cfg.Topology {
	case TopologyGalera3:
		return startGalera(ctx, cl, 3)
	case TopologyPrimaryReplica:
		return startPrimaryReplica(ctx, cl)
	case TopologySingle, "":
		return nil, nil
	}
	return nil, fmt.Errorf("unknown topology %q", cl.cfg.Topology)
}

// TopologyReport is the topology's own part of result.json.
type TopologyReport struct {
	// Kind is the topology (galera3, primary-replica).
	Kind string `json:"kind"`
	// Replication is async or semisync (primary-replica only).
	Replication string `json:"replication,omitempty"`
	// Servers describes each server (name, address, role).
	Servers []string `json:"servers"`
	// CertFailures is wsrep_local_cert_failures summed over the Galera
	// nodes and their incarnations: transactions that lost certification
	// against a concurrent write set from another node (1213 to the
	// client).
	CertFailures int64 `json:"cert_failures,omitempty"`
	// BFAborts is wsrep_local_bf_aborts summed likewise: local
	// transactions aborted by a replicated one (also 1213 to the client).
	BFAborts int64 `json:"bf_aborts,omitempty"`
	// RetriedConflicts is jobq_db_transient_errors_total{cause="deadlock"}
	// summed over the replicas' last incarnations at the end of the run:
	// the 1213s (certification conflicts included) jobq retried.
	RetriedConflicts int64 `json:"retried_conflicts"`
	// Rejoins describes how each restarted Galera node rejoined (IST or
	// SST).
	Rejoins []string `json:"rejoins,omitempty"`
	// Failovers are the primary-replica failovers with what each lost.
	Failovers []FailoverReport `json:"failovers,omitempty"`
}

// FailoverReport is what one primary-replica failover cost, measured by
// comparing the demoted primary's record with the promoted one's.
type FailoverReport struct {
	// ReplicationCutS is how long replication was cut before the failover.
	ReplicationCutS float64 `json:"replication_cut_s"`
	// AckedMissing is acknowledged submits whose job (same id and key) is
	// not on the new primary: acknowledged, then lost by the failover.
	AckedMissing int `json:"acked_missing"`
	// OnOldPrimaryOnly is jobs that exist only on the demoted primary,
	// acknowledged or not.
	OnOldPrimaryOnly int `json:"on_old_primary_only"`
	// SuccessLost is jobs that had finished SUCCESS on the demoted primary
	// but were not SUCCESS by that attempt on the new one. With async
	// replication the success may have been acknowledged to jobq; with
	// semi-sync it was not (its commit was still waiting for the replica's
	// acknowledgement when the failover killed its session).
	SuccessLost int `json:"success_lost"`
	// Rerun is jobs that had finished SUCCESS on the demoted primary and
	// were claimed again on the new one: their work ran twice.
	Rerun int `json:"rerun"`
	// Examples lists a few of each.
	Examples []string `json:"examples"`
}

// retriedConflicts sums jobq_db_transient_errors_total{cause="deadlock"}
// over the live replicas' /metrics (0 for a replica that does not answer).
func (cl *cluster) retriedConflicts(ctx context.Context) int64 {
	hc := &http.Client{Timeout: 3 * time.Second}
	var sum int64
	for _, n := range cl.nodes {
		r := n.current()
		if r == nil || !r.Alive() {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+"/metrics", nil)
		if err != nil {
			continue
		}
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "jobq_db_transient_errors_total{") || !strings.Contains(line, `cause="deadlock"`) {
				continue
			}
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				v, _ := strconv.ParseFloat(line[i+1:], 64)
				sum += int64(v)
			}
		}
		resp.Body.Close()
	}
	return sum
}
