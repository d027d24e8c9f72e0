package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// handoffFixture is one test database with helpers for the keyed
// hand-off: jobs are claimed by replica "a" and completed, with a hand-off
// request, by replica "b".
type handoffFixture struct {
	t   *testing.T
	st  *store.Store
	ctx context.Context
}

func newHandoffFixture(t *testing.T) *handoffFixture {
	t.Helper()
	return &handoffFixture{t: t, st: testdb.Store(t), ctx: context.Background()}
}

func (f *handoffFixture) submit(p jobq.SubmitParams) uint64 {
	f.t.Helper()
	if p.JobType == "" {
		p.JobType = "noop"
	}
	p.Params, p.RequestHash = "{}", p.JobKey
	j, _, err := f.st.JobSubmit(f.ctx, p)
	if err != nil {
		f.t.Fatal(err)
	}
	return j.ID
}

func (f *handoffFixture) claim(n int) []jobq.ClaimedJob {
	f.t.Helper()
	cj, err := f.st.JobClaimSkipLocked(f.ctx, jobq.ClaimParams{Owner: "a", Limit: n, Lease: time.Minute})
	if err != nil || len(cj) != n {
		f.t.Fatalf("claim: %d jobs, %v; want %d", len(cj), err, n)
	}
	return cj
}

// complete writes the successes of cjs in one batch with a hand-off
// request of limit jobs for owner "b" and returns the jobs handed off.
func (f *handoffFixture) complete(limit int, lease time.Duration, cjs ...jobq.ClaimedJob) []jobq.ClaimedJob {
	f.t.Helper()
	h := &jobq.KeyHandoff{Owner: "b", Lease: lease, Limit: limit}
	var cs []jobq.Completion
	for _, cj := range cjs {
		cs = append(cs, jobq.Completion{Fence: cj.Fence(), JobType: cj.JobType, Outcome: jobq.OutcomeSuccess, ConcurrencyKey: cj.ConcurrencyKey})
	}
	applied, err := f.st.JobCompleteMany(jobq.WithKeyHandoff(f.ctx, h), cs)
	if err != nil {
		f.t.Fatal(err)
	}
	for i, ok := range applied {
		if !ok {
			f.t.Fatalf("completion %d not applied", i)
		}
	}
	return h.Jobs
}

func (f *handoffFixture) job(id uint64) jobq.Job {
	f.t.Helper()
	j, err := f.st.JobGet(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

func (f *handoffFixture) admitted(key string) int {
	f.t.Helper()
	k, err := f.st.ConcurrencyKeyGet(f.ctx, key)
	if err != nil {
		f.t.Fatal(err)
	}
	return k.Admitted
}

// A batched completion that frees a key's slot hands the key's next job
// to the completing replica when it can run there now — RUNNING under that
// owner at attempt 1, shaped as a claim returns it — and otherwise admits
// it as before: WAITING for a paused or limited type, for lane 1 and when
// the replica has no room (Limit 0), SCHEDULED while its run_at is ahead.
func TestKeyHandoff(t *testing.T) {
	t.Parallel()
	later := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name   string
		next   jobq.SubmitParams
		before func(f *handoffFixture) // after the first job's claim
		limit  int
		want   jobq.JobState // the next job's status after the completion
	}{
		{name: "handed off", limit: 5, want: jobq.StateRunning},
		{name: "limit 0", limit: 0, want: jobq.StateWaiting},
		{name: "paused type", limit: 5, want: jobq.StateWaiting, before: func(f *handoffFixture) {
			if _, err := f.st.TypeSetPaused(f.ctx, "noop", true); err != nil {
				f.t.Fatal(err)
			}
		}},
		{name: "limited type", limit: 5, want: jobq.StateWaiting, before: func(f *handoffFixture) {
			if _, err := f.st.TypeSetLimit(f.ctx, "noop", 3); err != nil {
				f.t.Fatal(err)
			}
		}},
		{name: "rate-limited type", limit: 5, want: jobq.StateWaiting, before: func(f *handoffFixture) {
			if _, err := f.st.TypeSetRateLimit(f.ctx, "noop", jobq.RateLimit{Starts: 10, Period: time.Second}); err != nil {
				f.t.Fatal(err)
			}
		}},
		{name: "lane 1", limit: 5, want: jobq.StateWaiting, next: jobq.SubmitParams{JobType: "remote"}},
		{name: "future run_at", limit: 5, want: jobq.StateScheduled, next: jobq.SubmitParams{RunAt: &later}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newHandoffFixture(t)
			f.st.SetRemoteTypes([]string{"remote"})
			f.submit(jobq.SubmitParams{JobKey: "first", ConcurrencyKey: "k"})
			next := tc.next
			next.JobKey, next.ConcurrencyKey = "next", "k"
			nid := f.submit(next)
			first := f.claim(1)
			if tc.before != nil {
				tc.before(f)
			}
			handed := f.complete(tc.limit, time.Minute, first...)
			j := f.job(nid)
			if j.Status != tc.want {
				t.Fatalf("next job is %s, want %s", j.Status, tc.want)
			}
			if got := f.admitted("k"); got != 1 {
				t.Fatalf("key admitted %d, want 1", got)
			}
			if tc.want != jobq.StateRunning {
				if len(handed) != 0 {
					t.Fatalf("handed off %v, want none", handed)
				}
				return
			}
			if len(handed) != 1 || handed[0].ID != nid || handed[0].Attempt != 1 || j.Attempt != 1 || j.Owner != "b" {
				t.Fatalf("handed %+v, job %+v; want job %d at attempt 1 under b", handed, j, nid)
			}
			h := handed[0]
			if h.Params == nil || h.JobType != "noop" || h.ConcurrencyKey != "k" || h.StartedAt.IsZero() || !h.LeaseUntil.After(h.StartedAt) {
				t.Fatalf("handed job %+v: want its row as a claim reads it", h)
			}
		})
	}
}

// The hand-off keeps the key's order: priority high to low, then run_at,
// then id; and with a limit above 1 a freed slot is handed to the next job.
func TestKeyHandoffOrderAndLimit(t *testing.T) {
	t.Parallel()
	f := newHandoffFixture(t)
	a := f.submit(jobq.SubmitParams{JobKey: "a", ConcurrencyKey: "k", ConcurrencyLimit: 2})
	b := f.submit(jobq.SubmitParams{JobKey: "b", ConcurrencyKey: "k", ConcurrencyLimit: 2})
	low := f.submit(jobq.SubmitParams{JobKey: "low", ConcurrencyKey: "k", ConcurrencyLimit: 2})
	high := f.submit(jobq.SubmitParams{JobKey: "high", ConcurrencyKey: "k", ConcurrencyLimit: 2, Priority: 5})
	past := time.Now().Add(-time.Hour)
	highOld := f.submit(jobq.SubmitParams{JobKey: "high-old", ConcurrencyKey: "k", ConcurrencyLimit: 2, Priority: 5, RunAt: &past})
	cj := f.claim(2)
	if cj[0].ID != a && cj[1].ID != a || cj[0].ID != b && cj[1].ID != b {
		t.Fatalf("claimed %v, want a and b", cj)
	}
	next := cj[1]
	for _, want := range []uint64{highOld, high, low} {
		handed := f.complete(5, time.Minute, cj[0])
		if len(handed) != 1 || handed[0].ID != want {
			t.Fatalf("handed %v, want job %d", handed, want)
		}
		if got := f.admitted("k"); got != 2 {
			t.Fatalf("key admitted %d, want 2", got)
		}
		cj[0] = handed[0]
	}
	if handed := f.complete(5, time.Minute, cj[0], next); len(handed) != 0 {
		t.Fatalf("handed %v with nothing parked", handed)
	}
	if got := f.admitted("k"); got != 0 {
		t.Fatalf("key admitted %d, want 0", got)
	}
}

// A completion whose COMMIT went through but whose answer was lost is
// written again: the retry finds its outcome applied and hands nothing off
// a second time, and the job the first try handed off stays RUNNING at its
// attempt under the completing owner, where JobHeldBy finds it.
func TestKeyHandoffLostAck(t *testing.T) {
	t.Parallel()
	f := newHandoffFixture(t)
	f.submit(jobq.SubmitParams{JobKey: "first", ConcurrencyKey: "k"})
	nid := f.submit(jobq.SubmitParams{JobKey: "next", ConcurrencyKey: "k"})
	f.submit(jobq.SubmitParams{JobKey: "third", ConcurrencyKey: "k"})
	first := f.claim(1)
	if handed := f.complete(5, time.Minute, first...); len(handed) != 1 || handed[0].ID != nid {
		t.Fatalf("handed %v, want job %d", handed, nid)
	}
	if handed := f.complete(5, time.Minute, first...); len(handed) != 0 {
		t.Fatalf("the repeated completion handed off %v", handed)
	}
	if j := f.job(nid); j.Status != jobq.StateRunning || j.Attempt != 1 || j.Owner != "b" {
		t.Fatalf("handed job after the repeat: %s attempt %d owner %q", j.Status, j.Attempt, j.Owner)
	}
	if got := f.admitted("k"); got != 1 {
		t.Fatalf("key admitted %d, want 1", got)
	}
	held, err := f.st.JobHeldBy(f.ctx, "b", time.Minute)
	if err != nil || len(held) != 1 || held[0].ID != nid || held[0].Attempt != 1 {
		t.Fatalf("JobHeldBy(b): %v %v, want job %d at attempt 1", held, err, nid)
	}
}

// A handed-off run whose lease expires is rescued like a claimed one: with
// no retry left it ends FAILED, frees its key's slot, and the key's next
// job is admitted.
func TestKeyHandoffRescueFreesSlot(t *testing.T) {
	t.Parallel()
	f := newHandoffFixture(t)
	f.submit(jobq.SubmitParams{JobKey: "first", ConcurrencyKey: "k"})
	nid := f.submit(jobq.SubmitParams{JobKey: "next", ConcurrencyKey: "k"})
	third := f.submit(jobq.SubmitParams{JobKey: "third", ConcurrencyKey: "k"})
	first := f.claim(1)
	handed := f.complete(5, time.Microsecond, first...)
	if len(handed) != 1 || handed[0].ID != nid {
		t.Fatalf("handed %v, want job %d", handed, nid)
	}
	ok, err := f.st.JobRescueExpired(f.ctx, handed[0].Fence())
	if err != nil || !ok {
		t.Fatalf("rescue of the handed-off run: %v %v", ok, err)
	}
	if j := f.job(nid); j.Status != jobq.StateFailed {
		t.Fatalf("rescued job is %s, want FAILED (no retry left)", j.Status)
	}
	if j := f.job(third); j.Status != jobq.StateWaiting {
		t.Fatalf("the key's next job is %s, want WAITING", j.Status)
	}
	if got := f.admitted("k"); got != 1 {
		t.Fatalf("key admitted %d, want 1", got)
	}
}
