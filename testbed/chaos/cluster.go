package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/rs/zerolog"

	"github.com/jobq/jobq/testbed/chaos/checker"
	"github.com/jobq/jobq/testbed/dbprovider"
	"github.com/jobq/jobq/testbed/jobtypes"
	"github.com/jobq/jobq/testbed/replica"
)

// link is one replica's database link: an in-process toxiproxy proxy on
// 127.0.0.1 in front of the database.
type link struct {
	proxy *toxiproxy.Proxy
	mu    sync.Mutex
	n     int // toxic name counter
}

func newLink(srv *toxiproxy.ApiServer, name, upstream string) (*link, error) {
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("proxy %s: %w", name, err)
	}
	return &link{proxy: p}, nil
}

// Addr is the proxy's listen address.
func (l *link) Addr() string { return l.proxy.Listen }

// addToxic adds a toxic on both directions and returns a func removing it.
func (l *link) addToxic(kind string, attrs string) (remove func(), err error) {
	return l.addToxicOn(kind, attrs, "upstream", "downstream")
}

// addToxicOn adds a toxic on the given streams and returns a func removing it.
func (l *link) addToxicOn(kind string, attrs string, streams ...string) (remove func(), err error) {
	l.mu.Lock()
	l.n++
	base := fmt.Sprintf("%s-%d", kind, l.n)
	l.mu.Unlock()
	var names []string
	for _, stream := range streams {
		name := base + "-" + stream
		body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, kind, stream, attrs)
		if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
			for _, n := range names {
				_ = l.proxy.Toxics.RemoveToxic(context.Background(), n)
			}
			return nil, fmt.Errorf("add %s toxic: %w", kind, err)
		}
		names = append(names, name)
	}
	return func() {
		for _, n := range names {
			_ = l.proxy.Toxics.RemoveToxic(context.Background(), n)
		}
	}, nil
}

// cut blackholes the link: every byte either way is held (not dropped, not
// reset) until the returned heal is called — a network partition as TCP sees
// it. Connections opened during the cut hang too.
func (l *link) cut() (heal func(), err error) { return l.addToxic("timeout", `{"timeout":0}`) }

// slow adds d of latency each way.
func (l *link) slow(d time.Duration) (undo func(), err error) {
	return l.addToxic("latency", `{"latency":`+strconv.FormatInt(d.Milliseconds(), 10)+`,"jitter":0}`)
}

// reset resets (TCP RST) every connection on which the replica sends a
// byte, until the returned undo is called. Only the replica-to-database
// stream carries the toxic, so a query sent meanwhile is dropped before the
// database sees it, and no answer is ever cut off after the database acted:
// every failure it causes is a clean lost connection, which jobq retries.
func (l *link) reset() (undo func(), err error) {
	return l.addToxicOn("reset_peer", `{"timeout":0}`, "upstream")
}

func (l *link) stop() { l.proxy.Stop() }

// node is one replica slot: its link and its current incarnation.
type node struct {
	name string // replica-N
	link *link
	dsn  string // database DSN through the link
	mu   sync.Mutex
	cur  *replica.Replica
	inc  int // incarnation number; the owner id is <name>.<inc>
	wrap []string
	// busy is set while the injector handles this node, so the supervisor
	// does not restart a replica the injector stopped on purpose.
	busy bool
}

func (n *node) setBusy(b bool) {
	n.mu.Lock()
	n.busy = b
	n.mu.Unlock()
}

func (n *node) current() *replica.Replica {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cur
}

// owner is the current incarnation's owner id.
func (n *node) owner() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return fmt.Sprintf("%s.%d", n.name, n.inc)
}

// cluster is the database, the links and the replicas of one run.
type cluster struct {
	cfg     Config
	local   *dbprovider.LocalServer // set when the run owns its database
	server  *dbprovider.Server
	dsn     string // the run's database, direct (harness only)
	drop    func() error
	topo    topology // nil for the single topology
	toxi    *toxiproxy.ApiServer
	nodes   []*node
	logDir  string
	args    []string
	describ string
}

// proxiedDSN rewrites dsn to go through addr.
func proxiedDSN(dsn, addr string) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", err
	}
	c.Net, c.Addr = "tcp", addr
	return c.FormatDSN(), nil
}

func newToxiServer() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
}

// serveArgs are the `jobq serve` flags of every replica.
func (c Config) serveArgs() []string {
	args := []string{
		"--lease", c.Lease.String(), "--rescue-interval", c.RescueInterval.String(),
		"--poll-interval", c.PollInterval.String(), "--poll-jitter", (c.PollInterval / 5).String(),
		"--workers", strconv.Itoa(c.Workers), "--retry-backoff", "200ms",
		"--shutdown-timeout", c.ShutdownTimeout.String(),
		// A modest pool: the shared server's max_connections is shared too.
		"--pool-max-open", strconv.Itoa(c.Workers/2 + 4),
	}
	if c.Strategy != "" {
		args = append(args, "--strategy", c.Strategy)
	}
	for _, s := range c.Sabotage {
		args = append(args, "--sabotage", s)
	}
	return args
}

// startIncarnation starts the node's next incarnation.
func (cl *cluster) startIncarnation(ctx context.Context, n *node) (*replica.Replica, error) {
	n.mu.Lock()
	n.inc++
	owner := fmt.Sprintf("%s.%d", n.name, n.inc)
	wrap := n.wrap
	n.mu.Unlock()
	r, err := replica.Start(ctx, replica.Spec{
		Binary: cl.cfg.Binary, DSN: n.dsn, Name: owner, LogDir: cl.logDir, Args: cl.args, Wrap: wrap, Env: cl.env(),
		ReadyTimeout: 60 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.cur = r
	n.mu.Unlock()
	return r, nil
}

// env is the replicas' extra environment: the testbed's job types (effect,
// poison) are registered, and poison jobs are armed only when the run
// submits some.
func (cl *cluster) env() []string {
	env := []string{jobtypes.TestbedEnv + "=1"}
	if cl.cfg.PoisonJobs > 0 {
		env = append(env, jobtypes.PoisonEnv+"=1")
	}
	return env
}

// supervise restarts, until stop is closed, every replica that exited on
// its own (not stopped by the injector), logging each as a "crash" fault.
func (cl *cluster) supervise(ctx context.Context, stop <-chan struct{}, toDB func(time.Time) time.Time) (crashes func() []checker.Fault) {
	var mu sync.Mutex
	var out []checker.Fault
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, n := range cl.nodes {
				n.mu.Lock()
				r, busy := n.cur, n.busy
				n.mu.Unlock()
				if busy || r == nil || r.Alive() {
					continue
				}
				f := checker.Fault{Kind: "crash", Target: n.name, Owner: n.owner(), Start: toDB(time.Now()),
					Detail: "replica exited on its own; restarted by the harness"}
				sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
				if _, err := cl.startIncarnation(sctx, n); err != nil {
					f.Err = err.Error()
				}
				cancel()
				f.End = toDB(time.Now())
				cl.cfg.Log.Info("replica crashed; restarted", "component", "chaos", "target", n.name, "owner", f.Owner, "err", f.Err)
				mu.Lock()
				out = append(out, f)
				mu.Unlock()
			}
		}
	}()
	return func() []checker.Fault {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return out
	}
}

// stopAll stops every replica gracefully (SIGKILL after timeout) and the
// proxies.
func (cl *cluster) stopAll(timeout time.Duration) {
	var wg sync.WaitGroup
	for _, n := range cl.nodes {
		if r := n.current(); r != nil {
			wg.Add(1)
			go func() { defer wg.Done(); r.Stop(timeout) }()
		}
	}
	wg.Wait()
	for _, n := range cl.nodes {
		n.link.stop()
	}
}
