package main

// End-to-end tests of issue 7's operations commands: each runs the real
// `jobq` command tree (kong) against a real replica (app.Start: HTTP API +
// scheduler) on a real database.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
	"github.com/jobq/jobq/service"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(workHelperEnv); spec != "" {
		workHelper(spec) // a `jobq work` process for TestWorkKilledTakesItsCommand
	}
	testdb.Main(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// noKeepAlive leaves no idle connection (and goroutine) behind for goleak.
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// startReplica runs one replica on a fresh database and returns it with a
// client of its API.
func startReplica(t *testing.T, periodic []apitype.PeriodicRequest) (*app.Replica, *client.Client) {
	t.Helper()
	dsn := testdb.DSN(t)
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	r, err := app.Start(context.Background(), app.Config{
		DSN: dsn, Listen: "127.0.0.1:0", Registry: reg, Logger: quiet, Periodic: periodic,
		Scheduler: scheduler.Config{Owner: "cli-test", Observer: events(t), PollInterval: 100 * time.Millisecond, PollJitter: 20 * time.Millisecond,
			Lease: 2 * time.Second, RescueInterval: time.Second, RetryBackoffBase: 50 * time.Millisecond,
			Workers: 10, ShutdownTimeout: 5 * time.Second, Logger: quiet},
	})
	if err != nil {
		t.Fatalf("start replica: %v", err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r, client.New("http://" + r.Addr)
}

var stdoutMu sync.Mutex // runCLI swaps os.Stdout

// runCLI runs `jobq args…` in process and returns what it printed.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var cli CLI
	parser, err := kong.New(&cli, kong.Name("jobq"), defaultVars(), kong.Exit(func(int) { t.Fatalf("kong exited on %v", args) }))
	if err != nil {
		t.Fatal(err)
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		return "", err
	}
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = wr
	out := make(chan string)
	go func() { b, _ := io.ReadAll(rd); out <- string(b) }()
	err = kctx.Run(&Globals{Log: quiet, Ctx: context.Background()})
	wr.Close()
	os.Stdout = old
	return <-out, err
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("jobq %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

// recorders holds each test's event recorder (see events).
var recorders sync.Map // testing.TB → *schedulertest.Recorder

// events returns t's event recorder, which observes the replica
// startReplica starts for t.
func events(t testing.TB) *schedulertest.Recorder {
	r, loaded := recorders.LoadOrStore(t, schedulertest.NewRecorder())
	if !loaded {
		t.Cleanup(func() { recorders.Delete(t) })
	}
	return r.(*schedulertest.Recorder)
}

// awaitJob waits until job id is in status, on the replica's events: the
// k-th event that can leave it there (its start for RUNNING, a final
// completion for SUCCESS, FAILED or CANCELED), then a read through the API
// that must show status — else the next such event (a retried job ends
// more than once).
func awaitJob(t *testing.T, c *client.Client, id uint64, status jobq.JobState, d time.Duration) apitype.Job {
	t.Helper()
	kind, pred := scheduler.EventCompleted, schedulertest.Finished(id, jobq.Outcome(status))
	if status == jobq.StateRunning {
		kind, pred = scheduler.EventStarted, schedulertest.Job(id)
	}
	for k := 1; ; k++ {
		events(t).WaitN(t, kind, pred, k, d)
		j, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get job %d: %v", id, err)
		}
		if j.Status == status {
			return j
		}
	}
}

func submitJob(t *testing.T, c *client.Client, req apitype.SubmitRequest) apitype.Job {
	t.Helper()
	j, _, err := c.Submit(context.Background(), req)
	if err != nil {
		t.Fatalf("submit %s: %v", req.JobKey, err)
	}
	return j
}

func ptr[T any](v T) *T { return &v }

func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// pause/resume/limit/types, stats, bulk retry, cancel and purge, each
// through the CLI against a running replica.
func TestOpsCLIJobCommands(t *testing.T) {
	for _, transport := range []string{"http", "grpc"} {
		t.Run(transport, func(t *testing.T) { testOpsCLIJobCommands(t, transport) })
	}
}

func testOpsCLIJobCommands(t *testing.T, transport string) {
	r, c := startReplica(t, nil)
	srv, tr := "--server=http://"+r.Addr, "--transport="+transport
	ctx := context.Background()

	// purge first: jobq's ids grow with create_time, and the cleaner's walk
	// stops at the first young job, so the old jobs must hold the lowest ids.
	// Three jobs finished 8 days ago go, with their executions; the rest stay.
	db := r.Store.DB()
	if _, err := db.Exec(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, run_at, attempt, finished_at, create_time, update_time)
		SELECT CONCAT('ancient-', seq), 'noop', '{}', REPEAT('0', 64), 'SUCCESS', NOW(6) - INTERVAL 9 DAY, 1,
		       NOW(6) - INTERVAL 8 DAY, NOW(6) - INTERVAL 9 DAY, NOW(6) - INTERVAL 8 DAY FROM seq_1_to_3`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO job_execution (job_id, attempt, owner, started_at, finished_at, outcome)
		SELECT id, 1, 'gone', create_time, finished_at, 'SUCCESS' FROM job_queue WHERE job_key LIKE 'ancient-%'`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, run_at, attempt, finished_at, create_time, update_time)
		VALUES ('young-done', 'noop', '{}', REPEAT('0', 64), 'SUCCESS', NOW(6), 1, NOW(6), NOW(6), NOW(6))`); err != nil {
		t.Fatal(err)
	}
	var before int
	_ = db.QueryRow("SELECT COUNT(*) FROM job_queue").Scan(&before)
	res := decode[apitype.PurgeResult](t, mustCLI(t, "purge", "--older-than", "7d", srv, tr))
	if res.Jobs != 3 || res.Executions != 3 || res.Batches != 1 {
		t.Fatalf("purge = %+v, want 3 jobs, 3 executions, 1 batch", res)
	}
	var after int
	_ = db.QueryRow("SELECT COUNT(*) FROM job_queue").Scan(&after)
	if after != before-3 || after != 1 {
		t.Fatalf("jobs after purge = %d, want %d", after, before-3)
	}

	// pause: a due sleep job is not claimed; stats sees it waiting.
	if tc := decode[apitype.TypeControl](t, mustCLI(t, "pause", "sleep", srv, tr)); !tc.Paused || tc.JobType != "sleep" {
		t.Fatalf("pause printed %+v", tc)
	}
	mark := events(t).Mark()
	waiting := submitJob(t, c, apitype.SubmitRequest{JobKey: "paused-1", JobType: "sleep",
		RunAt: ptr(time.Now().UTC().Add(-10 * time.Second).Format(time.RFC3339Nano))})
	events(t).WaitAfterN(t, mark, scheduler.EventScanned, nil, 5, 30*time.Second) // five scans since the submit
	if j, _ := c.Get(ctx, waiting.ID); j.Status != jobq.StateWaiting || j.Attempt != 0 {
		t.Fatalf("job of a paused type: status=%s attempt=%d, want WAITING 0", j.Status, j.Attempt)
	}
	st := decode[apitype.QueueStats](t, mustCLI(t, "stats", "--json", srv, tr))
	if st.ByStatus[string(jobq.StateWaiting)] != 1 || st.ByStatus[string(jobq.StateSuccess)] != 1 || len(st.ByTypeStatus) != 2 ||
		st.ByTypeStatus[0] != (apitype.TypeStatusCount{JobType: "noop", Status: "SUCCESS", Count: 1}) ||
		st.ByTypeStatus[1] != (apitype.TypeStatusCount{JobType: "sleep", Status: "WAITING", Count: 1}) {
		t.Fatalf("stats counts = %v %v, want noop SUCCESS 1 and sleep WAITING 1", st.ByStatus, st.ByTypeStatus)
	}
	if st.OldestWaitingSeconds == nil || *st.OldestWaitingSeconds < 10 || *st.OldestWaitingSeconds > 60 {
		t.Fatalf("oldest_waiting_seconds = %v, want 10–60", st.OldestWaitingSeconds)
	}
	if st.Created != 2 || st.WindowSeconds != 60 || st.CreatedPerSecond != 2.0/60 {
		t.Fatalf("recent: created=%d window=%g rate=%g, want 2 (young-done, paused-1), 60, 2/60", st.Created, st.WindowSeconds, st.CreatedPerSecond)
	}
	if out := mustCLI(t, "stats", "-o", "table", srv, tr); !strings.Contains(out, "oldest waiting") || !strings.Contains(out, "sleep") {
		t.Fatalf("stats table:\n%s", out)
	}
	types := decode[[]apitype.TypeControl](t, mustCLI(t, "types", srv, tr))
	if len(types) != 1 || !types[0].Paused || types[0].MaxRunning != 0 {
		t.Fatalf("types = %+v", types)
	}
	if tc := decode[apitype.TypeControl](t, mustCLI(t, "resume", "sleep", srv, tr)); tc.Paused {
		t.Fatalf("resume printed %+v", tc)
	}
	awaitJob(t, c, waiting.ID, jobq.StateSuccess, 5*time.Second)

	// limit
	mark = events(t).Mark()
	if tc := decode[apitype.TypeControl](t, mustCLI(t, "limit", "sleep", "2", srv, tr)); tc.MaxRunning != 2 {
		t.Fatalf("limit printed %+v", tc)
	}
	// The replica that took the call re-reads its limits at once, not after
	// its 30s refresh interval.
	events(t).WaitAfter(t, mark, scheduler.EventOpsRefreshed, nil, 2*time.Second)
	if got := r.Scheduler.LimitedTypes(); len(got) != 1 || got["sleep"] != 2 {
		t.Fatalf("replica's limited types after the refresh the API call asked for = %v, want map[sleep:2]", got)
	}
	limited := submitJob(t, c, apitype.SubmitRequest{JobKey: "limited-1", JobType: "sleep", Params: json.RawMessage(`{"ms":10}`)})
	awaitJob(t, c, limited.ID, jobq.StateSuccess, 5*time.Second)
	mark = events(t).Mark()
	if tc := decode[apitype.TypeControl](t, mustCLI(t, "limit", "sleep", "0", srv, tr)); tc.MaxRunning != 0 {
		t.Fatalf("limit 0 printed %+v", tc)
	}
	// The refresh that call asked for lands before the next mark, so the
	// rate limit's wait below is not answered by it.
	events(t).WaitAfter(t, mark, scheduler.EventOpsRefreshed, nil, 2*time.Second)
	if got := r.Scheduler.LimitedTypes(); len(got) != 0 {
		t.Fatalf("replica's limited types after limit 0 = %v, want none", got)
	}

	// rate limit: set, shown by types, cleared.
	mark = events(t).Mark()
	tc := decode[apitype.TypeControl](t, mustCLI(t, "types", "limit-rate", "sleep", "--starts", "5", "--per", "500ms", srv, tr))
	if tc.RateLimit == nil || tc.RateLimit.Starts != 5 || tc.RateLimit.Period != "500ms" || tc.RateLimit.PeriodMs != 500 {
		t.Fatalf("limit-rate printed %+v (rate limit %+v)", tc, tc.RateLimit)
	}
	events(t).WaitAfter(t, mark, scheduler.EventOpsRefreshed, nil, 2*time.Second)
	if got := r.Scheduler.LimitedTypes(); len(got) != 1 {
		t.Fatalf("replica's limited types with a rate limit = %v, want sleep", got)
	}
	if out := mustCLI(t, "types", "-o", "table", srv, tr); !strings.Contains(out, "5/500ms") {
		t.Fatalf("types table without the rate limit:\n%s", out)
	}
	rated := submitJob(t, c, apitype.SubmitRequest{JobKey: "rated-1", JobType: "sleep", Params: json.RawMessage(`{"ms":10}`)})
	awaitJob(t, c, rated.ID, jobq.StateSuccess, 5*time.Second)
	// per key: set over the same transport, shown, and a keyed job runs.
	tc = decode[apitype.TypeControl](t, mustCLI(t, "types", "limit-rate", "sleep", "--starts", "5", "--per", "500ms", "--per-key", srv, tr))
	if tc.RateLimit == nil || !tc.RateLimit.PerKey || tc.RateLimit.Starts != 5 {
		t.Fatalf("limit-rate --per-key printed %+v (rate limit %+v)", tc, tc.RateLimit)
	}
	if out := mustCLI(t, "types", "-o", "table", srv, tr); !strings.Contains(out, "5/500ms per key") {
		t.Fatalf("types table without the per-key rate limit:\n%s", out)
	}
	keyed := submitJob(t, c, apitype.SubmitRequest{JobKey: "rated-2", JobType: "sleep", Params: json.RawMessage(`{"ms":10}`), RateKey: "acct-1"})
	if keyed.RateKey != "acct-1" {
		t.Fatalf("submit with a rate key returned %+v", keyed)
	}
	awaitJob(t, c, keyed.ID, jobq.StateSuccess, 5*time.Second)
	if tc := decode[apitype.TypeControl](t, mustCLI(t, "types", "limit-rate", "sleep", "--clear", srv, tr)); tc.RateLimit != nil {
		t.Fatalf("limit-rate --clear printed %+v", tc)
	}

	// cancel a RUNNING job through the CLI.
	long := submitJob(t, c, apitype.SubmitRequest{JobKey: "long", JobType: "sleep", Params: json.RawMessage(`{"ms":30000}`)})
	awaitJob(t, c, long.ID, jobq.StateRunning, 5*time.Second)
	if j := decode[apitype.Job](t, mustCLI(t, "cancel", fmt.Sprint(long.ID), srv, tr)); !j.CancelRequested {
		t.Fatalf("cancel printed %+v", j)
	}
	hb := r.Scheduler.Config().HeartbeatInterval
	awaitJob(t, c, long.ID, jobq.StateCanceled, hb+2*time.Second)

	// bulk retry: flaky fails its first attempt; with max_retry 0 it ends FAILED.
	var flaky []uint64
	for i := range 3 {
		flaky = append(flaky, submitJob(t, c, apitype.SubmitRequest{JobKey: fmt.Sprint("flaky-", i), JobType: "flaky", MaxRetry: ptr(0)}).ID)
	}
	other := submitJob(t, c, apitype.SubmitRequest{JobKey: "effect-fails", JobType: "flaky", MaxRetry: ptr(0), Params: json.RawMessage(`{"failures":5}`)})
	for _, id := range append(flaky, other.ID) {
		awaitJob(t, c, id, jobq.StateFailed, 5*time.Second)
	}
	if _, err := runCLI(t, "retry", srv, tr); err == nil || !strings.Contains(err.Error(), "--status") {
		t.Fatalf("retry without id or --status: err = %v", err)
	}
	if res := decode[apitype.RetryBulkResult](t, mustCLI(t, "retry", "--status", "FAILED", "--type", "flaky", srv, tr)); res.Retried != 4 {
		t.Fatalf("bulk retry retried %d, want 4", res.Retried)
	}
	for _, id := range flaky {
		if j := awaitJob(t, c, id, jobq.StateSuccess, 5*time.Second); j.Attempt != 2 || j.RetryTimes != 0 {
			t.Fatalf("retried job %d: attempt=%d retry_times=%d, want 2, 0", id, j.Attempt, j.RetryTimes)
		}
	}
	awaitJob(t, c, other.ID, jobq.StateFailed, 5*time.Second) // its 2nd attempt fails too
	if res := decode[apitype.RetryBulkResult](t, mustCLI(t, "retry", "--status", "CANCELED", "--type", "noop", srv, tr)); res.Retried != 0 {
		t.Fatalf("bulk retry of no job retried %d", res.Retried)
	}

	// periodic add, list and rm over the same transport.
	p := decode[apitype.Periodic](t, mustCLI(t, "periodic", "add", "--name", "hourly", "--cron", "@hourly", "--type", "noop", srv, tr))
	if p.Name != "hourly" || p.Source != jobq.PeriodicSourceAPI || p.MaxRetry != 3 {
		t.Fatalf("periodic add printed %+v", p)
	}
	if list := decode[[]apitype.Periodic](t, mustCLI(t, "periodic", "list", srv, tr)); len(list) != 1 || list[0].Name != "hourly" {
		t.Fatalf("periodic list = %+v", list)
	}
	if out := mustCLI(t, "periodic", "rm", "hourly", srv, tr); out != "deleted hourly\n" {
		t.Fatalf("periodic rm printed %q", out)
	}
	if _, err := runCLI(t, "periodic", "rm", "hourly", srv, tr); err == nil || !strings.Contains(err.Error(), `periodic schedule "hourly" not found`) {
		t.Fatalf("second rm: err = %v, want not found naming the schedule", err)
	}
	if _, err := runCLI(t, "get", "999999", srv, tr); err == nil || !strings.Contains(err.Error(), "job 999999 not found") {
		t.Fatalf("get of a missing job: err = %v, want not found naming the id", err)
	}
}

// Periodic schedules through the CLI and from serve's configuration.
func TestOpsCLIPeriodic(t *testing.T) {
	reqs, err := OpsFlags{Periodic: []string{`cfg=*/1 * * * * *;noop;{"a":"x;y"};once`}}.PeriodicRequests()
	if err != nil {
		t.Fatal(err)
	}
	r, c := startReplica(t, reqs)
	srv := "--server=http://" + r.Addr
	ctx := context.Background()

	list := decode[[]apitype.Periodic](t, mustCLI(t, "periodic", "list", srv))
	if len(list) != 1 || list[0].Name != "cfg" || list[0].Source != jobq.PeriodicSourceConfig ||
		list[0].Misfire != jobq.MisfireOnce || compact(t, list[0].Params) != `{"a":"x;y"}` || list[0].Cron != "*/1 * * * * *" {
		t.Fatalf("configured schedule = %+v", list)
	}
	p := decode[apitype.Periodic](t, mustCLI(t, "periodic", "add", "--name", "tick", "--cron", "* * * * * *", "--type", "noop", "--params", `{"n":1}`, srv))
	if p.Name != "tick" || p.Source != jobq.PeriodicSourceAPI || p.Misfire != jobq.MisfireSkip || p.MaxRetry != 3 || p.Overlap != jobq.OverlapAllow {
		t.Fatalf("periodic add printed %+v", p)
	}
	// --overlap sets the policy, over HTTP and over gRPC; the table shows it.
	for _, tr := range []string{"http", "grpc"} {
		o := decode[apitype.Periodic](t, mustCLI(t, "periodic", "add", "--name", "hourly-"+tr, "--cron", "@hourly", "--type", "noop",
			"--overlap", "skip", "--transport", tr, srv))
		if o.Overlap != jobq.OverlapSkip {
			t.Fatalf("periodic add --overlap skip --transport %s printed %+v", tr, o)
		}
	}
	if out := mustCLI(t, "periodic", "list", "-o", "table", srv); !strings.Contains(out, "OVERLAP") || !strings.Contains(out, "skip") {
		t.Fatalf("periodic list table:\n%s", out)
	}
	if _, err := runCLI(t, "periodic", "add", "--name", "x", "--cron", "@hourly", "--type", "noop", "--overlap", "sometimes", srv); err == nil ||
		!strings.Contains(err.Error(), "--overlap") {
		t.Fatalf("periodic add --overlap sometimes: err = %v, want one naming --overlap", err)
	}
	first := p.NextRunAt
	// The replica that took the API call fires the new schedule at once
	// (RefreshOps), not after its 30s refresh interval.
	k := jobq.PeriodicKey("tick", first)
	var id uint64
	events(t).WaitFor(t, scheduler.EventClaimed, func(e scheduler.Event) bool {
		for _, j := range e.Jobs {
			if j.JobKey == k {
				id = j.ID
				return true
			}
		}
		return false
	}, 5*time.Second)
	if j := awaitJob(t, c, id, jobq.StateSuccess, 5*time.Second); !j.RunAt.Equal(first) || string(j.Params) != `{"n":1}` {
		t.Fatalf("periodic job %+v: run_at/params", j)
	}
	if out := mustCLI(t, "periodic", "rm", "tick", srv); out != "deleted tick\n" {
		t.Fatalf("periodic rm printed %q", out)
	}
	_, err = runCLI(t, "periodic", "rm", "tick", srv)
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Fatalf("second rm: err = %v, want 404", err)
	}
	// Restarting with the same configuration keeps the cursor.
	before, err := r.Store.PeriodicGet(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Ops.PutPeriodic(ctx, reqs[0], jobq.PeriodicSourceConfig); err != nil {
		t.Fatal(err)
	}
	again, err := r.Store.PeriodicGet(ctx, "cfg")
	if err != nil || again.NextRunAt.Before(before.NextRunAt) || !again.CreateTime.Equal(before.CreateTime) {
		t.Fatalf("re-put of an unchanged schedule: before %+v after %+v err %v", before, again, err)
	}
}

// Bad operations input gets 400 naming the field and rule; nothing is written.
func TestOpsAPIRejectsBadInput(t *testing.T) {
	r, _ := startReplica(t, nil)
	base := "http://" + r.Addr
	cases := []struct {
		method, path, body string
		field, rule        string
	}{
		{"POST", "/v1/periodic", `{"name":"a@b","cron":"* * * * *","job_type":"noop"}`, "name", "must hold only letters"},
		{"POST", "/v1/periodic", `{"name":"n","cron":"61 * * * *","job_type":"noop"}`, "cron", "must be a cron expression"},
		{"POST", "/v1/periodic", `{"name":"n","cron":"0 0 30 2 *","job_type":"noop"}`, "cron", "never fires"},
		{"POST", "/v1/periodic", `{"name":"n","cron":"* * * * *","job_type":"nope"}`, "job_type", "not a registered job type"},
		{"POST", "/v1/periodic", `{"name":"n","cron":"* * * * *","job_type":"noop","misfire":"all"}`, "misfire", `must be "skip" or "once"`},
		{"POST", "/v1/periodic", `{"name":"n","cron":"* * * * *","job_type":"noop","params":[1]}`, "params", "must be a JSON object"},
		{"POST", "/v1/periodic", `{"name":"n","cron":"* * * * *","job_type":"noop","overlap":"queue"}`, "overlap", `must be one of allow, skip, queue_one, cancel_previous, got "queue"`},
		{"POST", "/v1/periodic", `{"name":"n","cron":"* * * * *","workflow":{"jobs":[{"job_key":"a","job_type":"noop"}]},"overlap":"skip"}`, "overlap", `must be "allow" for a workflow schedule`},
		{"POST", "/v1/periodic", `{"name":"n","cron":"* * * * *","job_type":"noop","every":1}`, "every", "unknown field"},
		{"POST", "/v1/periodic", `{"name":"` + strings.Repeat("x", 41) + `","cron":"* * * * *","job_type":"noop"}`, "name", "must be 1–40 characters"},
		{"PUT", "/v1/types/noop/limit", `{"max_running":-1}`, "max_running", "must be an integer in [0, 100000]"},
		{"PUT", "/v1/types/noop/limit", `{}`, "max_running", "is required"},
		{"PUT", "/v1/types/noop/limit", `{"max_running":"2"}`, "max_running", "must be a JSON integer"},
		{"POST", "/v1/types/nope/pause", ``, "job_type", "not a registered job type"},
		{"PUT", "/v1/types/noop/rate-limit", `{"period":"1s"}`, "starts", "is required"},
		{"PUT", "/v1/types/noop/rate-limit", `{"starts":0,"period":"1s"}`, "starts", "must be an integer in [1, 1000000]"},
		{"PUT", "/v1/types/noop/rate-limit", `{"starts":1000001,"period":"1s"}`, "starts", "must be an integer in [1, 1000000]"},
		{"PUT", "/v1/types/noop/rate-limit", `{"starts":5}`, "period", "is required"},
		{"PUT", "/v1/types/noop/rate-limit", `{"starts":5,"period":"1 second"}`, "period", "must be a duration"},
		{"PUT", "/v1/types/noop/rate-limit", `{"starts":5,"period":"500us"}`, "period", "must be from 1ms to 24h0m0s"},
		{"PUT", "/v1/types/noop/rate-limit", `{"starts":5,"period":"25h"}`, "period", "must be from 1ms to 24h0m0s"},
		{"PUT", "/v1/types/noop/rate-limit", `{"starts":5,"period":"1s","per_key":"yes"}`, "per_key", "must be a JSON boolean (true or false)"},
		{"PUT", "/v1/types/noop/rate-limit", `{"starts":5,"period":"1s","per_account":true}`, "per_account", "unknown field"},
		{"PUT", "/v1/types/nope/rate-limit", `{"starts":5,"period":"1s"}`, "job_type", "not a registered job type"},
		{"DELETE", "/v1/types/nope/rate-limit", ``, "job_type", "not a registered job type"},
		{"POST", "/v1/jobs/retry", `{"status":"SUCCESS"}`, "status", "must be FAILED or CANCELED"},
		{"POST", "/v1/jobs/purge", `{"older_than":"soon"}`, "older_than", "must be an age such as 7d"},
		{"POST", "/v1/jobs/purge", `{"older_than":"30s"}`, "older_than", "must be between 1m0s and 36500d"},
		{"GET", "/v1/stats?window=2h", ``, "window", "must be a duration between 1s and 1h0m0s"},
		{"GET", "/v1/stats?since=1", ``, "since", "unknown query parameter"},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		resp, err := noKeepAlive.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var eb struct {
			Error struct{ Code, Field, Message string }
		}
		_ = json.Unmarshal(body, &eb)
		if resp.StatusCode != http.StatusBadRequest || eb.Error.Field != tc.field || !strings.Contains(eb.Error.Message, tc.rule) {
			t.Errorf("%s %s %s: %d %s, want 400 field %q containing %q", tc.method, tc.path, tc.body, resp.StatusCode, body, tc.field, tc.rule)
		}
	}
	var n int
	if err := r.Store.DB().QueryRow("SELECT (SELECT COUNT(*) FROM periodic_job) + (SELECT COUNT(*) FROM job_type_control)").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows written by rejected requests = %d (err %v), want 0", n, err)
	}
}

func TestParseAgeAndPeriodicSpec(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "36h": 36 * time.Hour, "1d12h": 36 * time.Hour, "90m": 90 * time.Minute, "0d": 0} {
		if got, err := service.ParseAge(in); err != nil || got != want {
			t.Errorf("ParseAge(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "d", "7x", "-1d", "1.5d", "7dd"} {
		if got, err := service.ParseAge(bad); err == nil {
			t.Errorf("ParseAge(%q) = %s, want an error", bad, got)
		}
	}
	cases := []struct {
		spec string
		want apitype.PeriodicRequest
	}{
		{"a=* * * * *;noop", apitype.PeriodicRequest{Name: "a", Cron: "* * * * *", JobType: "noop"}},
		{"b=@every 10s;sleep;once", apitype.PeriodicRequest{Name: "b", Cron: "@every 10s", JobType: "sleep", Misfire: "once"}},
		{`c=0 0 3 * * *;backup;{"db":"a;b"};skip`, apitype.PeriodicRequest{Name: "c", Cron: "0 0 3 * * *", JobType: "backup", Params: json.RawMessage(`{"db":"a;b"}`), Misfire: "skip"}},
		{`d=@hourly;noop;{};once;queue_one`, apitype.PeriodicRequest{Name: "d", Cron: "@hourly", JobType: "noop", Params: json.RawMessage(`{}`), Misfire: "once", Overlap: "queue_one"}},
		{"e=@hourly;noop;skip;skip", apitype.PeriodicRequest{Name: "e", Cron: "@hourly", JobType: "noop", Misfire: "skip", Overlap: "skip"}},
	}
	for _, tc := range cases {
		got, err := service.ParsePeriodicSpec(tc.spec)
		if err != nil || got.Name != tc.want.Name || got.Cron != tc.want.Cron || got.JobType != tc.want.JobType ||
			string(got.Params) != string(tc.want.Params) || got.Misfire != tc.want.Misfire || got.Overlap != tc.want.Overlap {
			t.Errorf("ParsePeriodicSpec(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
	for _, bad := range []string{"no-equals", "a=* * * * *", `a=* * * * *;noop;{"x":1}x`} {
		if _, err := service.ParsePeriodicSpec(bad); err == nil {
			t.Errorf("ParsePeriodicSpec(%q): want an error", bad)
		}
	}
}

// serve's operations flags: --periodic keeps commas inside a cron
// expression (no list splitting) and --retention takes days.
func TestServeOpsFlags(t *testing.T) {
	var cli CLI
	parser, err := kong.New(&cli, kong.Name("jobq"), defaultVars(), kong.Exit(func(int) { t.Fatal("kong exited") }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parser.Parse([]string{"serve", "--dsn", "root@tcp(127.0.0.1:3306)/x",
		"--periodic", "a=0,30 * * * * *;noop", "--periodic", `b=@hourly;sleep;{"ms":5};once`,
		"--retention", "7d", "--ops-refresh", "10s", "--misfire-threshold", "2s"}); err != nil {
		t.Fatal(err)
	}
	reqs, err := cli.Serve.PeriodicRequests()
	if err != nil || len(reqs) != 2 || reqs[0].Cron != "0,30 * * * * *" || reqs[1].Misfire != "once" || string(reqs[1].Params) != `{"ms":5}` {
		t.Fatalf("periodic = %+v, %v", reqs, err)
	}
	cfg, err := cli.Serve.SchedulerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ops.Retention != 7*24*time.Hour || cfg.Ops.RefreshInterval != 10*time.Second ||
		cfg.Ops.MisfireThreshold != 2*time.Second || cfg.Ops.CleanInterval != time.Minute {
		t.Fatalf("ops config = %+v", cfg.Ops)
	}
	cli = CLI{}
	if _, err := parser.Parse([]string{"serve", "--dsn", "x", "--retention", "soon"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Serve.SchedulerConfig(); err == nil || !strings.Contains(err.Error(), "--retention") {
		t.Fatalf("--retention soon: err = %v, want one naming --retention", err)
	}
}
