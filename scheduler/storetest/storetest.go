// Package storetest is the contract of scheduler.Store: one suite that every
// implementation and every decorator must pass (the MySQL adapter in
// store, testbed/faultstore and testbed/sabotage with no fault and no
// switch on run it in their tests). Each rule is one the scheduler's
// guarantees rest on (docs/architecture.md, DESIGN.md §2): a claim takes a
// due job once and bumps its attempt; the cas claim and every outcome write
// are fenced by attempt; renewals are fenced by owner; a rescue takes back
// only an expired lease; a write whose acknowledgement was lost is applied
// once; a future job waits SCHEDULED until it is promoted.
//
// The suite speaks only scheduler.Store and the jobq vocabulary; a Backend
// supplies the rest (submitting and reading jobs, expiring a lease), so a
// second driver can run it unchanged.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/scheduler"
)

// Jobs submits and reads jobs on the Backend's database: the service's half
// of the same adapter.
type Jobs interface {
	JobSubmit(ctx context.Context, p jobq.SubmitParams) (jobq.Job, bool, error)
	JobGet(ctx context.Context, id uint64) (jobq.Job, error)
	JobExecutions(ctx context.Context, id uint64) ([]jobq.Execution, error)
}

// Backend is one implementation under test over a fresh, migrated, empty
// database of its own.
type Backend struct {
	// Store is the implementation under test.
	Store scheduler.Store
	// Jobs submits and reads jobs on the same database.
	Jobs Jobs
	// ExpireLease moves a RUNNING job's lease into the past on the
	// database clock, as if its holder had stopped renewing it.
	ExpireLease func(ctx context.Context, id uint64) error
}

// Run runs every rule of the contract, each as a parallel subtest on a
// Backend of its own from newFunc.
func Run(t *testing.T, newFunc func(t *testing.T) Backend) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, &suite{Backend: newFunc(t), t: t})
		})
	}
}

// lease is the lease of every claim that is not meant to expire.
const lease = 30 * time.Second

var cases = []struct {
	name string
	run  func(t *testing.T, s *suite)
}{
	{"ClaimTakesEachDueJobOnce", func(t *testing.T, s *suite) {
		ids := []uint64{s.submit("c1", 3).ID, s.submit("c2", 3).ID, s.submit("c3", 3).ID}
		a := s.claimSkipLocked("a", 2)
		b := s.claimSkipLocked("b", 5)
		if len(a) != 2 || len(b) != 1 {
			t.Fatalf("claims took %d and %d jobs, want 2 and the 1 left", len(a), len(b))
		}
		if more := s.claimSkipLocked("c", 5); len(more) != 0 {
			t.Fatalf("a third claim took %d jobs, want none: every job is held", len(more))
		}
		var got []uint64
		for _, c := range slices.Concat(a, b) {
			got = append(got, c.ID)
			if c.Attempt != 1 {
				t.Fatalf("job %d claimed at attempt %d, want 1", c.ID, c.Attempt)
			}
		}
		if slices.Sort(got); !slices.Equal(got, ids) {
			t.Fatalf("claimed jobs %v, want each of %v once", got, ids)
		}
		for _, c := range a {
			if j := s.get(c.ID); j.Status != jobq.StateRunning || j.Owner != "a" || j.Attempt != 1 {
				t.Fatalf("job %d after a's claim: status %s owner %q attempt %d, want RUNNING a 1", c.ID, j.Status, j.Owner, j.Attempt)
			}
		}
	}},
	{"FutureJobWaitsUntilPromoted", func(t *testing.T, s *suite) {
		runAt := time.Now().Add(300 * time.Millisecond)
		j := s.submitAt("future", 3, &runAt)
		if j.Status != jobq.StateScheduled {
			t.Fatalf("a job due in 300ms is %s at submit, want SCHEDULED", j.Status)
		}
		if c := s.claimSkipLocked("a", 5); len(c) != 0 {
			t.Fatalf("claimed %d jobs before the job was due, want none", len(c))
		}
		next, err := s.Store.JobScheduledNext(s.ctx())
		if err != nil || next.Next.Sub(j.RunAt).Abs() > time.Millisecond {
			t.Fatalf("JobScheduledNext = %+v, %v; want the job's run_at %s", next, err, j.RunAt)
		}
		// No event says the database clock passed run_at: ask until the
		// promotion takes it (bounded).
		deadline := time.Now().Add(time.Minute)
		for {
			n, err := s.Store.JobPromoteDue(s.ctx(), 10)
			if err != nil {
				t.Fatalf("JobPromoteDue: %v", err)
			}
			if n == 1 {
				break
			}
			if n != 0 || time.Now().After(deadline) {
				t.Fatalf("JobPromoteDue = %d (deadline passed: %v), want the one job once it is due", n, time.Now().After(deadline))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if n, err := s.Store.JobPromoteDue(s.ctx(), 10); err != nil || n != 0 {
			t.Fatalf("second JobPromoteDue = %d, %v; want 0: the job was promoted once", n, err)
		}
		if c := s.claimSkipLocked("a", 5); len(c) != 1 || c[0].ID != j.ID {
			t.Fatalf("claim after promotion took %v, want job %d", c, j.ID)
		}
	}},
	{"CASClaimFencedByAttempt", func(t *testing.T, s *suite) {
		id := s.submit("aba", 3).ID
		stale, err := s.Store.JobScanAvailable(s.ctx(), 10)
		if err != nil || len(stale) != 1 || stale[0] != (jobq.Fence{ID: id, Attempt: 0}) {
			t.Fatalf("scan = %v, %v; want job %d at attempt 0", stale, err, id)
		}
		c := s.claimOne("a", lease)
		s.completeMany([]jobq.Completion{{Fence: c.Fence(), Outcome: jobq.OutcomeReleased}}, true)
		claimed, lost, err := s.Store.JobClaimCAS(s.ctx(), jobq.ClaimCASParams{
			ClaimParams: jobq.ClaimParams{Owner: "b", Limit: 1, Lease: lease}, Candidates: stale})
		if err != nil || len(claimed) != 0 || lost != 1 {
			t.Fatalf("cas claim of a stale candidate: %d claimed, %d lost, %v; want 0 and 1", len(claimed), lost, err)
		}
		fresh, err := s.Store.JobScanAvailable(s.ctx(), 10)
		if err != nil || len(fresh) != 1 || fresh[0] != (jobq.Fence{ID: id, Attempt: 1}) {
			t.Fatalf("scan after the release = %v, %v; want job %d at attempt 1", fresh, err, id)
		}
		claimed, lost, err = s.Store.JobClaimCAS(s.ctx(), jobq.ClaimCASParams{
			ClaimParams: jobq.ClaimParams{Owner: "b", Limit: 1, Lease: lease}, Candidates: fresh})
		if err != nil || len(claimed) != 1 || lost != 0 || claimed[0].Attempt != 2 {
			t.Fatalf("cas claim of a fresh candidate: %v, %d lost, %v; want the job at attempt 2", claimed, lost, err)
		}
	}},
	{"StaleCompletionRefused", func(t *testing.T, s *suite) {
		a, b := s.reclaimedElsewhere("late")
		late := jobq.Completion{Fence: a.Fence(), Outcome: jobq.OutcomeSuccess}
		s.completeMany([]jobq.Completion{late}, false)
		called := false
		applied, err := s.Store.JobCompleteTx(s.ctx(), late, func(context.Context, jobq.Tx) error { called = true; return nil })
		if err != nil || applied || called {
			t.Fatalf("transactional late success: applied=%v fn called=%v err=%v; want refused, fn not called", applied, called, err)
		}
		failed := jobq.Completion{Fence: a.Fence(), Outcome: jobq.OutcomeFailed, Error: "late", Retry: true, DueAt: b.RunAt}
		s.completeMany([]jobq.Completion{failed}, false)
		if j := s.get(a.ID); j.Status != jobq.StateRunning || j.Owner != "b" || j.Attempt != 2 {
			t.Fatalf("job after attempt 1's late writes: %s owner %q attempt %d, want RUNNING b 2 untouched", j.Status, j.Owner, j.Attempt)
		}
		s.completeMany([]jobq.Completion{{Fence: b.Fence(), Outcome: jobq.OutcomeSuccess}}, true)
		if j := s.get(a.ID); j.Status != jobq.StateSuccess {
			t.Fatalf("job after attempt 2's success: %s, want SUCCESS", j.Status)
		}
		if got, want := s.execSummary(a.ID), "1:a:STALE 2:b:SUCCESS"; got != want {
			t.Fatalf("executions = %q, want %q", got, want)
		}
	}},
	{"BatchTellsLiveFromStale", func(t *testing.T, s *suite) {
		a, _ := s.reclaimedElsewhere("stale")
		s.submit("live", 3)
		live := s.claimOne("c", lease)
		applied := s.completeManyApplied([]jobq.Completion{
			{Fence: live.Fence(), Outcome: jobq.OutcomeSuccess},
			{Fence: a.Fence(), Outcome: jobq.OutcomeSuccess},
		})
		if !slices.Equal(applied, []bool{true, false}) {
			t.Fatalf("batch [live, stale] applied %v, want [true false]", applied)
		}
	}},
	{"LostAcknowledgementIsIdempotent", func(t *testing.T, s *suite) {
		s.submit("batched", 3)
		c := s.claimOne("a", lease)
		done := jobq.Completion{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess}
		s.completeMany([]jobq.Completion{done}, true)
		s.completeMany([]jobq.Completion{done}, true) // the retry of a write whose answer was lost
		if got, want := s.execSummary(c.ID), "1:a:SUCCESS"; got != want {
			t.Fatalf("executions = %q, want %q (one row)", got, want)
		}

		s.submit("tx", 3)
		c = s.claimOne("a", lease)
		calls := 0
		fn := func(ctx context.Context, tx jobq.Tx) error {
			if tx == nil {
				return errors.New("nil transaction")
			}
			calls++
			return nil
		}
		done = jobq.Completion{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess}
		for try := range 2 {
			applied, err := s.Store.JobCompleteTx(s.ctx(), done, fn)
			if err != nil || !applied {
				t.Fatalf("transactional success, try %d: applied=%v err=%v; want applied", try+1, applied, err)
			}
		}
		if calls != 1 {
			t.Fatalf("WorkTx ran %d times, want once: the second try found its outcome committed", calls)
		}
		if j := s.get(c.ID); j.Status != jobq.StateSuccess {
			t.Fatalf("job after its transactional success: %s, want SUCCESS", j.Status)
		}
	}},
	{"TxCompletionRollsBackWithItsWork", func(t *testing.T, s *suite) {
		s.submit("tx-fail", 3)
		c := s.claimOne("a", lease)
		boom := errors.New("work failed")
		done := jobq.Completion{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess}
		applied, err := s.Store.JobCompleteTx(s.ctx(), done, func(context.Context, jobq.Tx) error { return boom })
		if applied || !errors.Is(err, boom) {
			t.Fatalf("transactional success whose work failed: applied=%v err=%v; want the work's error", applied, err)
		}
		if j := s.get(c.ID); j.Status != jobq.StateRunning || j.Attempt != 1 {
			t.Fatalf("job after the rolled-back completion: %s attempt %d, want RUNNING 1", j.Status, j.Attempt)
		}
		if got := s.execSummary(c.ID); got != "1:a:-" {
			t.Fatalf("executions = %q, want only the attempt in flight", got)
		}
	}},
	{"RenewalFencedByOwner", func(t *testing.T, s *suite) {
		s.submit("r1", 3)
		a := s.claimOne("a", lease)
		s.submit("r2", 3)
		b := s.claimOne("b", lease)
		renewed, err := s.Store.LeaseRenewMany(s.ctx(), jobq.LeaseRenewParams{Owner: "a", Lease: lease, IDs: []uint64{a.ID, b.ID}})
		if err != nil || !slices.Equal(renewed, []uint64{a.ID}) {
			t.Fatalf("a renews both jobs: renewed %v, %v; want only its own %d", renewed, err, a.ID)
		}
		s.completeMany([]jobq.Completion{{Fence: a.Fence(), Outcome: jobq.OutcomeSuccess}}, true)
		renewed, err = s.Store.LeaseRenewMany(s.ctx(), jobq.LeaseRenewParams{Owner: "a", Lease: lease, IDs: []uint64{a.ID}})
		if err != nil || len(renewed) != 0 {
			t.Fatalf("renewal of a completed run: %v, %v; want none", renewed, err)
		}
		states, err := s.Store.JobFenceStates(s.ctx(), []uint64{a.ID, b.ID})
		if err != nil || len(states) != 2 {
			t.Fatalf("JobFenceStates = %v, %v; want both jobs", states, err)
		}
		for _, st := range states {
			want := jobq.FenceState{ID: b.ID, Attempt: 1, Status: jobq.StateRunning, Owner: "b"}
			if st.ID == a.ID {
				want = jobq.FenceState{ID: a.ID, Attempt: 1, Status: jobq.StateSuccess, Owner: st.Owner}
			}
			if st != want {
				t.Fatalf("fence state %+v, want %+v", st, want)
			}
		}
	}},
	{"HeldByFindsTheOwnersRuns", func(t *testing.T, s *suite) {
		s.submit("held", 3)
		c := s.claimOne("a", lease)
		held, err := s.Store.JobHeldBy(s.ctx(), "a", time.Minute)
		if err != nil || len(held) != 1 || held[0].Fence() != c.Fence() {
			t.Fatalf("JobHeldBy(a) = %v, %v; want the run %+v", held, err, c.Fence())
		}
		if held, err := s.Store.JobHeldBy(s.ctx(), "b", time.Minute); err != nil || len(held) != 0 {
			t.Fatalf("JobHeldBy(b) = %v, %v; want none", held, err)
		}
	}},
	{"RescueTakesOnlyExpiredLeases", func(t *testing.T, s *suite) {
		s.submit("rescue", 3)
		c := s.claimOne("a", lease)
		if cands, err := s.Store.JobRescueCandidates(s.ctx(), 10); err != nil || len(cands) != 0 {
			t.Fatalf("rescue candidates while the lease is live: %v, %v; want none", cands, err)
		}
		if ok, err := s.Store.JobRescueExpired(s.ctx(), c.Fence()); err != nil || ok {
			t.Fatalf("rescue of a live lease: %v, %v; want refused", ok, err)
		}
		s.expire(c.ID)
		if cands, err := s.Store.JobRescueCandidates(s.ctx(), 10); err != nil || !slices.Equal(cands, []jobq.Fence{c.Fence()}) {
			t.Fatalf("rescue candidates after the lease expired: %v, %v; want %+v", cands, err, c.Fence())
		}
		s.rescue(c.Fence())
		if ok, err := s.Store.JobRescueExpired(s.ctx(), c.Fence()); err != nil || ok {
			t.Fatalf("second rescue of the same run: %v, %v; want refused", ok, err)
		}
		if j := s.get(c.ID); j.Status != jobq.StateWaiting || j.RetryTimes != 1 {
			t.Fatalf("job after its rescue: %s retry_times %d, want WAITING 1", j.Status, j.RetryTimes)
		}
		if got, want := s.execSummary(c.ID), "1:a:LEASE_EXPIRED"; got != want {
			t.Fatalf("executions = %q, want %q", got, want)
		}
	}},
	{"RescueEndsAJobWithNoRetryLeft", func(t *testing.T, s *suite) {
		s.submit("exhausted", 0)
		c := s.claimOne("a", lease)
		s.expire(c.ID)
		s.rescue(c.Fence())
		if j := s.get(c.ID); j.Status != jobq.StateFailed {
			t.Fatalf("job rescued with no retry left: %s, want FAILED", j.Status)
		}
	}},
	{"OutcomesMoveTheJob", func(t *testing.T, s *suite) {
		s.submit("outcomes", 1)
		c := s.claimOne("a", lease)
		s.completeMany([]jobq.Completion{{Fence: c.Fence(), Outcome: jobq.OutcomeReleased, DueAt: c.RunAt}}, true)
		if j := s.get(c.ID); j.Status != jobq.StateWaiting || j.RetryTimes != 0 {
			t.Fatalf("after a release: %s retry_times %d, want WAITING 0", j.Status, j.RetryTimes)
		}
		c = s.claimOne("a", lease)
		s.completeMany([]jobq.Completion{{Fence: c.Fence(), Outcome: jobq.OutcomeFailed, Error: "once",
			Retry: true, Backoff: time.Hour, DueAt: c.RunAt}}, true)
		if j := s.get(c.ID); j.Status != jobq.StateScheduled || j.RetryTimes != 1 {
			t.Fatalf("after a failure retried in 1h: %s retry_times %d, want SCHEDULED 1", j.Status, j.RetryTimes)
		}
		s.submit("final", 0)
		f := s.claimOne("a", lease)
		s.completeMany([]jobq.Completion{{Fence: f.Fence(), Outcome: jobq.OutcomeFailed, Error: "for good", DueAt: f.RunAt}}, true)
		if j := s.get(f.ID); j.Status != jobq.StateFailed || j.LastError != "for good" {
			t.Fatalf("after a failure without retry: %s %q, want FAILED \"for good\"", j.Status, j.LastError)
		}
		if got, want := s.execSummary(c.ID), "1:a:RELEASED 2:a:FAILED"; got != want {
			t.Fatalf("executions = %q, want %q", got, want)
		}
	}},
}

// suite is one case's Backend with the helpers the cases share.
type suite struct {
	Backend
	t *testing.T
}

func (s *suite) ctx() context.Context { return s.t.Context() }

func (s *suite) submit(key string, maxRetry int) jobq.Job { return s.submitAt(key, maxRetry, nil) }

func (s *suite) submitAt(key string, maxRetry int, runAt *time.Time) jobq.Job {
	s.t.Helper()
	j, created, err := s.Jobs.JobSubmit(s.ctx(), jobq.SubmitParams{
		JobKey: key, JobType: "contract", Params: "{}", RequestHash: key, MaxRetry: maxRetry, RunAt: runAt,
	})
	if err != nil || !created {
		s.t.Fatalf("submit %s: created=%v err=%v", key, created, err)
	}
	return j
}

func (s *suite) get(id uint64) jobq.Job {
	s.t.Helper()
	j, err := s.Jobs.JobGet(s.ctx(), id)
	if err != nil {
		s.t.Fatalf("get job %d: %v", id, err)
	}
	return j
}

func (s *suite) claimSkipLocked(owner string, limit int) []jobq.ClaimedJob {
	s.t.Helper()
	cs, err := s.Store.JobClaimSkipLocked(s.ctx(), jobq.ClaimParams{Owner: owner, Limit: limit, Lease: lease})
	if err != nil {
		s.t.Fatalf("claim by %s: %v", owner, err)
	}
	return cs
}

// claimOne claims exactly one job (skiplocked).
func (s *suite) claimOne(owner string, lease time.Duration) jobq.ClaimedJob {
	s.t.Helper()
	cs, err := s.Store.JobClaimSkipLocked(s.ctx(), jobq.ClaimParams{Owner: owner, Limit: 1, Lease: lease})
	if err != nil || len(cs) != 1 {
		s.t.Fatalf("claim by %s: %d claimed, err %v; want 1", owner, len(cs), err)
	}
	return cs[0]
}

func (s *suite) expire(id uint64) {
	s.t.Helper()
	if err := s.ExpireLease(s.ctx(), id); err != nil {
		s.t.Fatalf("expire the lease of job %d: %v", id, err)
	}
}

func (s *suite) rescue(f jobq.Fence) {
	s.t.Helper()
	if ok, err := s.Store.JobRescueExpired(s.ctx(), f); err != nil || !ok {
		s.t.Fatalf("rescue %+v: ok=%v err=%v; want rescued", f, ok, err)
	}
}

// reclaimedElsewhere: a claims a job (attempt 1), its lease expires, the
// job is rescued and b claims it again (attempt 2).
func (s *suite) reclaimedElsewhere(key string) (a, b jobq.ClaimedJob) {
	s.t.Helper()
	s.submit(key, 3)
	a = s.claimOne("a", lease)
	s.expire(a.ID)
	s.rescue(a.Fence())
	b = s.claimOne("b", lease)
	if b.ID != a.ID || b.Attempt != 2 {
		s.t.Fatalf("re-claim: job %d attempt %d, want job %d attempt 2", b.ID, b.Attempt, a.ID)
	}
	return a, b
}

func (s *suite) completeManyApplied(cs []jobq.Completion) []bool {
	s.t.Helper()
	applied, err := s.Store.JobCompleteMany(s.ctx(), cs)
	if err != nil || len(applied) != len(cs) {
		s.t.Fatalf("JobCompleteMany: %v, %v", applied, err)
	}
	return applied
}

// completeMany writes cs in one batch and checks each is applied (or
// refused, want false).
func (s *suite) completeMany(cs []jobq.Completion, want bool) {
	s.t.Helper()
	for i, ok := range s.completeManyApplied(cs) {
		if ok != want {
			s.t.Fatalf("completion %+v: applied=%v, want %v", cs[i], ok, want)
		}
	}
}

// execSummary is "attempt:owner:outcome" per execution row ("-" for one
// in flight), space-separated.
func (s *suite) execSummary(id uint64) string {
	s.t.Helper()
	ex, err := s.Jobs.JobExecutions(s.ctx(), id)
	if err != nil {
		s.t.Fatalf("executions of job %d: %v", id, err)
	}
	var out []string
	for _, e := range ex {
		o := string(e.Outcome)
		if o == "" {
			o = "-"
		}
		out = append(out, fmt.Sprintf("%d:%s:%s", e.Attempt, e.Owner, o))
	}
	return strings.Join(out, " ")
}
