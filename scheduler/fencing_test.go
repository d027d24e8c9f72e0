package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/faultstore"
	"github.com/jobq/jobq/testbed/jobtypes"
	"github.com/jobq/jobq/testbed/sabotage"
)

// zombieConfig is replica A of the zombie scenarios: a 1 s lease, one
// worker (so the zombie run's slot keeps A from claiming the job again), and
// no rescuer of its own (the test rescues through B, deterministically).
// With noFencing its store is the testbed's fencing sabotage (zombieStore).
func zombieConfig(owner string) scheduler.Config {
	cfg := fastConfig(owner)
	cfg.Lease = time.Second
	cfg.Workers = 1
	cfg.RescueInterval = time.Hour
	return cfg
}

// zombieStore is replica A's store: st with fault points, sabotaged
// (successes completed by id alone: the testbed's fencing sabotage) when
// noFencing.
func zombieStore(st *store.Store, noFencing bool) *faultstore.Store {
	return faultstore.Wrap(sabotage.Wrap(st, st.DB(), sabotage.Switches{NoFencing: noFencing}))
}

// rescuerConfig is replica B: it rescues only when the test calls RescueNow.
func rescuerConfig(owner string) scheduler.Config {
	cfg := fastConfig(owner)
	cfg.RescueInterval = time.Hour
	return cfg
}

type zombieRun struct {
	id      uint64
	byB     jobq.Job // the row after B's attempt 2 committed
	final   jobq.Job // the row after A's late completion
	execs   []jobq.Execution
	statsA  scheduler.Stats
	lateA   completion // A's completion as its hook reported it
	rescued []jobq.Fence
	callsA  int
	callsB  int
}

// runZombie: A claims the job; its heartbeat fails, so its lease runs out on
// the database clock while the handler (which ignores ctx) keeps running; B
// rescues the job, claims it as attempt 2 and succeeds; then A's handler
// returns nil and A tries to complete attempt 1.
func runZombie(t *testing.T, noFencing bool) zombieRun {
	st := testdb.Store(t)
	job := submit(t, st, "zombie", "zombie", `{}`, 3)
	gateA := newGate(t)
	calls := newInvocations()
	ctxCancelled := make(chan error, 1)

	regA := scheduler.NewRegistry()
	regA.Register("zombie", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		calls.add(job)
		<-ctx.Done() // the lease is lost: the context is cancelled …
		ctxCancelled <- context.Cause(ctx)
		<-gateA.Wait() // … but this handler ignores it and finishes later
		return nil
	}))
	fsA := zombieStore(st, noFencing)
	fsA.On(faultstore.LeaseRenewBefore, func(context.Context) error { return errInjected })
	cfgA := zombieConfig("a")
	hookA, doneA := completions()
	cfgA.Observer = hookA
	a := startScheduler(t, fsA, regA, cfgA)

	waitStarted(t, job.ID, 1) // A holds attempt 1 (B does not run yet)
	if cause := recv(t, ctxCancelled, slowWait, "A's handler context cancelled"); cause != scheduler.ErrLeaseLost {
		t.Fatalf("A's handler context cause = %v, want ErrLeaseLost", cause)
	}
	expireLease(t, st, job.ID)

	regB := scheduler.NewRegistry()
	regB.Register("zombie", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		calls.add(job)
		return nil
	}))
	b := startScheduler(t, st, regB, rescuerConfig("b"))
	rescued := b.RescueNow(context.Background())
	byB := waitFinished(t, st, job.ID, jobq.OutcomeSuccess) // B's attempt 2: A's handler is still held

	gateA.Open()
	late := recv(t, doneA, slowWait, "A's late completion")
	if err := a.Stop(); err != nil {
		t.Fatalf("stop A: %v", err)
	}
	if err := b.Stop(); err != nil {
		t.Fatalf("stop B: %v", err)
	}
	return zombieRun{id: job.ID, byB: byB, final: getJob(t, st, job.ID), execs: executions(t, st, job.ID),
		statsA: a.Stats(), lateA: late, rescued: rescued, callsA: calls.of("a", 1), callsB: calls.of("b", 2)}
}

// A zombie's completion (the run lost its lease, was rescued and re-run
// elsewhere) is refused: the job keeps B's outcome and A's audit row says STALE.
func TestZombieCompletionIsFenced(t *testing.T) {
	t.Parallel()
	r := runZombie(t, false)

	if got, want := fmt.Sprint(r.rescued), fmt.Sprint([]jobq.Fence{{ID: r.id, Attempt: 1}}); got != want {
		t.Fatalf("B rescued %s, want %s", got, want)
	}
	if r.byB.Attempt != 2 || r.byB.Owner != "b" || r.byB.RetryTimes != 1 {
		t.Fatalf("after B: attempt=%d owner=%q retry_times=%d, want 2, \"b\", 1", r.byB.Attempt, r.byB.Owner, r.byB.RetryTimes)
	}
	if r.lateA.Applied || r.lateA.Outcome != jobq.OutcomeSuccess || r.lateA.Attempt != 1 {
		t.Fatalf("A's late completion = %+v, want a refused SUCCESS of attempt 1", r.lateA)
	}
	f, b := r.final, r.byB
	if f.Status != jobq.StateSuccess || f.Attempt != 2 || f.Owner != "b" || f.RetryTimes != 1 ||
		!f.FinishedAt.Equal(*b.FinishedAt) || !f.UpdateTime.Equal(b.UpdateTime) {
		t.Fatalf("after A's late write: status=%s attempt=%d owner=%q retry_times=%d finished_at=%v update_time=%v; "+
			"want B's row unchanged: SUCCESS 2 \"b\" 1 %v %v",
			f.Status, f.Attempt, f.Owner, f.RetryTimes, f.FinishedAt, f.UpdateTime, b.FinishedAt, b.UpdateTime)
	}
	want := []string{"1:a:STALE", "2:b:SUCCESS"}
	if got := execSummary(r.execs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("executions = %v, want %v", got, want)
	}
	if r.statsA.Stale != 1 || r.statsA.Succeeded != 0 || r.statsA.LeaseLost != 1 {
		t.Fatalf("A stats stale=%d succeeded=%d lease_lost=%d, want 1, 0, 1", r.statsA.Stale, r.statsA.Succeeded, r.statsA.LeaseLost)
	}
	if r.callsA != 1 || r.callsB != 1 {
		t.Fatalf("handler calls A(attempt 1)=%d B(attempt 2)=%d, want 1 and 1", r.callsA, r.callsB)
	}
}

// Without fencing the same run lets the zombie's write through: the check
// above fails, so it can catch an unfenced completion.
func TestZombieCompletionWithoutFencingOverwrites(t *testing.T) {
	t.Parallel()
	r := runZombie(t, true)

	if !r.lateA.Applied {
		t.Fatalf("sabotaged A's late completion was refused; want it applied")
	}
	if r.statsA.Stale != 0 || r.statsA.Succeeded != 1 {
		t.Fatalf("sabotaged A stats stale=%d succeeded=%d, want 0 and 1", r.statsA.Stale, r.statsA.Succeeded)
	}
	if !r.final.FinishedAt.After(*r.byB.FinishedAt) {
		t.Fatalf("finished_at %v, want it moved past B's %v by A's late write", r.final.FinishedAt, r.byB.FinishedAt)
	}
	if len(r.execs) != 2 || r.execs[0].Outcome == jobq.OutcomeStale {
		t.Fatalf("executions = %v, want 2 with attempt 1 not STALE (the unfenced write was not refused)", execSummary(r.execs))
	}
}

// A rescuer that read an expired run and is held before its update must not
// touch the row when the run completes meanwhile: its update is conditioned
// on status, attempt and lease.
func TestRescuerDoesNotOverwriteCompletedRun(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	job := submit(t, st, "late-rescue", "slow", `{}`, 3)
	gateA := newGate(t)
	reg := scheduler.NewRegistry()
	reg.Register("slow", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		<-gateA.Wait()
		return nil
	}))
	fsA := faultstore.Wrap(st)
	fsA.On(faultstore.LeaseRenewBefore, func(context.Context) error { return errInjected })
	cfgA := zombieConfig("a")
	hookA, doneA := completions()
	cfgA.Observer = hookA
	startScheduler(t, fsA, reg, cfgA)
	waitStarted(t, job.ID, 1) // A holds attempt 1
	expireLease(t, st, job.ID)

	fsB := faultstore.Wrap(st)
	held := fsB.PauseOnce(faultstore.RescueCandidatesAfter, nil)
	t.Cleanup(held.Release)
	b := startScheduler(t, fsB, scheduler.NewRegistry(), rescuerConfig("b"))
	rescuedCh := make(chan []jobq.Fence, 1)
	go func() { rescuedCh <- b.RescueNow(context.Background()) }()
	closed(t, held.Reached(), slowWait, "B's rescuer held after reading its candidates")

	gateA.Open()
	if c := recv(t, doneA, slowWait, "A's completion"); !c.Applied || c.Outcome != jobq.OutcomeSuccess {
		t.Fatalf("A's completion = %+v, want an applied SUCCESS", c)
	}
	before := getJob(t, st, job.ID)
	held.Release()
	rescued := recv(t, rescuedCh, slowWait, "B's rescue pass")
	after := getJob(t, st, job.ID)

	if len(rescued) != 0 || b.Stats().Rescued != 0 {
		t.Fatalf("rescued %v (stats %d), want none", rescued, b.Stats().Rescued)
	}
	if before.Status != jobq.StateSuccess || before.Attempt != 1 {
		t.Fatalf("completed row status=%s attempt=%d, want SUCCESS 1", before.Status, before.Attempt)
	}
	if after.Status != before.Status || after.Attempt != before.Attempt || after.RetryTimes != before.RetryTimes ||
		!after.FinishedAt.Equal(*before.FinishedAt) || !after.UpdateTime.Equal(before.UpdateTime) || after.LastError != before.LastError {
		t.Fatalf("row changed by the held rescuer: %+v, want %+v", after, before)
	}
	want := []string{"1:a:SUCCESS"}
	if got := execSummary(executions(t, st, job.ID)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("executions = %v, want %v", got, want)
	}
}

// effectRun is the zombie scenario with the built-in effect job type:
// A's effect handler ran (its non_tx row is written) and A is held before its
// transactional completion while its lease runs out; B rescues, re-runs and
// completes; then A's completion goes ahead.
func runEffectZombie(t *testing.T, noFencing bool) (tx, nonTx int64, statsA scheduler.Stats, execs []jobq.Execution) {
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	registerTestbedTypes(t, st, reg)
	job := submit(t, st, "effect", jobtypes.Effect, `{"ms":0}`, 3)

	fsA := zombieStore(st, noFencing)
	fsA.On(faultstore.LeaseRenewBefore, func(context.Context) error { return errInjected })
	held := fsA.PauseOnce(faultstore.CompleteTxBefore, nil)
	t.Cleanup(held.Release)
	cfgA := zombieConfig("a")
	cfgA.Lease = 2 * time.Second // A's completion context lasts 2 leases: room for B's whole run
	hookA, doneA := completions()
	cfgA.Observer = hookA
	a := startScheduler(t, fsA, reg, cfgA)
	closed(t, held.Reached(), slowWait, "A held before its transactional completion")
	expireLease(t, st, job.ID)

	b := startScheduler(t, st, reg, rescuerConfig("b"))
	if got := b.RescueNow(context.Background()); len(got) != 1 {
		t.Fatalf("B rescued %v, want the one job", got)
	}
	if j := waitFinished(t, st, job.ID, jobq.OutcomeSuccess); j.Attempt != 2 { // A is held before its completion
		t.Fatalf("succeeded with attempt %d, want B's attempt 2", j.Attempt)
	}
	held.Release()
	recv(t, doneA, slowWait, "A's late completion")
	if err := a.Stop(); err != nil {
		t.Fatalf("stop A: %v", err)
	}
	if err := b.Stop(); err != nil {
		t.Fatalf("stop B: %v", err)
	}
	tx = scalar(t, st.DB(), "SELECT COUNT(*) FROM job_effect WHERE job_id = ? AND kind = 'tx'", job.ID)
	nonTx = scalar(t, st.DB(), "SELECT COUNT(*) FROM job_effect WHERE job_id = ? AND kind = 'non_tx'", job.ID)
	return tx, nonTx, a.Stats(), executions(t, st, job.ID)
}

// Transactional completion: the effect's 'tx' row commits exactly once even
// when a stale run completes late; its 'non_tx' row repeats (at least once).
func TestTransactionalEffectExactlyOnce(t *testing.T) {
	t.Parallel()
	tx, nonTx, statsA, execs := runEffectZombie(t, false)
	if tx != 1 || nonTx != 2 {
		t.Fatalf("job_effect rows tx=%d non_tx=%d, want 1 and 2", tx, nonTx)
	}
	if statsA.Stale != 1 {
		t.Fatalf("A stale completions = %d, want 1", statsA.Stale)
	}
	want := []string{"1:a:STALE", "2:b:SUCCESS"}
	if got := execSummary(execs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("executions = %v, want %v", got, want)
	}
}

// Without fencing the stale run's transaction commits its effect too: the
// check above fails, so it can catch a duplicated transactional effect.
func TestTransactionalEffectWithoutFencingDuplicates(t *testing.T) {
	t.Parallel()
	tx, _, statsA, _ := runEffectZombie(t, true)
	if tx != 2 || statsA.Stale != 0 {
		t.Fatalf("sabotaged: tx rows=%d stale=%d, want 2 and 0", tx, statsA.Stale)
	}
}
