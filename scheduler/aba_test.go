package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/testbed/faultstore"
	"github.com/jobq/jobq/testbed/sabotage"
)

// abaRun is what one run of the ABA scenario observed.
type abaRun struct {
	job        jobq.Job
	requeued   jobq.Job // the row after A's failed attempt 1 was re-queued
	execs      []jobq.Execution
	calls      map[int]int // attempt → handler calls
	firstClaim claimResult // B's first claim after its paused read was released
	statsB     scheduler.Stats
}

type claimResult struct {
	jobs      []jobq.ClaimedJob
	conflicts int
}

// runABA forces the classic ABA interleaving on the cas claim:
//
//  1. B reads the WAITING job (id, attempt 0) and is held at ScanAfter;
//  2. A claims it (attempt 1), its handler fails, and the job is re-queued
//     SCHEDULED (attempt 1, retry_times 1, run_at = now + backoff); A stops;
//  3. B is released and runs its CAS with the stale candidate (attempt 0).
//
// With the attempt guard B's CAS matches no row; without it (sabotage) B
// claims the re-queued job from a stale read, before it is due.
func runABA(t *testing.T, noCASGuard bool) abaRun {
	st := testdb.Store(t)
	calls := newInvocations()
	reg := scheduler.NewRegistry()
	reg.Register("aba", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		calls.add(job)
		if job.Attempt == 1 {
			return fmt.Errorf("attempt %d fails by design", job.Attempt)
		}
		return nil
	}))
	job := submit(t, st, "aba", "aba", `{}`, 3)

	fsB := faultstore.Wrap(st)
	held := fsB.PauseOnce(faultstore.ScanAfter, nil)
	t.Cleanup(held.Release)
	claimsB := make(chan claimResult, 10)
	cfgB := fastConfig("b")
	cfgB.Strategy = scheduler.StrategyCAS
	cfgB.Observer = on(scheduler.EventClaimed, func(e scheduler.Event) {
		if len(e.Jobs) == 0 && e.Conflicts == 0 {
			return // an empty scan
		}
		select {
		case claimsB <- claimResult{append([]jobq.ClaimedJob(nil), e.Jobs...), e.Conflicts}:
		default:
		}
	})
	b := startScheduler(t, sabotage.Wrap(fsB, st.DB(), sabotage.Switches{NoCASGuard: noCASGuard}), reg, cfgB)
	closed(t, held.Reached(), slowWait, "B held after its cas candidate read")

	cfgA := fastConfig("a")
	cfgA.Strategy = scheduler.StrategyCAS
	cfgA.RetryBackoffBase = time.Second // re-queued run_at is 0.75–1.25 s ahead
	a := startScheduler(t, st, reg, cfgA)
	requeued := waitRequeued(t, st, job.ID) // attempt 1 failed: SCHEDULED with backoff
	if err := a.Stop(); err != nil {
		t.Fatalf("stop A: %v", err)
	}

	held.Release()
	first := recv(t, claimsB, slowWait, "B's claim with the stale candidate")
	final := waitFinished(t, st, job.ID, jobq.OutcomeSuccess)
	if err := b.Stop(); err != nil {
		t.Fatalf("stop B: %v", err)
	}
	return abaRun{job: final, requeued: requeued, execs: executions(t, st, job.ID), calls: calls.byAttempt(),
		firstClaim: first, statsB: b.Stats()}
}

// The cas claim's attempt guard: B's CAS with the stale candidate matches no
// row, and each attempt runs exactly once.
func TestCASClaimAttemptGuardClosesABA(t *testing.T) {
	t.Parallel()
	r := runABA(t, false)

	if got := len(r.firstClaim.jobs); got != 0 {
		t.Fatalf("B's stale CAS claimed %d jobs, want 0 (attempt guard)", got)
	}
	if got := r.firstClaim.conflicts; got != 1 {
		t.Fatalf("B's stale CAS conflicts = %d, want 1", got)
	}
	if r.statsB.ClaimConflicts != 1 || r.statsB.Claimed != 1 {
		t.Fatalf("B stats claim_conflicts=%d claimed=%d, want 1 and 1", r.statsB.ClaimConflicts, r.statsB.Claimed)
	}
	if r.requeued.RetryTimes != 1 || r.requeued.Attempt != 1 {
		t.Fatalf("re-queued row retry_times=%d attempt=%d, want 1 and 1", r.requeued.RetryTimes, r.requeued.Attempt)
	}
	if r.job.Attempt != 2 || r.job.Owner != "b" || r.job.RetryTimes != 1 {
		t.Fatalf("final job attempt=%d owner=%q retry_times=%d, want 2, \"b\", 1", r.job.Attempt, r.job.Owner, r.job.RetryTimes)
	}
	want := []string{"1:a:FAILED", "2:b:SUCCESS"}
	if got := execSummary(r.execs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("executions = %v, want %v", got, want)
	}
	if got, want := r.calls, map[int]int{1: 1, 2: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("handler calls per attempt = %v, want %v", got, want)
	}
	// Attempt 2 honoured the backoff: it started no earlier than run_at.
	if r.execs[1].StartedAt.Before(r.requeued.RunAt) {
		t.Fatalf("attempt 2 started at %s, before its run_at %s", r.execs[1].StartedAt, r.requeued.RunAt)
	}
}

// Without the attempt guard the same interleaving lets B claim from its stale
// read: the check above fails, so it can catch the ABA race.
func TestCASClaimWithoutGuardSuffersABA(t *testing.T) {
	t.Parallel()
	r := runABA(t, true)

	if got := len(r.firstClaim.jobs); got != 1 {
		t.Fatalf("sabotaged B's stale CAS claimed %d jobs, want 1 (ABA)", got)
	}
	if got := r.firstClaim.conflicts; got != 0 {
		t.Fatalf("sabotaged B's stale CAS conflicts = %d, want 0", got)
	}
	if got := r.firstClaim.jobs[0].Attempt; got != 2 {
		t.Fatalf("stale claim attempt = %d, want 2 (read as 0)", got)
	}
	if len(r.execs) != 2 {
		t.Fatalf("executions = %v, want 2", execSummary(r.execs))
	}
	if !r.execs[1].StartedAt.Before(r.requeued.RunAt) {
		t.Fatalf("stale claim started at %s, want before run_at %s (backoff skipped)", r.execs[1].StartedAt, r.requeued.RunAt)
	}
}
