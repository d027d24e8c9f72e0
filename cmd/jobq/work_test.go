package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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

// TestStdoutOutput: a command's stdout is its JSON value when it parses,
// else a JSON string; empty is null.
func TestStdoutOutput(t *testing.T) {
	for _, c := range []struct{ stdout, want string }{
		{`{"ip":"10.0.0.7"}` + "\n", `{"ip":"10.0.0.7"}`},
		{"[1, 2]\r\n", "[1, 2]"},
		{"42\n", "42"},
		{`"quoted"`, `"quoted"`},
		{"done: 3 disks\n", `"done: 3 disks"`},
		{"two\nlines\n\n", `"two\nlines"`},
		{"\xff bad utf-8", `"\ufffd bad utf-8"`},
		{"", "null"},
		{"  \n", "null"},
	} {
		if got := string(stdoutOutput([]byte(c.stdout))); got != c.want {
			t.Errorf("stdoutOutput(%q) = %s, want %s", c.stdout, got, c.want)
		}
	}
}

// TestWorkFlagsRefused: jobq work refuses settings it cannot run with,
// naming the flag, before it contacts a replica.
func TestWorkFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"work", "--type", "t"}, "--exec COMMAND or a program after --"},
		{[]string{"work", "--type", "t", "--exec", "true", "--", "true"}, "exactly one of the two"},
		{[]string{"work", "--type", ",", "--exec", "true"}, "--type: at least one job type"},
		{[]string{"work", "--type", "t", "--exec", "true", "--kill-after", "0s"}, "--kill-after: must be positive"},
		{[]string{"work", "--type", "t", "--exec", "true", "--concurrency", "1001"}, "concurrency: at most 1000"},
	} {
		_, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("jobq %s: error %v, want one containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// startWorkReplica runs a replica on a fresh database whose job types are
// all remote, and returns a client of its API.
func startWorkReplica(t *testing.T, types ...string) *client.Client {
	t.Helper()
	r, err := app.Start(context.Background(), app.Config{
		DSN: testdb.DSN(t), Listen: "127.0.0.1:0", Registry: scheduler.NewRegistry(), Logger: quiet, NoUI: true,
		Scheduler: scheduler.Config{Owner: "work-test", Observer: events(t), PollInterval: 100 * time.Millisecond, PollJitter: 20 * time.Millisecond,
			Lease: 3 * time.Second, RescueInterval: time.Second, RetryBackoffBase: 50 * time.Millisecond,
			Workers: 10, ShutdownTimeout: 5 * time.Second, Logger: quiet, RemoteTypes: types},
	})
	if err != nil {
		t.Fatalf("start replica: %v", err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	c := client.New("http://" + r.Addr)
	c.HTTP = noKeepAlive
	return c
}

// runWork runs `jobq work` (cmd) until the test ends: then it stops it as
// SIGTERM would and waits for its graceful shutdown.
func runWork(t *testing.T, cmd WorkCmd) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.Run(&Globals{Log: quiet, Ctx: ctx}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("jobq work: %v", err)
		}
	})
}

// TestWorkCommandGetsTheJob: the command gets the params on stdin and the
// job in its environment (without the worker token); its stdout is the
// output and its stderr the attempt's log.
func TestWorkCommandGetsTheJob(t *testing.T) {
	t.Setenv("JOBQ_WORKER_TOKEN", "wk_must_not_reach_the_command")
	c := startWorkReplica(t, "exec-env")
	runWork(t, WorkCmd{
		Server: c.BaseURL, Type: []string{"exec-env"}, Concurrency: 2, ShutdownTimeout: 5 * time.Second,
		KillAfter: time.Second, NoRetryExit: 65, PollWait: 5 * time.Second,
		Exec: `printf '%s|%s|%s|%s|%s|' "$JOBQ_JOB_ID" "$JOBQ_JOB_KEY" "$JOBQ_JOB_TYPE" "$JOBQ_ATTEMPT" "${JOBQ_WORKER_TOKEN:-unset}"; ` +
			`cat; printf '|%s' "$JOBQ_PARAMS"; echo "to the log" >&2; echo "jobq:progress 0.75 nearly" >&2`,
	})
	j, _, err := c.Submit(context.Background(), apitype.SubmitRequest{JobKey: "env-1", JobType: "exec-env", Params: json.RawMessage(`{"image":"cat.png"}`)})
	if err != nil {
		t.Fatal(err)
	}
	j = awaitWorkJob(t, c, j.ID, jobq.StateSuccess, 30*time.Second)
	var out string
	if err := json.Unmarshal(j.Output, &out); err != nil {
		t.Fatalf("output %s: want a JSON string (stdout is not JSON): %v", j.Output, err)
	}
	want := fmt.Sprintf(`%d|env-1|exec-env|1|unset|{"image":"cat.png"}|{"image":"cat.png"}`, j.ID)
	if out != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	page, err := c.JobLogs(context.Background(), j.ID, 1, 0)
	if err != nil || len(page.Lines) != 1 || page.Lines[0].Line != "to the log" {
		t.Fatalf("log of attempt 1: %+v, %v; want the one stderr line (the progress line is not logged)", page.Lines, err)
	}
	ex, err := c.Executions(context.Background(), j.ID)
	if err != nil || len(ex) != 1 || ex[0].Progress == nil || *ex[0].Progress != 0.75 || ex[0].ProgressMessage != "nearly" {
		t.Fatalf("executions %+v, %v; want progress 0.75 %q", ex, err, "nearly")
	}
}

// TestWorkCommandKilledAfterGrace: on cancel the command's process group
// gets SIGTERM; one that ignores it is killed --kill-after later, and the
// job ends CANCELED.
func TestWorkCommandKilledAfterGrace(t *testing.T) {
	c := startWorkReplica(t, "exec-stubborn", "exec-exit")
	runWork(t, WorkCmd{
		Server: c.BaseURL, Type: []string{"exec-stubborn,exec-exit"}, Concurrency: 2, ShutdownTimeout: 5 * time.Second,
		KillAfter: 300 * time.Millisecond, NoRetryExit: 65, PollWait: 5 * time.Second,
		Exec: `if [ "$JOBQ_JOB_TYPE" = exec-exit ]; then echo "bad input" >&2; exit 65; fi; ` +
			`trap '' TERM; echo started >&2; while :; do sleep 0.1; done`,
	})
	stubborn, _, err := c.Submit(context.Background(), apitype.SubmitRequest{JobKey: "stubborn-1", JobType: "exec-stubborn"})
	if err != nil {
		t.Fatal(err)
	}
	events(t).WaitFor(t, scheduler.EventFetchClaimed, schedulertest.Job(stubborn.ID), 30*time.Second) // RUNNING: a worker took it
	if _, err := c.Cancel(context.Background(), stubborn.ID); err != nil {
		t.Fatal(err)
	}
	j := awaitWorkJob(t, c, stubborn.ID, jobq.StateCanceled, 30*time.Second)
	if !strings.Contains(j.LastError, "signal: killed") {
		t.Fatalf("last_error %q, want the command killed by SIGKILL (it ignores SIGTERM)", j.LastError)
	}

	maxRetry := 3
	exit, _, err := c.Submit(context.Background(), apitype.SubmitRequest{JobKey: "exit-1", JobType: "exec-exit", MaxRetry: &maxRetry})
	if err != nil {
		t.Fatal(err)
	}
	j = awaitWorkJob(t, c, exit.ID, jobq.StateFailed, 30*time.Second)
	if j.Attempt != 1 || j.RetryTimes != 0 || j.LastError != "exit status 65: bad input" {
		t.Fatalf("exit 65: attempt %d, retry_times %d, last_error %q; want FAILED at once with %q",
			j.Attempt, j.RetryTimes, j.LastError, "exit status 65: bad input")
	}
}

// awaitWorkJob waits until job id, run by a remote worker, is in a final
// status: on the replica's events, the k-th applied completion of the job,
// then a read through the API that must show status — else the next one.
// (A worker's outcome is not always the job's: a failure of a job whose
// cancel was requested leaves it CANCELED.)
func awaitWorkJob(t *testing.T, c *client.Client, id uint64, status jobq.JobState, d time.Duration) apitype.Job {
	t.Helper()
	applied := func(e scheduler.Event) bool { return e.Applied && e.Completion.ID == id }
	for k := 1; ; k++ {
		events(t).WaitN(t, scheduler.EventCompleted, applied, k, d)
		j, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("get job %d: %v", id, err)
		}
		if j.Status == status {
			return j
		}
	}
}
