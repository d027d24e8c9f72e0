package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/faultstore"
)

// buildJobq builds cmd/jobq into a temporary directory.
func buildJobq(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build cmd/jobq: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "jobq")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/jobq/jobq/cmd/jobq").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/jobq: %v\n%s", err, out)
	}
	return bin
}

// A `jobq serve` process killed with SIGKILL mid-job loses its lease: within
// lease + one rescue interval the job is back to WAITING with retry_times 1,
// and another replica runs it to SUCCESS.
func TestKilledReplicaJobRescuedAndCompletedElsewhere(t *testing.T) {
	t.Parallel()
	const (
		lease          = 2 * time.Second
		rescueInterval = 500 * time.Millisecond
	)
	bin := buildJobq(t)
	dsn := testdb.DSN(t)
	st, err := store.Open(context.Background(), dsn, store.PoolConfig{MaxOpen: 10})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	job := submit(t, st, "long-sleep", "sleep", `{"ms":60000}`, 3)

	logPath := filepath.Join(t.TempDir(), "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// --poll-jitter: the default (200ms) is not below --poll-interval 100ms.
	proc := exec.Command(bin, "serve", "--dsn", dsn, "--listen", "127.0.0.1:0", "--owner", "proc-a",
		"--lease", lease.String(), "--rescue-interval", rescueInterval.String(),
		"--poll-interval", "100ms", "--poll-jitter", "20ms", "--workers", "4")
	proc.Stdout, proc.Stderr = logf, logf
	if err := proc.Start(); err != nil {
		t.Fatalf("start jobq serve: %v", err)
	}
	t.Cleanup(func() {
		if proc.ProcessState == nil {
			_ = proc.Process.Kill()
			_ = proc.Wait()
		}
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("jobq serve output:\n%s", out)
		}
	})
	// Polled: the job runs in a `jobq serve` child process, whose events this
	// process does not see.
	var running jobq.Job
	waitFor(t, slowWait, "job RUNNING on the jobq serve process", func() (bool, error) {
		j, err := st.JobGet(context.Background(), job.ID)
		running = j
		return err == nil && j.Status == jobq.StateRunning && j.Owner == "proc-a", err
	})
	if running.Attempt != 1 {
		t.Fatalf("running attempt = %d, want 1", running.Attempt)
	}

	// Replica B: its sleep handler is fast; its first claim is held so the
	// rescued row can be read before B takes it.
	calls := newInvocations()
	reg := scheduler.NewRegistry()
	reg.Register("sleep", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		calls.add(job)
		return nil
	}))
	fsB := faultstore.Wrap(st)
	held := fsB.PauseOnce(faultstore.ClaimSkipLocked, nil)
	t.Cleanup(held.Release)
	rescuedCh := make(chan []jobq.Fence, 10)
	cfgB := fastConfig("b")
	cfgB.Strategy = scheduler.StrategySkipLocked
	cfgB.Lease = lease
	cfgB.RescueInterval = rescueInterval
	cfgB.Observer = on(scheduler.EventRescued, func(e scheduler.Event) {
		if len(e.Fences) > 0 {
			rescuedCh <- e.Fences
		}
	})
	b := startScheduler(t, fsB, reg, cfgB)

	killedAt, err := st.DBNow(context.Background())
	if err != nil {
		t.Fatalf("db clock: %v", err)
	}
	lastLease := *getJob(t, st, job.ID).LeaseUntil
	if err := proc.Process.Kill(); err != nil { // SIGKILL
		t.Fatalf("kill -9: %v", err)
	}
	_ = proc.Wait()

	rescued := recv(t, rescuedCh, slowWait, "B's rescuer to return the job")
	if got, want := fmt.Sprint(rescued), fmt.Sprint([]jobq.Fence{{ID: job.ID, Attempt: 1}}); got != want {
		t.Fatalf("rescued %s, want %s", got, want)
	}
	closed(t, held.Reached(), slowWait, "B's claim of the rescued job")
	w := getJob(t, st, job.ID)
	if w.Status != jobq.StateWaiting || w.RetryTimes != 1 || w.Attempt != 1 || w.LeaseUntil != nil || w.LastError != "lease expired" {
		t.Fatalf("rescued row status=%s retry_times=%d attempt=%d lease_until=%v last_error=%q, want WAITING 1 1 nil \"lease expired\"",
			w.Status, w.RetryTimes, w.Attempt, w.LeaseUntil, w.LastError)
	}
	// The rescue (update_time, database clock) came after the lease ran out
	// and within lease + one rescue interval (+20% jitter, +1s slack) of the kill.
	if !w.UpdateTime.After(lastLease) {
		t.Fatalf("rescued at %s, before the lease ended at %s", w.UpdateTime, lastLease)
	}
	// How soon is a figure (lease + one rescue interval on an idle
	// machine), logged rather than asserted: a loaded machine stretches it.
	t.Logf("job back to WAITING %s after the kill (lease %s + rescue interval %s)", w.UpdateTime.Sub(killedAt), lease, rescueInterval)

	held.Release()
	f := waitFinished(t, st, job.ID, jobq.OutcomeSuccess)
	if err := b.Stop(); err != nil {
		t.Fatalf("stop B: %v", err)
	}
	if f.Attempt != 2 || f.Owner != "b" || f.RetryTimes != 1 {
		t.Fatalf("final attempt=%d owner=%q retry_times=%d, want 2 \"b\" 1", f.Attempt, f.Owner, f.RetryTimes)
	}
	want := []string{"1:proc-a:LEASE_EXPIRED", "2:b:SUCCESS"}
	if got := execSummary(executions(t, st, job.ID)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("executions = %v, want %v", got, want)
	}
	if got := calls.byAttempt(); fmt.Sprint(got) != fmt.Sprint(map[int]int{2: 1}) {
		t.Fatalf("B's handler calls = %v, want map[2:1]", got)
	}
}

// Every attempt that started leaves exactly one job_attempt row (its
// job_execution row, or for a batched success its job row), written when
// its outcome is known, including the attempts of a replica killed
// with SIGKILL mid-run (the rescuer writes those). While a run is in
// flight, JobExecutions lists it from the job row, with no outcome yet.
func TestKilledReplicaEveryAttemptOneExecutionRow(t *testing.T) {
	t.Parallel()
	const (
		lease          = 2 * time.Second
		rescueInterval = 500 * time.Millisecond
		jobs           = 10
		workersA       = 4
	)
	bin := buildJobq(t)
	dsn := testdb.DSN(t)
	st, err := store.Open(context.Background(), dsn, store.PoolConfig{MaxOpen: 10})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	ids := make([]uint64, jobs)
	for i := range ids {
		ids[i] = submit(t, st, key("kill-exec", i), "sleep", `{"ms":60000}`, 3).ID
	}
	proc := exec.Command(bin, "serve", "--dsn", dsn, "--listen", "127.0.0.1:0", "--owner", "proc-a",
		"--lease", lease.String(), "--rescue-interval", rescueInterval.String(),
		"--poll-interval", "100ms", "--poll-jitter", "20ms", "--workers", fmt.Sprint(workersA))
	if err := proc.Start(); err != nil {
		t.Fatalf("start jobq serve: %v", err)
	}
	t.Cleanup(func() {
		if proc.ProcessState == nil {
			_ = proc.Process.Kill()
			_ = proc.Wait()
		}
	})
	// Polled: the jobs run in a `jobq serve` child process, whose events
	// this process does not see.
	waitFor(t, 30*time.Second, "proc-a running its workers' worth of jobs", func() (bool, error) {
		n, err := countStatus(st, jobq.StateRunning)
		return n == workersA, err
	})
	var running jobq.Job
	for _, id := range ids {
		if j := getJob(t, st, id); j.Status == jobq.StateRunning {
			running = j
			break
		}
	}
	if got, want := fmt.Sprint(execSummary(executions(t, st, running.ID))), fmt.Sprint([]string{"1:proc-a:"}); got != want {
		t.Fatalf("executions of a running job = %s, want %s (the in-flight attempt, from the job row)", got, want)
	}
	if n := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_attempt"); n != 0 {
		t.Fatalf("job_execution rows while every attempt is in flight = %d, want 0", n)
	}
	if err := proc.Process.Kill(); err != nil { // SIGKILL
		t.Fatalf("kill -9: %v", err)
	}
	_ = proc.Wait()

	reg := scheduler.NewRegistry()
	reg.Register("sleep", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	cfgB := fastConfig("b")
	cfgB.Lease = lease
	cfgB.RescueInterval = rescueInterval
	b := startScheduler(t, st, reg, cfgB)
	waitSucceeded(t, jobs) // every job, on B
	if err := b.Stop(); err != nil {
		t.Fatalf("stop B: %v", err)
	}
	bad := scalar(t, st.DB(), `SELECT COUNT(*) FROM job_queue q
		WHERE q.attempt <> (SELECT COUNT(*) FROM job_attempt e WHERE e.job_id = q.id)
		   OR q.attempt <> (SELECT COALESCE(MAX(e.attempt), 0) FROM job_attempt e WHERE e.job_id = q.id)`)
	if bad != 0 {
		logOutcomes(t, st)
		t.Fatalf("%d jobs without exactly one execution row per attempt", bad)
	}
	if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_attempt WHERE owner = 'proc-a' AND outcome = 'LEASE_EXPIRED'"); got != workersA {
		t.Fatalf("proc-a's LEASE_EXPIRED rows = %d, want %d", got, workersA)
	}
	if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_attempt WHERE owner = 'b' AND outcome = 'SUCCESS'"); got != jobs {
		t.Fatalf("b's SUCCESS rows = %d, want %d", got, jobs)
	}
}
