package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/testbed/chaos/checker"
)

// jobqBin is a jobq binary built once for the package's tests.
var jobqBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jobq-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	jobqBin = filepath.Join(dir, "jobq")
	out, err := exec.Command("go", "build", "-tags", "testbed", "-o", jobqBin, "github.com/jobq/jobq/cmd/jobq").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build jobq: %v\n%s", err, out)
		os.Exit(1)
	}
	code := testdb.Run(m,
		// Idle keep-alive connections of the readiness probes' default transport.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintf(os.Stderr, "remove %s: %v\n", dir, err)
	}
	os.Exit(code)
}

// quick is the base of the CI runs: short lease and rescue interval, jobs
// long enough that every replica holds some when a fault hits.
func quick(t *testing.T, name string) Config {
	return Config{
		Name: name, Replicas: 3, Binary: jobqBin, OutDir: filepath.Join(t.TempDir(), name),
		Runtime: "uniform:100ms-500ms", Lease: 2 * time.Second, RescueInterval: 500 * time.Millisecond,
		KillRestartDelay: time.Second, DBDownFor: 2 * time.Second, DrainTimeout: 20 * time.Second, Seed: 7,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

type checkerFault = checker.FaultResult

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func readResult(t *testing.T, dir string) ResultFile {
	t.Helper()
	for _, f := range []string{"result.json", "history.ndjson", "report.md", "timeline.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s missing or empty: %v", f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ResultFile
	if err := json.Unmarshal(b, &rf); err != nil {
		t.Fatalf("result.json: %v", err)
	}
	if rf.SchemaVersion != SchemaVersion || rf.Result == nil {
		t.Fatalf("result.json schema %d, result %v", rf.SchemaVersion, rf.Result)
	}
	// One input path: the run's history.ndjson, judged again as `jobq
	// check` judges it, gives the run's own verdict.
	h, err := checker.ReadNDJSONFile(filepath.Join(dir, "history.ndjson"))
	if err != nil {
		t.Fatalf("history.ndjson: %v", err)
	}
	again := checker.Check(h)
	a, _ := json.Marshal([]any{again.Valid, again.Violations, again.Counts})
	b2, _ := json.Marshal([]any{rf.Result.Valid, rf.Result.Violations, rf.Result.Counts})
	if string(a) != string(b2) {
		t.Fatalf("history.ndjson checked again:\n%s\nthe run said:\n%s", a, b2)
	}
	return rf
}

// runValid runs cfg and fails unless the run, and its result.json, are
// VALID.
func runValid(t *testing.T, cfg Config) *ResultFile {
	t.Helper()
	rf, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	disk := readResult(t, cfg.OutDir)
	if !rf.Valid || !disk.Valid {
		t.Fatalf("valid = %v (on disk %v), violations %+v", rf.Valid, disk.Valid, rf.Result.Violations)
	}
	return rf
}

// The CI scenario: 3 replicas, 1,000 jobs, kill + pause + db-restart on
// the harness's own mariadbd. Nothing may be lost, stuck, duplicated or
// accepted stale; the kill and the pause must leave rescued leases.
func TestCIScenarioIsValid(t *testing.T) {
	cfg := quick(t, "ci")
	cfg.Jobs, cfg.Duration = 1000, 20*time.Second
	cfg.Schedule = "kill@4s:replica-1,pause@9s:replica-2,db-restart@15s"
	rf := runValid(t, cfg)
	c := rf.Result.Counts
	if c.Acknowledged != 1000 || c.Completed != 1000 || c.ByStatus["SUCCESS"] != 1000 {
		t.Fatalf("acknowledged %d, completed %d, by status %v; want 1000 SUCCESS", c.Acknowledged, c.Completed, c.ByStatus)
	}
	if len(rf.Result.Faults) != 3 || len(rf.FaultErrors) != 0 {
		t.Fatalf("faults %d, errors %v", len(rf.Result.Faults), rf.FaultErrors)
	}
	kill, pause := rf.Result.Faults[0], rf.Result.Faults[1]
	if kill.Orphans+pause.Orphans == 0 {
		t.Fatalf("neither the kill nor the pause orphaned a run: the experiment did not happen (faults %+v)", rf.Result.Faults)
	}
	for _, f := range []struct {
		name string
		fr   checkerFault
	}{{"kill", kill}, {"pause", pause}} {
		if f.fr.RePicked != f.fr.Orphans {
			t.Fatalf("%s: %d orphans, %d re-picked; want all re-picked", f.name, f.fr.Orphans, f.fr.RePicked)
		}
		// Re-pick needs the lease (2 s, last renewed at most 2/3 s before
		// the fault) to run out first; how soon after that is a figure, not
		// a verdict (a loaded machine stretches it).
		if f.fr.Orphans > 0 && f.fr.RePickMax < 1 {
			t.Fatalf("%s re-pick max %.2fs, want ≥ 1s (not before the lease ran out)", f.name, f.fr.RePickMax)
		}
		t.Logf("%s: %d orphans re-picked, max %.2fs after the fault", f.name, f.fr.Orphans, f.fr.RePickMax)
	}
	// Each orphan was rescued (LEASE_EXPIRED), or rescued and then refused
	// when the zombie woke (STALE).
	if c.Rescued < kill.Orphans+pause.Orphans {
		t.Fatalf("orphans %d, rescued %d", kill.Orphans+pause.Orphans, c.Rescued)
	}
	if rf.Result.Pickup.Count != 1000 {
		t.Fatalf("pickup samples %d, want 1000", rf.Result.Pickup.Count)
	}
}

// With --sabotage fencing the zombie's completion after SIGCONT is
// accepted: the checker must report it as a stale completion accepted (a
// transactional effect from a rescued attempt). lease-cancel too, as in the
// classic design: otherwise whether the zombie's handler finishes before
// the heartbeat cancels it on SIGCONT is a race of two expired timers, and
// a loaded machine can make every zombie lose it (no late success at all).
// Whether a stale success also makes a duplicate depends on timing — the
// rescued job must have been re-run before the zombie woke — so duplicates
// are logged, not required.
func TestSabotageFencingCaught(t *testing.T) {
	cfg := quick(t, "zombie-fencing")
	cfg.Jobs, cfg.Duration, cfg.Runtime = 250, 8*time.Second, "uniform:300ms-700ms"
	cfg.Schedule, cfg.Sabotage = "pause@3s:replica-2", []string{"fencing", "lease-cancel"}
	rf, err := Run(context.Background(), cfg)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	c := rf.Result.Counts
	if rf.Result.Faults[0].RunningAtStart == 0 {
		t.Fatalf("the paused replica held no job: the experiment did not happen")
	}
	if c.StaleCompletionsAccepted == 0 {
		t.Fatalf("stale accepted %d, want > 0 (violations %+v)", c.StaleCompletionsAccepted, rf.Result.Violations)
	}
	t.Logf("stale completions accepted %d, transactional duplicates %d", c.StaleCompletionsAccepted, c.TxEffectDuplicates)
	if c.Lost != 0 {
		t.Fatalf("lost %d: fencing sabotage should not lose jobs", c.Lost)
	}
	if disk := readResult(t, cfg.OutDir); disk.Valid {
		t.Fatal("result.json says valid")
	}
}

// With --sabotage rescuer a killed replica's runs are never rescued: the
// checker must report them stuck and lost, and nothing else.
//
// The verdict is who holds the stuck jobs, not how many: every stuck job
// is RUNNING under the killed incarnation's owner id, every lost job is
// stuck, and nothing was rescued. RunningAtStart (the count the injector
// takes just before the SIGKILL) is neither an upper nor a lower bound of
// what the killed process leaves behind: a run may finish between the count
// and the signal (fewer), and a claim may commit after the count — the
// replica claimed again while the injector was not run, or its claim
// statement was on the server when the process died and the server
// committed it all the same (more; on a loaded machine "stuck 5, held 4").
// Either way those rows are the killed incarnation's, never rescued, which
// is exactly what the sabotage must leave; a working rescuer leaves none.
func TestSabotageRescuerCaught(t *testing.T) {
	cfg := quick(t, "kill-rescuer")
	cfg.Jobs, cfg.Duration, cfg.DrainTimeout = 150, 6*time.Second, 3*time.Second
	cfg.Schedule, cfg.Sabotage = "kill@3s:replica-3", []string{"rescuer"}
	rf, err := Run(context.Background(), cfg)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	c := rf.Result.Counts
	kill := rf.Result.Faults[0]
	if kill.RunningAtStart == 0 {
		t.Fatalf("the killed replica held no job: the experiment did not happen")
	}
	if c.Stuck == 0 || c.Lost != c.Stuck || c.Rescued != 0 {
		t.Fatalf("stuck %d, lost %d, rescued %d; want the killed replica's runs stuck and lost, none rescued (it held %d at the kill)",
			c.Stuck, c.Lost, c.Rescued, kill.RunningAtStart)
	}
	// Each stuck job's example names the owner that holds it; all of them
	// must be the killed incarnation's (examples are capped at maxExamples).
	owner := fmt.Sprintf("(owner %q)", kill.Owner)
	seen := 0
	for _, v := range rf.Result.Violations {
		if v.Check != checker.CheckStuck {
			continue
		}
		for _, ex := range v.Examples {
			seen++
			if !strings.Contains(ex, owner) {
				t.Errorf("stuck job not held by the killed incarnation %s: %s", kill.Owner, ex)
			}
		}
	}
	if seen == 0 {
		t.Fatalf("no stuck example in violations %+v", rf.Result.Violations)
	}
	t.Logf("killed %s held %d runs at the count; %d stuck (%d examples checked), lost %d", kill.Owner, kill.RunningAtStart, c.Stuck, seen, c.Lost)
}

// onlyViolation fails unless the run is invalid with check failed and no
// other check but those in also, and returns check's count.
func onlyViolation(t *testing.T, rf *ResultFile, err error, check string, also ...string) int {
	t.Helper()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	if len(rf.FaultErrors) != 0 {
		t.Fatalf("fault errors %v", rf.FaultErrors)
	}
	n := 0
	for _, v := range rf.Result.Violations {
		switch {
		case v.Check == check:
			n = v.Count
		case !slices.Contains(also, v.Check):
			t.Fatalf("violations %+v, want %s (and possibly %v) only", rf.Result.Violations, check, also)
		}
	}
	if n == 0 {
		t.Fatalf("violations %+v, want %s", rf.Result.Violations, check)
	}
	return n
}

// With --sabotage lease-cancel a partitioned replica's handlers keep
// running after their runs were rescued (the lease-loss scenario: a cut
// longer than the lease while jobs have seconds left to run): their "end"
// effects come seconds after the loss.
func TestSabotageLeaseCancelCaught(t *testing.T) {
	cfg := quick(t, "lease-loss-lease-cancel")
	cfg.Jobs, cfg.Duration, cfg.Runtime, cfg.Workers = 100, 5*time.Second, "uniform:500ms-6s", 100
	cfg.Schedule, cfg.PartitionFor, cfg.Sabotage = "partition@2s:replica-2", 2500*time.Millisecond, []string{"lease-cancel"}
	rf, err := Run(context.Background(), cfg)
	n := onlyViolation(t, rf, err, checker.CheckWorkAfterLoss)
	t.Logf("work after lease lost: %d runs", n)
}

// With --sabotage cas-guard a slowed replica's compare-and-set claims a
// flaky job that another replica claimed, failed and re-queued with a retry
// backoff between the slow read and the CAS (the cas-race scenario): the
// attempt starts before it is due. The unguarded CAS may also have waited
// on the row lock of the completion that re-queued the job: its started_at
// (NOW(6) at the statement's start) then precedes that completion, an
// overlapping lease — a consequence of the same missing guard.
func TestSabotageCASGuardCaught(t *testing.T) {
	cfg := quick(t, "cas-race-cas-guard")
	cfg.Jobs, cfg.Duration, cfg.Runtime = 300, 6*time.Second, "uniform:0ms-20ms"
	cfg.Strategy, cfg.FlakyFraction, cfg.FlakyFailures = "cas", 0.5, 3
	cfg.Schedule, cfg.Latency, cfg.LatencyFor = "latency@500ms:replica-1", 100*time.Millisecond, 5*time.Second
	cfg.Sabotage = []string{"cas-guard"}
	rf, err := Run(context.Background(), cfg)
	n := onlyViolation(t, rf, err, checker.CheckClaimedEarly, checker.CheckOverlap)
	t.Logf("claimed before due: %d attempts", n)
}

// With --sabotage deadlock-retry a brief connection reset on a live replica
// (the conn-reset scenario) makes its completions fail for good: the runs
// are rescued although no excusing fault explains it (and re-run after
// their work was done).
func TestSabotageDeadlockRetryCaught(t *testing.T) {
	cfg := quick(t, "conn-reset-deadlock-retry")
	cfg.Jobs, cfg.Duration = 200, 6*time.Second
	cfg.Schedule, cfg.Sabotage = "reset@1500ms:replica-1,reset@3s:replica-2,reset@4500ms:replica-3", []string{"deadlock-retry"}
	rf, err := Run(context.Background(), cfg)
	// The dropped completions' runs had finished their work: their re-runs
	// are reruns after success too.
	n := onlyViolation(t, rf, err, checker.CheckUnexplainedRescue, checker.CheckRerunAfterSuccess, checker.CheckFailedAfterSuccess)
	t.Logf("unexplained rescues: %d (re-run after success %d)", n, rf.Result.Counts.RerunAfterSuccess)
}

// The read-only scenario, short: the database refuses writes (read_only=1;
// the replicas connect without SUPER) for lease/3 while jobs finish. Every
// finished run retries its outcome until writes are accepted and ends with
// it: valid, and no job re-run or FAILED after its work was done.
func TestReadOnlyScenarioIsValid(t *testing.T) {
	cfg := quick(t, "read-only")
	cfg.Jobs, cfg.Duration, cfg.Runtime, cfg.MaxRetry = 300, 6*time.Second, "uniform:200ms-800ms", 3
	cfg.Schedule = "read-only@1500ms,read-only@3500ms"
	rf, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rf.Valid {
		t.Fatalf("violations %+v", rf.Result.Violations)
	}
	c := rf.Result.Counts
	if c.RerunAfterSuccess != 0 || c.FailedAfterSuccess != 0 || c.Lost != 0 {
		t.Fatalf("rerun after success %d, failed after success %d, lost %d; want 0", c.RerunAfterSuccess, c.FailedAfterSuccess, c.Lost)
	}
	for _, f := range rf.Result.Faults {
		if f.Kind != FaultReadOnly || f.Err != "" {
			t.Fatalf("fault %+v, want two read-only faults without error", f)
		}
	}
	if len(rf.Result.Faults) != 2 {
		t.Fatalf("%d faults, want 2", len(rf.Result.Faults))
	}
}

// With --sabotage outcome-retry a finished run's outcome write is tried
// once: a completion refused by the read-only database is dropped, the
// lease expires and the job is rescued — re-run after its work was done (or
// FAILED with no retry left), which no fault explains.
func TestSabotageOutcomeRetryCaught(t *testing.T) {
	cfg := quick(t, "read-only-outcome-retry")
	cfg.Jobs, cfg.Duration, cfg.Runtime, cfg.MaxRetry = 300, 6*time.Second, "uniform:200ms-800ms", 3
	cfg.Schedule, cfg.Sabotage = "read-only@1500ms,read-only@3500ms", []string{"outcome-retry"}
	rf, err := Run(context.Background(), cfg)
	n := onlyViolation(t, rf, err, checker.CheckRerunAfterSuccess, checker.CheckFailedAfterSuccess, checker.CheckUnexplainedRescue)
	t.Logf("re-run after success: %d jobs (failed after success %d, unexplained rescues %d)",
		n, rf.Result.Counts.FailedAfterSuccess, rf.Result.Counts.UnexplainedRescues)
}
