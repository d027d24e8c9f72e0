package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// The replica's timing: a short lease so that lease loss and rescue take
// seconds, not minutes. Workers heartbeat every lease/3.
const (
	lease          = 6 * time.Second
	rescueInterval = 500 * time.Millisecond
	heartbeatEvery = lease / 3
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// impl is one worker implementation under test.
type impl struct {
	name string
	// prepare checks that the implementation's runtime is installed and
	// builds what it needs (once); it returns the command that starts one
	// conformance worker, run from the repository root.
	prepare func(t *testing.T, e *env) []string
	// flags, if set, adds command-line settings the environment cannot
	// carry.
	flags func(w workerSpec) []string
}

var impls = []impl{
	{name: "go", prepare: func(t *testing.T, e *env) []string {
		return []string{filepath.Join(e.bins(t), "goworker")}
	}},
	{name: "work", prepare: func(t *testing.T, e *env) []string {
		lookRuntime(t, "jq", "the conformance exec script parses params with jq")
		return []string{filepath.Join(e.bins(t), "jobq"), "work"}
	}, flags: func(w workerSpec) []string {
		return []string{"--shutdown-timeout", strconv.Itoa(w.shutdownMs) + "ms", "--kill-after", "2s",
			"--exec", "sh " + filepath.Join(repoRoot, "sdk/conformance/testdata/exec_worker.sh")}
	}},
	{name: "python", prepare: func(t *testing.T, e *env) []string {
		lookRuntime(t, "python3", "the Python library's conformance worker")
		return []string{"python3", "sdk/python/conformance_worker.py"}
	}},
	{name: "node", prepare: func(t *testing.T, e *env) []string {
		lookRuntime(t, "node", "the Node library's conformance worker")
		return []string{"node", "sdk/node/conformance/worker.js"}
	}},
	{name: "java", prepare: func(t *testing.T, e *env) []string {
		lookRuntime(t, "java", "the Java library's conformance worker")
		lookRuntime(t, "javac", "building the Java library (sdk/java/build.sh)")
		javaBuild.Do(func() {
			if javaJarFresh() {
				return
			}
			cmd := exec.Command("bash", "sdk/java/build.sh", "--no-tests")
			cmd.Dir = repoRoot
			javaBuildOut, javaBuildErr = cmd.CombinedOutput()
		})
		if javaBuildErr != nil {
			t.Fatalf("java: bash sdk/java/build.sh --no-tests: %v\n%s", javaBuildErr, javaBuildOut)
		}
		return []string{"sdk/java/conformance-worker.sh"}
	}},
}

var (
	javaBuild    sync.Once
	javaBuildOut []byte
	javaBuildErr error
)

// javaJarFresh reports whether sdk/java/build/jobq-worker.jar is newer
// than every other file under sdk/java (the build takes about 30 s on a
// busy 2-core machine; an edited source rebuilds it).
func javaJarFresh() bool {
	jar, err := os.Stat(filepath.Join(repoRoot, "sdk/java/build/jobq-worker.jar"))
	if err != nil {
		return false
	}
	newer := false
	err = filepath.WalkDir(filepath.Join(repoRoot, "sdk/java"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "build" {
			return fs.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		newer = newer || info.ModTime().After(jar.ModTime())
		return nil
	})
	return err == nil && !newer
}

// lookRuntime fails the test — never skips it — when a runtime is missing:
// make test installs every one (scripts/test-deps.sh).
func lookRuntime(t *testing.T, bin, what string) {
	t.Helper()
	if _, err := exec.LookPath(bin); err != nil {
		t.Fatalf("%s not found on PATH; %s needs it. Run make test-deps (scripts/test-deps.sh) to install it.", bin, what)
	}
}

var repoRoot = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Clean(filepath.Join(wd, "../.."))
}()

// rule is one protocol rule the suite drives a worker through.
type rule struct {
	name  string // subtest name
	title string // what failure messages call it
	// dedicated rules start their own worker processes; the others share
	// one worker per implementation.
	dedicated bool
	run       func(r *ruleRun)
}

// jobType is the job type rule r uses for implementation impl: each
// (implementation, rule) pair has its own, so they run in parallel
// without taking each other's jobs.
func jobType(impl, rule string) string {
	return "cf-" + impl + "-" + strings.ReplaceAll(rule, "_", "-")
}

// env is the replica and the proxy every implementation talks to.
type env struct {
	replica *app.Replica
	rec     *schedulertest.Recorder // the replica's events
	api     *client.Client          // straight to the replica (the suite's own calls)
	base    string                  // the replica's base URL
	proxy   *proxy                  // what the workers talk to

	binOnce sync.Once
	binDir  string
	binErr  error
	binOut  []byte
}

// bins builds the Go conformance worker and jobq (once) and returns the
// directory holding them.
func (e *env) bins(t *testing.T) string {
	e.binOnce.Do(func() {
		e.binDir, e.binErr = os.MkdirTemp("", "jobq-conformance-bin-")
		if e.binErr != nil {
			return
		}
		args := []string{"build", "-o", e.binDir + "/"}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./cmd/jobq", "./sdk/conformance/goworker")...)
		cmd.Dir = repoRoot
		e.binOut, e.binErr = cmd.CombinedOutput()
	})
	if e.binErr != nil {
		t.Fatalf("go build ./cmd/jobq ./sdk/conformance/goworker: %v\n%s", e.binErr, e.binOut)
	}
	return e.binDir
}

func startEnv(t *testing.T, types []string) *env {
	t.Helper()
	rec := schedulertest.NewRecorder()
	cfg := app.Config{
		DSN: testdb.DSN(t), Listen: "127.0.0.1:0", Logger: quiet, NoUI: true,
		Registry: scheduler.NewRegistry(), // no in-process handler: every type here is remote
		Scheduler: scheduler.Config{Owner: "conformance", PollInterval: 200 * time.Millisecond,
			PollJitter: 40 * time.Millisecond, Lease: lease, RescueInterval: rescueInterval,
			RetryBackoffBase: 50 * time.Millisecond, RetryBackoffMax: 200 * time.Millisecond,
			PromoteInterval: 200 * time.Millisecond, Workers: 10, ShutdownTimeout: 5 * time.Second, Logger: quiet,
			Observer: rec},
	}
	remoteTypes(&cfg, types)
	r, err := app.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start replica: %v", err)
	}
	e := &env{replica: r, rec: rec, base: "http://" + r.Addr}
	e.api = client.New(e.base)
	e.api.HTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	e.proxy = newProxy(t, e.base)
	t.Cleanup(func() {
		_ = r.Stop(context.Background())
		if e.binDir != "" {
			_ = os.RemoveAll(e.binDir)
		}
	})
	return e
}

// TestConformance drives every worker implementation — the Go library,
// `jobq work`, and the Python, Node and Java libraries — through the rules
// of the worker protocol (docs/workers.md) against a real replica, behind a
// recording proxy. Subtests: TestConformance/<implementation>/<rule>.
func TestConformance(t *testing.T) {
	var types []string
	for _, im := range impls {
		for _, r := range rules {
			types = append(types, jobType(im.name, r.name))
		}
	}
	e := startEnv(t, types)
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			t.Parallel()
			s := &implSuite{env: e, impl: im}
			s.argv = im.prepare(t, e)
			var shared []string
			for _, r := range rules {
				if !r.dedicated {
					shared = append(shared, jobType(im.name, r.name))
				}
			}
			s.shared = s.startWorker(t, workerSpec{id: im.name + "-shared", types: shared, concurrency: 8, shutdownMs: 5000})
			for _, r := range rules {
				t.Run(r.name, func(t *testing.T) {
					t.Parallel()
					r.run(&ruleRun{T: t, s: s, rule: r, typ: jobType(im.name, r.name)})
				})
			}
		})
	}
}

// implSuite is one implementation's run.
type implSuite struct {
	*env
	impl   impl
	argv   []string
	shared *proc
}

// workerSpec is one worker process's settings.
type workerSpec struct {
	id          string
	types       []string
	concurrency int
	shutdownMs  int
}

// proc is a running worker process.
type proc struct {
	id     string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// startWorker starts a conformance worker of the implementation; it is
// stopped (SIGTERM, then SIGKILL) when the test ends, and its log is shown
// when the test failed.
func (s *implSuite) startWorker(t *testing.T, w workerSpec) *proc {
	t.Helper()
	argv := append([]string(nil), s.argv...)
	if s.impl.flags != nil {
		argv = append(argv, s.impl.flags(w)...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(),
		"JOBQ_SERVER="+s.proxy.URL(), "JOBQ_WORKER_TOKEN="+workerToken, "JOBQ_WORKER_ID="+w.id, "JOBQ_TYPES="+strings.Join(w.types, ","),
		"JOBQ_CONCURRENCY="+strconv.Itoa(w.concurrency), "JOBQ_SHUTDOWN_TIMEOUT_MS="+strconv.Itoa(w.shutdownMs))
	p := &proc{id: w.id, cmd: cmd, out: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s worker %s: %v", s.impl.name, strings.Join(argv, " "), err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(20 * time.Second):
				t.Errorf("%s worker %s did not exit within 20s of SIGTERM; killed", s.impl.name, w.id)
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-p.exited
			}
		}
		if strings.Contains(p.out.tail(1<<30), "WARNING: DATA RACE") {
			t.Errorf("%s worker %s reported a data race", s.impl.name, w.id)
		}
		if t.Failed() {
			t.Logf("log of %s worker %s (%s):\n%s", s.impl.name, w.id, strings.Join(argv, " "), p.out.tail(6000))
		}
	})
	return p
}

// signal sends sig to the worker process.
func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to worker %s: %v", sig, p.id, err)
	}
}

// syncBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.b.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// ruleRun is one rule against one implementation.
type ruleRun struct {
	*testing.T
	s    *implSuite
	rule rule
	typ  string
}

// fatalf fails the rule with a message that names it.
func (r *ruleRun) fatalf(format string, args ...any) {
	r.Helper()
	r.Fatalf("%s worker breaks rule %q: %s", r.s.impl.name, r.rule.title, fmt.Sprintf(format, args...))
}

var keySeq atomic.Int64

// submit creates a job of the rule's type with params and maxRetry.
func (r *ruleRun) submit(params string, maxRetry int) uint64 {
	r.Helper()
	key := fmt.Sprintf("%s-%d-%d", r.typ, time.Now().UnixNano(), keySeq.Add(1))
	j, _, err := r.s.api.Submit(context.Background(), apitype.SubmitRequest{
		JobKey: key, JobType: r.typ, Params: json.RawMessage(params), MaxRetry: &maxRetry})
	if err != nil {
		r.Fatalf("submit %s: %v", params, err)
	}
	return j.ID
}

// jobView is a job as GET /v1/jobs/{id} shows it, with its output.
type jobView struct {
	apitype.Job
	Output json.RawMessage `json:"output"`
}

// execView is an attempt as GET /v1/jobs/{id}/executions shows it.
type execView struct {
	apitype.Execution
	Output          json.RawMessage `json:"output"`
	Progress        *float64        `json:"progress"`
	ProgressMessage string          `json:"progress_message"`
}

func (r *ruleRun) get(id uint64) jobView {
	r.Helper()
	var j jobView
	if err := r.getJSON("/v1/jobs/"+strconv.FormatUint(id, 10), &j); err != nil {
		r.Fatalf("get job %d: %v", id, err)
	}
	return j
}

func (r *ruleRun) executions(id uint64) []execView {
	r.Helper()
	var l struct {
		Executions []execView `json:"executions"`
	}
	if err := r.getJSON("/v1/jobs/"+strconv.FormatUint(id, 10)+"/executions", &l); err != nil {
		r.Fatalf("executions of job %d: %v", id, err)
	}
	return l.Executions
}

func (r *ruleRun) getJSON(path string, out any) error {
	resp, err := r.s.api.HTTP.Get(r.s.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d: %s", path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// post sends body to the replica directly (the suite's own worker calls)
// and returns the status and the answer.
func (r *ruleRun) post(path, body string) (int, []byte) {
	r.Helper()
	resp, err := r.s.api.HTTP.Post(r.s.base+path, "application/json", strings.NewReader(body))
	if err != nil {
		r.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// The waits. The replica runs in this process, so what it does to a job —
// a fetch claimed it, a completion was applied, a rescue took it back — is
// waited for on its events (env.rec), which come after the commit: the job
// is in the database as the event says when the wait returns. What only the
// worker's side shows (a fetch waiting, a heartbeat or completion it sent)
// is waited for at the proxy, which wakes every wait on each request it
// records. Past its bound, a wait fails the rule naming what it waited for
// and what it last saw.

// awaitEvent waits for the replica's first event of kind that pred
// accepts; past within it fails the rule with what and last().
func (r *ruleRun) awaitEvent(within time.Duration, what string, kind scheduler.EventKind, pred func(scheduler.Event) bool, last func() string) scheduler.Event {
	r.Helper()
	e, ok := r.s.rec.Await(kind, pred, within)
	if !ok {
		r.fatalf("%s: not within %v; last seen: %s", what, within, last())
	}
	return e
}

// awaitProxy waits until cond, over what the proxy recorded, holds: it is
// checked again at each change the proxy sees. Past within it fails the
// rule with what cond last said.
func (r *ruleRun) awaitProxy(within time.Duration, what string, cond func() (bool, string)) {
	r.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		changed := r.s.proxy.changes()
		ok, last := cond()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			r.fatalf("%s: not within %v; last seen: %s", what, within, last)
		}
	}
}

// finished waits until job id ends for good on the replica — an applied
// completion that leaves nothing to retry — and returns the job, which
// must then have status.
func (r *ruleRun) finished(id uint64, status string, within time.Duration) jobView {
	r.Helper()
	r.awaitEvent(within, fmt.Sprintf("job %d reaches %s", id, status), scheduler.EventCompleted, func(e scheduler.Event) bool {
		c := e.Completion
		return e.Applied && c.ID == id && !c.Retry && c.Outcome != jobq.OutcomeReleased
	}, func() string { return describe(r.get(id)) })
	return r.wantStatus(id, status)
}

// ended waits until attempt of job id ends on the replica — its applied
// completion (a release included), or its rescue — and returns the job,
// which must then have status.
func (r *ruleRun) ended(id uint64, attempt int, status string, within time.Duration) jobView {
	r.Helper()
	f := jobq.Fence{ID: id, Attempt: attempt}
	r.awaitEvent(within, fmt.Sprintf("job %d attempt %d ends %s", id, attempt, status), "", func(e scheduler.Event) bool {
		return (e.Kind == scheduler.EventCompleted && e.Applied && e.Completion.Fence == f) ||
			(e.Kind == scheduler.EventRescued && slices.Contains(e.Fences, f))
	}, func() string { return describe(r.get(id)) })
	return r.wantStatus(id, status)
}

// wantStatus returns job id, which must have status.
func (r *ruleRun) wantStatus(id uint64, status string) jobView {
	r.Helper()
	j := r.get(id)
	if string(j.Status) != status {
		r.fatalf("job %d: %s, want %s", id, describe(j), status)
	}
	return j
}

// fetched waits until a fetch claims attempt of job id (0: any attempt),
// and returns the job, which must then be RUNNING for worker w (nil: any).
func (r *ruleRun) fetched(id uint64, attempt int, w *proc) jobView {
	r.Helper()
	who := "a worker"
	if w != nil {
		who = "worker " + w.id
	}
	r.awaitEvent(20*time.Second, fmt.Sprintf("%s fetches job %d", who, id), scheduler.EventFetchClaimed, func(e scheduler.Event) bool {
		return slices.ContainsFunc(e.Jobs, func(j jobq.ClaimedJob) bool { return j.ID == id && (attempt == 0 || j.Attempt == attempt) })
	}, func() string { return describe(r.get(id)) })
	j := r.get(id)
	if j.Status != "RUNNING" || (w != nil && j.Owner != "worker:"+w.id) || (attempt != 0 && j.Attempt != attempt) {
		r.fatalf("job %d after its fetch: %s, want RUNNING for %s", id, describe(j), who)
	}
	return j
}

func describe(j jobView) string {
	return fmt.Sprintf("status=%s attempt=%d retry_times=%d owner=%q last_error=%q output=%s",
		j.Status, j.Attempt, j.RetryTimes, j.Owner, j.LastError, j.Output)
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// completion is a completion body's fields.
type completion struct {
	TaskToken string          `json:"task_token"`
	Outcome   string          `json:"outcome"`
	Output    json.RawMessage `json:"output"`
	Error     string          `json:"error"`
	Retry     *bool           `json:"retry"`
}

func parseCompletion(b []byte) completion {
	var c completion
	_ = json.Unmarshal(b, &c)
	return c
}

// errorBody is an error answer's fields.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"error"`
}

func parseError(b []byte) errorBody {
	var e errorBody
	_ = json.Unmarshal(b, &e)
	return e
}
