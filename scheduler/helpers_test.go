package scheduler_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
	testbedtypes "github.com/jobq/jobq/testbed/jobtypes"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fastConfig is a Config with short timers so tests run in seconds.
func fastConfig(owner string) scheduler.Config {
	return scheduler.Config{
		Owner: owner, PollInterval: 50 * time.Millisecond, PollJitter: 10 * time.Millisecond,
		Lease: 2 * time.Second, RescueInterval: 200 * time.Millisecond,
		RetryBackoffBase: 50 * time.Millisecond, Workers: 20, Logger: quietLogger(),
		ShutdownTimeout: 5 * time.Second,
	}
}

// startScheduler starts a scheduler that t's event recorder (events)
// observes besides cfg.Observer, and stops it at cleanup.
func startScheduler(t *testing.T, st scheduler.Store, reg *scheduler.Registry, cfg scheduler.Config) *scheduler.Scheduler {
	t.Helper()
	cfg.Observer = scheduler.Observers(events(t), cfg.Observer)
	s, err := scheduler.New(st, reg, cfg, true)
	if err != nil {
		t.Fatalf("new scheduler: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func submit(t *testing.T, st *store.Store, key, typ, params string, maxRetry int) jobq.Job {
	t.Helper()
	svc := service.New(service.Options{Store: st})
	mr := maxRetry
	job, _, err := svc.Submit(context.Background(), apitype.SubmitRequest{JobKey: key, JobType: typ, Params: []byte(params), MaxRetry: &mr})
	if err != nil {
		t.Fatalf("submit %s: %v", key, err)
	}
	return job
}

// recorders holds each test's event recorder (see events).
var recorders sync.Map // testing.TB → *schedulertest.Recorder

// events returns t's event recorder: every scheduler startScheduler starts
// for t reports to it, so the test waits on their events instead of
// polling the database.
func events(t testing.TB) *schedulertest.Recorder {
	if r, ok := recorders.Load(t); ok {
		return r.(*schedulertest.Recorder)
	}
	r, loaded := recorders.LoadOrStore(t, schedulertest.NewRecorder())
	if !loaded {
		t.Cleanup(func() { recorders.Delete(t) })
	}
	return r.(*schedulertest.Recorder)
}

// waitFinished waits until job id ends with outcome on one of t's
// schedulers (its completion committed) and returns the job's row.
func waitFinished(t *testing.T, st *store.Store, id uint64, outcome jobq.Outcome) jobq.Job {
	t.Helper()
	events(t).WaitFor(t, scheduler.EventCompleted, schedulertest.Finished(id, outcome), slowWait)
	return getJob(t, st, id)
}

// waitRequeued waits until job id's run failed and was re-queued for
// another attempt on one of t's schedulers, and returns the job's row.
func waitRequeued(t *testing.T, st *store.Store, id uint64) jobq.Job {
	t.Helper()
	events(t).WaitFor(t, scheduler.EventCompleted, schedulertest.Requeued(id), slowWait)
	return getJob(t, st, id)
}

// waitSucceeded waits until n runs of t's schedulers succeeded (n
// applied SUCCESS completions).
func waitSucceeded(t *testing.T, n int) {
	t.Helper()
	events(t).WaitN(t, scheduler.EventCompleted, schedulertest.Applied(jobq.OutcomeSuccess), n, slowWait)
}

// slowWait bounds waits for what a loaded machine can stretch (a scheduler
// firing, a batch of jobs finishing): a passing wait returns as soon as its
// condition holds, so the bound only decides when a broken run gives up.
const slowWait = 2 * time.Minute

// waitFor polls cond (a database read) until it holds or the deadline
// passes: only for what no event of this process reports — jobs run by a
// `jobq serve` child process (kill_test.go) and the database clock passing
// while every replica is stopped (ops_test.go).
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond) // waitFor polls: only for what no event reports (see above)
	}
}

func countStatus(st *store.Store, status jobq.JobState) (int64, error) {
	m, err := st.JobCountByStatus(context.Background())
	return m[string(status)], err
}

func scalar(t *testing.T, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	var n sql.NullInt64
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n.Int64
}

func key(prefix string, i int) string { return fmt.Sprintf("%s-%d", prefix, i) }

// getJob reads one job row.
func getJob(t *testing.T, st *store.Store, id uint64) jobq.Job {
	t.Helper()
	j, err := st.JobGet(context.Background(), id)
	if err != nil {
		t.Fatalf("get job %d: %v", id, err)
	}
	return j
}

// executions reads a job's job_execution rows in attempt order.
func executions(t *testing.T, st *store.Store, id uint64) []jobq.Execution {
	t.Helper()
	ex, err := st.JobExecutions(context.Background(), id)
	if err != nil {
		t.Fatalf("executions of job %d: %v", id, err)
	}
	return ex
}

// recv waits for a value on ch (a signal a hook or handler sends).
func recv[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
	var zero T
	return zero
}

// closed waits for ch to be closed (faultstore.Pause.Reached and the like).
func closed(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// gate is a channel a handler blocks on until the test opens it. Open is
// idempotent and registered as a cleanup so a failing test never leaves a
// handler (and so a goroutine) behind.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newGate(t *testing.T) *gate {
	g := &gate{ch: make(chan struct{})}
	t.Cleanup(g.Open)
	return g
}

func (g *gate) Open()                 { g.once.Do(func() { close(g.ch) }) }
func (g *gate) Wait() <-chan struct{} { return g.ch }

// invocations counts handler calls per (owner, attempt).
type invocations struct {
	mu sync.Mutex
	m  map[string]map[int]int // owner → attempt → calls
}

func newInvocations() *invocations { return &invocations{m: map[string]map[int]int{}} }

func (c *invocations) add(job *scheduler.Job) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[job.Owner] == nil {
		c.m[job.Owner] = map[int]int{}
	}
	c.m[job.Owner][job.Attempt]++
}

// byAttempt returns attempt → calls over all owners.
func (c *invocations) byAttempt() map[int]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[int]int{}
	for _, m := range c.m {
		for a, n := range m {
			out[a] += n
		}
	}
	return out
}

// of returns the calls owner made for attempt.
func (c *invocations) of(owner string, attempt int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[owner][attempt]
}

// execSummary renders execution rows as "attempt:owner:outcome" for got/want messages.
func execSummary(ex []jobq.Execution) []string {
	out := make([]string, len(ex))
	for i, e := range ex {
		out[i] = fmt.Sprintf("%d:%s:%s", e.Attempt, e.Owner, e.Outcome)
	}
	return out
}

// completions returns an observer of completions and the channel it
// reports them on.
func completions() (scheduler.Observer, chan completion) {
	ch := make(chan completion, 100)
	return on(scheduler.EventCompleted, func(e scheduler.Event) { ch <- completion{e.Completion, e.Applied} }), ch
}

// on returns an observer calling f with each event of kind.
func on(kind scheduler.EventKind, f func(scheduler.Event)) scheduler.Observer {
	return scheduler.ObserverFunc(func(e scheduler.Event) {
		if e.Kind == kind {
			f(e)
		}
	})
}

type completion struct {
	jobq.Completion
	Applied bool
}

// waitStarted waits until attempt of job id starts on one of t's
// schedulers (its handler is about to run; the job is RUNNING).
func waitStarted(t *testing.T, id uint64, attempt int) {
	t.Helper()
	events(t).WaitFor(t, scheduler.EventStarted, func(e scheduler.Event) bool {
		return e.Fence.ID == id && e.Fence.Attempt == attempt
	}, slowWait)
}

// expireLease moves job id's lease one second into the past on the
// database clock, as it is once its holder stopped renewing it (the tests
// that call it fail the holder's renewals): what a rescuer reads then.
// Nothing waits for the lease to run out.
func expireLease(t *testing.T, st *store.Store, id uint64) {
	t.Helper()
	res, err := st.DB().Exec(`UPDATE job_queue SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ? AND status = 'RUNNING'`, id)
	if err != nil {
		t.Fatalf("expire the lease of job %d: %v", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("expire the lease of job %d: %d rows, %v; want its RUNNING row", id, n, err)
	}
}

// errInjected is a non-retryable failure a fault hook returns (a partition
// the retry policy does not paper over).
var errInjected = errors.New("injected failure")

// syncList collects strings from scheduler goroutines.
type syncList struct {
	mu sync.Mutex
	l  []string
}

func (s *syncList) add(v string) { s.mu.Lock(); s.l = append(s.l, v); s.mu.Unlock() }

func (s *syncList) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.l...)
}

// logOutcomes logs job statuses and execution outcomes (diagnostics for a
// failed test).
func logOutcomes(t *testing.T, st *store.Store) {
	for _, q := range []string{
		"SELECT CONCAT(status, ' retry_times=', retry_times, ' attempt=', attempt), COUNT(*) FROM job_queue GROUP BY 1",
		"SELECT CONCAT('execution ', attempt, ' ', COALESCE(outcome, 'open'), ' ', COALESCE(LEFT(error, 80), '')), COUNT(*) FROM job_attempt GROUP BY 1",
	} {
		rows, err := st.DB().Query(q)
		if err != nil {
			t.Logf("%s: %v", q, err)
			continue
		}
		for rows.Next() {
			var k string
			var n int64
			if rows.Scan(&k, &n) == nil {
				t.Logf("%6d  %s", n, k)
			}
		}
		rows.Close()
	}
}

// bufferedLogger returns a logger whose Warn and Error records are logged
// through t if the test fails (diagnostics without noise).
func bufferedLogger(t *testing.T) *slog.Logger {
	b := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			b.mu.Lock()
			t.Logf("scheduler warnings and errors:\n%s", b.buf.String())
			b.mu.Unlock()
		}
	})
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() < 64<<10 {
		b.buf.Write(p)
	}
	return len(p), nil
}

// registerTestbedTypes registers the built-in job types and the testbed's
// (effect, poison), creating job_effect, as `jobq serve` does under the
// testbed.
func registerTestbedTypes(t *testing.T, st *store.Store, reg *scheduler.Registry) {
	t.Helper()
	jobtypes.Register(reg)
	if err := testbedtypes.RegisterTestbed(context.Background(), reg, st.DB()); err != nil {
		t.Fatal(err)
	}
}
