package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/testbed/chaos/checker"
)

// GaleraProvider is the Galera library Debian's galera-4 package installs.
const GaleraProvider = "/usr/lib/galera/libgalera_smm.so"

// galeraNets numbers the harness dialers registered with the MySQL driver.
var galeraNets atomic.Int64

// galera is an N-node MariaDB Galera cluster on loopback. Each node has
// four ports below the ephemeral range: SQL, group communication (4567
// style), incremental state transfer (4568 style) and rsync state transfer
// (4444 style). Replica i talks to node i through its own link; the harness
// itself dials the first node that is not under a fault.
type galera struct {
	cl    *cluster
	dir   string
	nodes []*topoServer
	gcomm []int // group communication port of each node
	// down marks the nodes under a fault; the harness's dialer skips them.
	down    []atomic.Bool
	netName string

	mu sync.Mutex
	// certFailures and bfAborts are summed over node incarnations that
	// ended (their counters restart with the process).
	certFailures, bfAborts int64
	rejoins                []string
}

func startGalera(ctx context.Context, cl *cluster, n int) (_ *galera, err error) {
	if _, err := os.Stat(GaleraProvider); err != nil {
		return nil, fmt.Errorf("galera3 needs %s (Debian: apt-get install galera-4; make chaos-galera installs it): %w", GaleraProvider, err)
	}
	g := &galera{cl: cl, down: make([]atomic.Bool, n)}
	if g.dir, err = topoDir("galera"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	ports, err := lowPorts(4 * n)
	if err != nil {
		return nil, err
	}
	var peers []string
	for i := 0; i < n; i++ {
		g.gcomm = append(g.gcomm, ports[4*i+1])
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d", ports[4*i+1]))
	}
	for i := 0; i < n; i++ {
		sqlPort, gport, ist, sst := ports[4*i], ports[4*i+1], ports[4*i+2], ports[4*i+3]
		name := fmt.Sprintf("node-%d", i+1)
		args := []string{"--wsrep-on=ON", "--wsrep-provider=" + GaleraProvider, "--binlog-format=ROW",
			"--innodb-autoinc-lock-mode=2", "--wsrep-cluster-name=jobq-chaos",
			"--wsrep-cluster-address=gcomm://" + strings.Join(peers, ","),
			fmt.Sprintf("--wsrep-node-address=127.0.0.1:%d", gport), "--wsrep-node-name=" + name,
			"--wsrep-sst-method=rsync", fmt.Sprintf("--wsrep-sst-receive-address=127.0.0.1:%d", sst),
			"--wsrep-provider-options=" + strings.Join([]string{
				fmt.Sprintf("gmcast.listen_addr=tcp://127.0.0.1:%d", gport), fmt.Sprintf("ist.recv_addr=127.0.0.1:%d", ist),
				"gcache.size=256M",
				// A vanished peer stalls every commit until it is declared
				// gone; keep that well under the replicas' lease.
				"evs.keepalive_period=PT0.5S", "evs.inactive_check_period=PT0.5S",
				"evs.suspect_timeout=PT2S", "evs.inactive_timeout=PT4S",
			}, ";")}
		// Only the bootstrap node needs a system database; joiners get
		// everything by state transfer.
		s, err := newTopoServer(ctx, g.dir, name, sqlPort, i == 0, args)
		if err != nil {
			return nil, err
		}
		g.nodes = append(g.nodes, s)
	}
	for i, s := range g.nodes {
		var extra []string
		if i == 0 {
			extra = []string{"--wsrep-new-cluster"}
		}
		if err := s.start(ctx, extra...); err != nil {
			return nil, err
		}
		if err := g.waitSynced(ctx, s); err != nil {
			return nil, err
		}
	}
	g.netName = fmt.Sprintf("jobq-galera-%d", galeraNets.Add(1))
	mysql.RegisterDialContext(g.netName, g.dial)
	return g, nil
}

// dial connects to the first node that is up and not under a fault.
func (g *galera) dial(ctx context.Context, _ string) (net.Conn, error) {
	var d net.Dialer
	var last error
	for pass := 0; pass < 2; pass++ {
		for i, s := range g.nodes {
			if pass == 0 && g.down[i].Load() {
				continue
			}
			c, err := d.DialContext(ctx, "tcp", s.addr())
			if err == nil {
				return c, nil
			}
			last = err
		}
	}
	return nil, last
}

// waitSynced waits until s is a synced member of the primary component.
func (g *galera) waitSynced(ctx context.Context, s *topoServer) error {
	for deadline := time.Now().Add(120 * time.Second); ; {
		if s.status(ctx, "wsrep_local_state") == "4" && s.status(ctx, "wsrep_ready") == "ON" {
			return nil
		}
		if !s.alive() {
			return fmt.Errorf("%s exited while joining: see %s", s.name, s.errorLog())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not synced within 120s (wsrep_local_state %s): see %s", s.name, s.status(ctx, "wsrep_local_state_comment"), s.errorLog())
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

func (g *galera) serverDSN() string { return fmt.Sprintf("root@%s(galera)/", g.netName) }

func (g *galera) upstream(i int) string { return g.nodes[i%len(g.nodes)].addr() }

func (g *galera) describe() string {
	var parts []string
	for i, s := range g.nodes {
		parts = append(parts, fmt.Sprintf("%s sql %s gcomm %d", s.name, s.addr(), g.gcomm[i]))
	}
	return fmt.Sprintf("galera3 (galera-4, rsync SST): %s", strings.Join(parts, ", "))
}

func (g *galera) close() {
	var wg sync.WaitGroup
	for _, s := range g.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); s.stop(30 * time.Second) }()
	}
	wg.Wait()
	if g.dir != "" && !g.cl.cfg.Keep {
		_ = os.RemoveAll(g.dir)
	}
}

// counters adds s's conflict counters to the totals (before its process
// ends, or at the end of the run).
func (g *galera) counters(ctx context.Context, s *topoServer) {
	cf, _ := strconv.ParseInt(s.status(ctx, "wsrep_local_cert_failures"), 10, 64)
	bf, _ := strconv.ParseInt(s.status(ctx, "wsrep_local_bf_aborts"), 10, 64)
	g.mu.Lock()
	g.certFailures += cf
	g.bfAborts += bf
	g.mu.Unlock()
}

var recoveredRE = regexp.MustCompile(`Recovered position:?\s+(\S+:-?\d+)`)

// rejoin starts a stopped node again the way an operator does: mariadbd
// --wsrep-recover reads the last committed position from InnoDB, and the
// node starts from it, so the cluster can send it the missing write sets
// from a donor's gcache (IST) instead of a full copy (SST). It returns how
// the node rejoined.
func (g *galera) rejoin(ctx context.Context, s *topoServer) (string, error) {
	recoverLog := filepath.Join(s.dir, "recover.log")
	_ = os.Remove(recoverLog)
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(rctx, s.bin, append(s.baseArgs(), "--wsrep-recover", "--log-error="+recoverLog)...).CombinedOutput()
	log, _ := os.ReadFile(recoverLog)
	m := recoveredRE.FindStringSubmatch(string(log))
	if m == nil {
		return "", fmt.Errorf("%s: --wsrep-recover found no position (%v): %s %s", s.name, err, lastLines(string(log), 3), lastLines(string(out), 2))
	}
	before, _ := os.ReadFile(s.errorLog())
	if err := s.start(ctx, "--wsrep-start-position="+m[1]); err != nil {
		return "", err
	}
	if err := g.waitSynced(ctx, s); err != nil {
		return "", err
	}
	after, _ := os.ReadFile(s.errorLog())
	how := "SST (full copy)"
	if len(after) >= len(before) {
		tail := string(after[len(before):])
		if strings.Contains(tail, "IST received") && !strings.Contains(tail, "SST completed") && !strings.Contains(tail, "rsync SST completed") {
			how = "IST (incremental)"
		}
	}
	return fmt.Sprintf("%s from %s: %s", s.name, m[1], how), nil
}

// inject handles node-kill, node-restart and node-isolate on the node of
// the targeted replica.
func (g *galera) inject(ctx context.Context, in *injector, pf plannedFault, f *checker.Fault) bool {
	cfg := in.cl.cfg
	if pf.Kind != FaultNodeKill && pf.Kind != FaultNodeRestart && pf.Kind != FaultNodeIsolate {
		return false
	}
	i := pf.Target % len(g.nodes)
	s := g.nodes[i]
	g.down[i].Store(true)
	defer g.down[i].Store(false)
	rejoin := func() {
		sleepCtx(ctx, cfg.NodeDownFor)
		how, err := g.rejoin(context.Background(), s)
		if err != nil {
			f.Err = err.Error()
		} else {
			g.mu.Lock()
			g.rejoins = append(g.rejoins, how)
			g.mu.Unlock()
			f.Detail += "; rejoined by " + how
		}
		f.End = in.toDB(time.Now())
	}
	switch pf.Kind {
	case FaultNodeKill:
		g.counters(ctx, s)
		f.Detail = fmt.Sprintf("%s SIGKILLed, down %s", s.name, cfg.NodeDownFor)
		f.Start = in.toDB(time.Now())
		s.kill()
		rejoin()
	case FaultNodeRestart:
		g.counters(ctx, s)
		f.Detail = fmt.Sprintf("%s shut down cleanly (SIGTERM), down %s", s.name, cfg.NodeDownFor)
		f.Start = in.toDB(time.Now())
		s.stop(60 * time.Second)
		rejoin()
	case FaultNodeIsolate:
		f.Detail = fmt.Sprintf("%s isolated from its peers for %s (gmcast.isolate=1: every replication link dropped and refused; the node goes non-primary and answers 1047)",
			s.name, cfg.IsolateFor)
		f.Start = in.toDB(time.Now())
		if err := s.exec(ctx, "SET GLOBAL wsrep_provider_options='gmcast.isolate=1'"); err != nil {
			f.Err = err.Error()
			f.End = f.Start
			return true
		}
		sleepCtx(ctx, cfg.IsolateFor)
		if err := s.exec(context.Background(), "SET GLOBAL wsrep_provider_options='gmcast.isolate=0'"); err != nil {
			f.Err = err.Error()
		} else if err := g.waitSynced(context.Background(), s); err != nil {
			f.Err = err.Error()
		}
		f.End = in.toDB(time.Now())
	}
	return true
}

func (g *galera) report(ctx context.Context, rf *ResultFile, _ *checker.History) {
	tr := &TopologyReport{Kind: TopologyGalera3}
	for i, s := range g.nodes {
		tr.Servers = append(tr.Servers, fmt.Sprintf("%s %s (gcomm %d), serves replica-%d", s.name, s.addr(), g.gcomm[i], i+1))
		if s.alive() {
			g.counters(ctx, s)
		}
	}
	g.mu.Lock()
	tr.CertFailures, tr.BFAborts, tr.Rejoins = g.certFailures, g.bfAborts, append([]string{}, g.rejoins...)
	g.mu.Unlock()
	rf.Topology = tr
}
