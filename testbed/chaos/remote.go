package chaos

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/testbed/chaos/checker"
	"github.com/jobq/jobq/testbed/chaos/remoteworker"
)

// Executors: who runs the workload's jobs.
const (
	// ExecutorLocal: the replicas' own handlers (effect, flaky).
	ExecutorLocal = "local"
	// ExecutorRemote: remote workers (remote-effect, remote-flaky), pulled
	// through the worker protocol; the replicas run none of them.
	ExecutorRemote = "remote"
	// ExecutorMixed: every other job remote, the rest local.
	ExecutorMixed = "mixed"
)

// Worker kinds the harness can start (Config.RemoteWorkers).
const (
	WorkerGo     = "go"     // client.Worker (`jobq chaos-worker`), given every replica's address
	WorkerWork   = "work"   // `jobq work` running `jobq chaos-worker --exec` per job
	WorkerPython = "python" // sdk/python (testbed/chaos/workers/worker.py)
	WorkerNode   = "node"   // sdk/node (testbed/chaos/workers/worker.mjs)
)

// WorkerKinds lists every worker kind, the default set.
var WorkerKinds = []string{WorkerGo, WorkerWork, WorkerPython, WorkerNode}

// Worker faults (need Executor remote or mixed). Their Target is a worker.
const (
	FaultWorkerKill      = "worker-kill"      // SIGKILL a worker's process group mid-job, restart it after KillRestartDelay
	FaultWorkerPause     = "worker-pause"     // SIGSTOP a worker for PauseFor (> lease), then SIGCONT: its late completions must be refused
	FaultWorkerPartition = "worker-partition" // blackhole every link of one worker to the replicas for PartitionFor
	FaultAckLoss         = "ack-loss"         // for AckFaultFor, cut the answer of each completion of one worker the first time it is sent (it commits; the worker retries)
	FaultDuplicate       = "duplicate-complete"
	FaultReplicaKill     = "replica-kill" // SIGKILL a replica while workers long-poll it, restart after KillRestartDelay
)

// workerFaults are the faults whose Target is a worker.
var workerFaults = map[string]bool{FaultWorkerKill: true, FaultWorkerPause: true, FaultWorkerPartition: true,
	FaultAckLoss: true, FaultDuplicate: true}

// remoteFault reports whether kind needs remote workers.
func remoteFault(kind string) bool { return workerFaults[kind] || kind == FaultReplicaKill }

// workerProc is one worker slot: its kind, its links to the replicas and
// its current process (incarnation).
type workerProc struct {
	rc    *remoteCluster
	kind  string
	name  string  // e.g. go-1
	links []*link // one per replica, in this worker's server order
	gws   []*gateway

	ackLoss, dup atomic.Bool
	cut          sync.Map // completion bodies whose answer was already cut once

	mu   sync.Mutex
	inc  int
	cmd  *exec.Cmd
	done chan struct{}
	busy bool
}

func (wp *workerProc) id() string {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	return fmt.Sprintf("%s.%d", wp.name, wp.inc)
}

func (wp *workerProc) owner() string { return jobq.WorkerOwnerPrefix + wp.id() }

// remoteCluster is the remote half of a run: the effect recorder, the
// workers, their gateways and links, and the acknowledgement log.
type remoteCluster struct {
	cl        *cluster
	db        *sql.DB
	toDB      func(time.Time) time.Time
	effectURL string
	effectSrv *http.Server
	workers   []*workerProc
	transport *http.Transport

	ackMu    sync.Mutex
	acks     []checker.Ack
	renewals []checker.Renewal
	ackF     *os.File
	stopOnce sync.Once
}

// gateway is one worker's HTTP path to one replica, behind the worker's
// toxiproxy link: it forwards every call to the replica's current
// incarnation and logs each completion with the answer it gave the worker
// (the acknowledgement log), cutting or doubling completions during
// ack-loss and duplicate-complete faults.
type gateway struct {
	wp   *workerProc
	node *node
	ln   net.Listener
	srv  *http.Server
	rp   *httputil.ReverseProxy
}

func (rc *remoteCluster) record(a checker.Ack) {
	rc.ackMu.Lock()
	defer rc.ackMu.Unlock()
	rc.acks = append(rc.acks, a)
	if rc.ackF != nil {
		b, _ := json.Marshal(a)
		_, _ = rc.ackF.Write(append(b, '\n'))
	}
}

// Renewals returns the renewals the workers' heartbeats got.
func (rc *remoteCluster) Renewals() []checker.Renewal {
	rc.ackMu.Lock()
	defer rc.ackMu.Unlock()
	return append([]checker.Renewal(nil), rc.renewals...)
}

// Acks returns the acknowledgement log.
func (rc *remoteCluster) Acks() []checker.Ack {
	rc.ackMu.Lock()
	defer rc.ackMu.Unlock()
	return append([]checker.Ack(nil), rc.acks...)
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rep := g.node.current()
	if rep == nil || !rep.Alive() {
		hangUp(w) // as a dead host: no answer
		return
	}
	if r.URL.Path == "/v1/workers/heartbeat" {
		g.heartbeat(w, r, rep.URL())
		return
	}
	if r.URL.Path != "/v1/workers/complete" && r.URL.Path != "/v1/workers/complete:batch" {
		g.rp.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		hangUp(w)
		return
	}
	rc := g.wp.rc
	// acks are the completions the call carries, one per task token: the
	// single route's body, or each of a batch's. A batch's answer gives
	// each its result (ackResults).
	var reqs []apitype.CompleteRequest
	batch := r.URL.Path == "/v1/workers/complete:batch"
	if !batch {
		var req apitype.CompleteRequest
		_ = json.Unmarshal(body, &req)
		reqs = []apitype.CompleteRequest{req}
	} else {
		var br apitype.CompleteBatchRequest
		_ = json.Unmarshal(body, &br)
		reqs = br.Completions
	}
	sent := rc.toDB(time.Now())
	acks := make([]checker.Ack, len(reqs))
	for i, req := range reqs {
		f, _ := scheduler.ParseTaskToken(req.TaskToken)
		acks[i] = checker.Ack{Worker: g.wp.owner(), Replica: g.node.name, JobID: f.ID, Attempt: f.Attempt, Outcome: req.Outcome, SentAt: sent}
	}
	forward := func() (int, []byte, http.Header, error) {
		fr, err := http.NewRequestWithContext(r.Context(), http.MethodPost, rep.URL()+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			return 0, nil, nil, err
		}
		fr.Header = r.Header.Clone()
		resp, err := rc.transport.RoundTrip(fr)
		if err != nil {
			return 0, nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, resp.Header, err
	}
	record := func(code int, rb []byte, err error, delivered, duplicate bool) {
		for _, a := range ackResults(acks, batch, code, rb) {
			if err != nil {
				a.Result = "error: " + err.Error()
			}
			a.Delivered, a.Duplicate = delivered, duplicate
			rc.record(a)
		}
	}
	code, rb, hdr, err := forward()
	if err == nil && g.wp.dup.Load() {
		// The first copy's answer goes nowhere; the second's is the worker's.
		record(code, rb, nil, false, true)
		code, rb, hdr, err = forward()
	}
	if err != nil {
		record(code, rb, err, false, false)
		hangUp(w)
		return
	}
	if g.wp.ackLoss.Load() && code < 500 {
		// A call is cut the first time its bytes are seen: a worker sends
		// a call whose answer it lost again as it was.
		sum := sha256.Sum256(body)
		if _, seen := g.wp.cut.LoadOrStore(sum, true); !seen {
			record(code, rb, nil, false, false) // the completions were handled, their answer is cut
			hangUp(w)
			return
		}
	}
	record(code, rb, nil, true, false)
	for k, vs := range hdr {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(code)
	_, _ = w.Write(rb)
}

// heartbeat forwards a heartbeat and logs every renewed lease it got.
func (g *gateway) heartbeat(w http.ResponseWriter, r *http.Request, target string) {
	rc := g.wp.rc
	body, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	if err != nil {
		hangUp(w)
		return
	}
	fr, err := http.NewRequestWithContext(r.Context(), http.MethodPost, target+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		hangUp(w)
		return
	}
	fr.Header = r.Header.Clone()
	resp, err := rc.transport.RoundTrip(fr)
	if err != nil {
		hangUp(w)
		return
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		hangUp(w)
		return
	}
	var hr apitype.HeartbeatResponse
	if resp.StatusCode == http.StatusOK && json.Unmarshal(rb, &hr) == nil {
		owner := g.wp.owner()
		rc.ackMu.Lock()
		for _, res := range hr.Results {
			if res.State != "lost" && res.LeaseUntil != nil {
				rc.renewals = append(rc.renewals, checker.Renewal{Worker: owner, JobID: res.JobID, Attempt: res.Attempt, LeaseUntil: res.LeaseUntil.UTC()})
			}
		}
		rc.ackMu.Unlock()
	}
	for k, vs := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(rb)
}

// ackResults gives each of acks the status and result its call's answer
// gave it: a batch answered 200 gives each completion its own (with the
// status the single route would have answered), any other answer gives
// all of them the call's.
func ackResults(acks []checker.Ack, batch bool, code int, b []byte) []checker.Ack {
	out := slices.Clone(acks)
	var br apitype.CompleteBatchResponse
	if batch && code == http.StatusOK && json.Unmarshal(b, &br) == nil && len(br.Results) == len(out) {
		for i, r := range br.Results {
			out[i].Status, out[i].Result = batchItemStatus(r), r.Result
			if r.Error != nil && r.Result != apitype.CompleteApplied {
				out[i].Result = r.Error.Code
			}
		}
		return out
	}
	for i := range out {
		out[i].Status, out[i].Result = code, ackResult(code, b)
	}
	return out
}

// batchItemStatus is the HTTP status the single route answers for what a
// batch answered r.
func batchItemStatus(r apitype.CompleteBatchResult) int {
	switch r.Result {
	case apitype.CompleteApplied:
		return http.StatusOK
	case apitype.CompleteStale, apitype.CompleteConflict:
		return http.StatusConflict
	case apitype.CompleteForbidden:
		return http.StatusForbidden
	}
	if r.Error != nil && r.Error.Code == "too_large" {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// ackResult is the answer's "result" ("applied") or its error code.
func ackResult(code int, b []byte) string {
	if code == http.StatusOK {
		var cr apitype.CompleteResponse
		if json.Unmarshal(b, &cr) == nil && cr.Result != "" {
			return cr.Result
		}
		return "ok"
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
		return e.Error.Code
	}
	return "http " + strconv.Itoa(code)
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// startRemote starts the effect recorder and, for each worker kind, one
// worker with a gateway and a link per replica.
func (cl *cluster) startRemote(ctx context.Context, db *sql.DB, toDB func(time.Time) time.Time) (*remoteCluster, error) {
	cfg := cl.cfg
	rc := &remoteCluster{cl: cl, db: db, toDB: toDB,
		transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 5 * time.Second, ResponseHeaderTimeout: 70 * time.Second}}
	f, err := os.Create(filepath.Join(cl.logDir, "acks.ndjson"))
	if err != nil {
		return nil, err
	}
	rc.ackF = f
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rc.effectURL = "http://" + ln.Addr().String() + "/effect"
	rc.effectSrv = &http.Server{Handler: http.HandlerFunc(rc.serveEffect), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = rc.effectSrv.Serve(ln) }()
	for i, kind := range cfg.RemoteWorkers {
		wp := &workerProc{rc: rc, kind: kind, name: fmt.Sprintf("%s-%d", kind, i+1)}
		for k := range cl.nodes {
			n := cl.nodes[(i+k)%len(cl.nodes)] // worker i starts on replica i mod N
			g := &gateway{wp: wp, node: n}
			target := func(pr *httputil.ProxyRequest) {
				if r := n.current(); r != nil {
					u, _ := url.Parse(r.URL())
					pr.SetURL(u)
				}
			}
			g.rp = &httputil.ReverseProxy{Rewrite: target, Transport: rc.transport,
				ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { hangUp(w) }}
			if g.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				rc.stop(time.Second)
				return nil, err
			}
			g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second}
			go func() { _ = g.srv.Serve(g.ln) }()
			l, err := newLink(cl.toxi, fmt.Sprintf("%s-to-%s", wp.name, n.name), g.ln.Addr().String())
			if err != nil {
				rc.stop(time.Second)
				return nil, err
			}
			wp.gws, wp.links = append(wp.gws, g), append(wp.links, l)
		}
		rc.workers = append(rc.workers, wp)
	}
	for _, wp := range rc.workers {
		if err := wp.start(); err != nil {
			rc.stop(time.Second)
			return nil, err
		}
	}
	return rc, nil
}

// serveEffect writes one effect row of a remote run (POST
// remoteworker.EffectRecord) on the database clock: 204, or 5xx when the
// database refused (the worker's run fails and is retried).
func (rc *remoteCluster) serveEffect(w http.ResponseWriter, r *http.Request) {
	var e remoteworker.EffectRecord
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&e); err != nil || e.JobID == 0 ||
		(e.Kind != checker.EffectNonTx && e.Kind != checker.EffectEnd) {
		http.Error(w, "want {job_id, attempt, kind: non_tx|end, owner}", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if _, err := rc.db.ExecContext(ctx, "INSERT INTO job_effect (job_id, attempt, kind, owner, created_at) VALUES (?, ?, ?, ?, NOW(6))",
		e.JobID, e.Attempt, e.Kind, e.Owner); err != nil {
		http.Error(w, "effect not written", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// start starts the worker's next incarnation.
func (wp *workerProc) start() error {
	rc := wp.rc
	cfg := rc.cl.cfg
	wp.mu.Lock()
	wp.inc++
	id := fmt.Sprintf("%s.%d", wp.name, wp.inc)
	wp.mu.Unlock()
	addrs := make([]string, len(wp.links))
	for i, l := range wp.links {
		addrs[i] = "http://" + l.Addr()
	}
	types := strings.Join(remoteworker.Types, ",")
	conc := strconv.Itoa(cfg.WorkerConcurrency)
	var argv []string
	switch wp.kind {
	case WorkerGo:
		argv = []string{cfg.Binary, "chaos-worker"}
	case WorkerWork:
		argv = []string{cfg.Binary, "work", "--type", types, "--concurrency", conc, "--poll-wait", "5s",
			"--shutdown-timeout", "2s", "--kill-after", "1s", "--", cfg.Binary, "chaos-worker", "--exec"}
	case WorkerPython:
		argv = []string{"python3", filepath.Join(cfg.RepoDir, "testbed/chaos/workers/worker.py")}
	case WorkerNode:
		argv = []string{"node", filepath.Join(cfg.RepoDir, "testbed/chaos/workers/worker.mjs")}
	default:
		return fmt.Errorf("worker kind %q", wp.kind)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(),
		remoteworker.EnvServer+"="+addrs[0], remoteworker.EnvWorkerID+"="+id, remoteworker.EnvTypes+"="+types,
		remoteworker.EnvConcurrency+"="+conc, remoteworker.EnvEffectURL+"="+rc.effectURL, "JOBQ_WORKER_TOKEN=")
	if wp.kind == WorkerGo {
		cmd.Env = append(cmd.Env, remoteworker.EnvServers+"="+strings.Join(addrs[1:], ","))
	}
	logf, err := os.Create(filepath.Join(rc.cl.logDir, id+".log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start worker %s: %w", id, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	wp.mu.Lock()
	wp.cmd, wp.done = cmd, done
	wp.mu.Unlock()
	return nil
}

// signal sends sig to the worker's process group (jobq work's commands too).
func (wp *workerProc) signal(sig syscall.Signal) {
	wp.mu.Lock()
	cmd := wp.cmd
	wp.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	}
}

func (wp *workerProc) exited() <-chan struct{} {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	return wp.done
}

func (wp *workerProc) alive() bool {
	select {
	case <-wp.exited():
		return false
	default:
		return true
	}
}

// stop sends SIGTERM (SIGCONT first, for a paused worker), then SIGKILL
// after timeout.
func (wp *workerProc) stop(timeout time.Duration) {
	if wp.exited() == nil {
		return
	}
	wp.signal(syscall.SIGCONT)
	wp.signal(syscall.SIGTERM)
	select {
	case <-wp.exited():
	case <-time.After(timeout):
		wp.signal(syscall.SIGKILL)
		<-wp.exited()
	}
	wp.signal(syscall.SIGKILL) // orphans of jobq work's commands
}

// supervise restarts, until stop is closed, every worker that exited on its
// own, logging each as a "worker-crash" fault.
func (rc *remoteCluster) supervise(ctx context.Context, stop <-chan struct{}) (crashes func() []checker.Fault) {
	var mu sync.Mutex
	var out []checker.Fault
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, wp := range rc.workers {
				wp.mu.Lock()
				busy := wp.busy
				wp.mu.Unlock()
				if busy || wp.alive() {
					continue
				}
				f := checker.Fault{Kind: "worker-crash", Target: wp.name, Owner: wp.owner(), Start: rc.toDB(time.Now()),
					Detail: "worker exited on its own; restarted by the harness"}
				if err := wp.start(); err != nil {
					f.Err = err.Error()
				}
				f.End = rc.toDB(time.Now())
				rc.cl.cfg.Log.Warn("worker exited; restarted", "component", "chaos", "worker", f.Owner, "err", f.Err)
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

// attachedTo lists the owner ids of the workers that may be talking to
// replica n: those whose only or first address is n, and the Go workers
// (given every replica, they may have moved to n).
func (rc *remoteCluster) attachedTo(n *node) []string {
	var out []string
	for _, wp := range rc.workers {
		if wp.kind == WorkerGo || wp.gws[0].node == n {
			out = append(out, wp.owner())
		}
	}
	return out
}

// stop stops the workers, then their gateways, links and the recorder.
func (rc *remoteCluster) stop(timeout time.Duration) { rc.stopOnce.Do(func() { rc.stopNow(timeout) }) }

func (rc *remoteCluster) stopNow(timeout time.Duration) {
	var wg sync.WaitGroup
	for _, wp := range rc.workers {
		wg.Add(1)
		go func() { defer wg.Done(); wp.stop(timeout) }()
	}
	wg.Wait()
	for _, wp := range rc.workers {
		for _, l := range wp.links {
			l.stop()
		}
		for _, g := range wp.gws {
			_ = g.srv.Close()
		}
	}
	if rc.effectSrv != nil {
		_ = rc.effectSrv.Close()
	}
	rc.transport.CloseIdleConnections()
	rc.ackMu.Lock()
	if rc.ackF != nil {
		_ = rc.ackF.Close()
		rc.ackF = nil
	}
	rc.ackMu.Unlock()
}

// injectWorker injects a worker fault on worker pf.Target (mod the workers).
func (in *injector) injectWorker(ctx context.Context, pf plannedFault, f *checker.Fault) error {
	cfg := in.cl.cfg
	rc := in.cl.remote
	if rc == nil || len(rc.workers) == 0 {
		return fmt.Errorf("fault %s needs --executor remote or mixed", pf.Kind)
	}
	wp := rc.workers[pf.Target%len(rc.workers)]
	wp.mu.Lock()
	wp.busy = true
	wp.mu.Unlock()
	defer func() { wp.mu.Lock(); wp.busy = false; wp.mu.Unlock() }()
	f.Target, f.Owner = wp.name, wp.owner()
	for deadline := time.Now().Add(midJobWait); ; {
		f.RunningAtStart = in.runningOn(ctx, f.Owner)
		if f.RunningAtStart > 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	switch pf.Kind {
	case FaultWorkerKill:
		f.Detail = fmt.Sprintf("worker SIGKILLed (process group), restart after %s", cfg.KillRestartDelay)
		f.Start = in.toDB(time.Now())
		wp.signal(syscall.SIGKILL)
		<-wp.exited()
		sleepCtx(ctx, cfg.KillRestartDelay)
		if err := wp.start(); err != nil {
			return err
		}
	case FaultWorkerPause:
		f.Detail = fmt.Sprintf("worker SIGSTOP for %s (lease %s), then SIGCONT", cfg.PauseFor, cfg.Lease)
		f.Start = in.toDB(time.Now())
		wp.signal(syscall.SIGSTOP)
		sleepCtx(ctx, cfg.PauseFor)
		wp.signal(syscall.SIGCONT)
	case FaultWorkerPartition:
		f.Detail = fmt.Sprintf("every link of the worker to the replicas blackholed for %s", cfg.PartitionFor)
		f.Start = in.toDB(time.Now())
		var heals []func()
		for _, l := range wp.links {
			heal, err := l.cut()
			if err != nil {
				for _, h := range heals {
					h()
				}
				return err
			}
			heals = append(heals, heal)
		}
		sleepCtx(ctx, cfg.PartitionFor)
		for _, h := range heals {
			h()
		}
	case FaultAckLoss:
		f.Detail = fmt.Sprintf("for %s, each completion's first answer cut after it was handled (the worker retries it)", cfg.AckFaultFor)
		f.Start = in.toDB(time.Now())
		wp.ackLoss.Store(true)
		sleepCtx(ctx, cfg.AckFaultFor)
		wp.ackLoss.Store(false)
	case FaultDuplicate:
		f.Detail = fmt.Sprintf("for %s, every completion sent to the replica twice", cfg.AckFaultFor)
		f.Start = in.toDB(time.Now())
		wp.dup.Store(true)
		sleepCtx(ctx, cfg.AckFaultFor)
		wp.dup.Store(false)
	default:
		return fmt.Errorf("unknown worker fault %q", pf.Kind)
	}
	f.End = in.toDB(time.Now())
	return nil
}
