package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// overlapSchedule creates an every-second schedule with policy whose
// cursor is 3 s back, so its first fire (threshold 1 min: nothing is a
// misfire) has at least three due instants in one transaction.
func overlapSchedule(t *testing.T, st *store.Store, name, policy string) {
	t.Helper()
	ctx := context.Background()
	now, err := st.DBNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cursor := now.UTC().Truncate(time.Second).Add(-3 * time.Second)
	spec := jobq.PeriodicSpec{Name: name, Cron: "@every 1s", JobType: "noop", Params: "{}", Misfire: jobq.MisfireSkip,
		Source: jobq.PeriodicSourceAPI, Overlap: policy}
	p, _, err := st.PeriodicUpsert(ctx, spec, func(time.Time) time.Time { return cursor })
	if err != nil || p.Overlap != policy {
		t.Fatalf("upsert %s: %+v, %v", name, p, err)
	}
}

func fireOnce(t *testing.T, st *store.Store, name string) jobq.PeriodicFireResult {
	t.Helper()
	res, err := st.PeriodicFire(context.Background(), name, realPlan(t, time.Minute))
	if err != nil {
		t.Fatalf("fire %s: %v", name, err)
	}
	return res
}

func jobState(t *testing.T, st *store.Store, id uint64) jobq.Job {
	t.Helper()
	j, err := st.JobGet(context.Background(), id)
	if err != nil {
		t.Fatalf("job %d: %v", id, err)
	}
	return j
}

// Each overlap policy, applied to several instants due in one fire while
// the first one's run has not ended, and then to the next fire.
func TestOverlapPoliciesInOneFire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)

	// allow: every instant fires.
	overlapSchedule(t, st, "allow", jobq.OverlapAllow)
	res := fireOnce(t, st, "allow")
	for _, e := range ledger(t, st, "allow") {
		if e.Fate != jobq.FireFired || e.JobID == 0 {
			t.Fatalf("allow: ledger row %+v, want fired", e)
		}
	}
	if len(res.Inserted) < 3 {
		t.Fatalf("allow: inserted %d, want ≥ 3", len(res.Inserted))
	}

	// skip: the first instant fires, the rest are skipped (overlap) while
	// its run is WAITING; once it ended, the next fire runs again.
	overlapSchedule(t, st, "skip", jobq.OverlapSkip)
	res = fireOnce(t, st, "skip")
	rows := ledger(t, st, "skip")
	if len(res.Inserted) != 1 || rows[0].Fate != jobq.FireFired || int(res.Skipped) != len(rows)-1 {
		t.Fatalf("skip: %+v, ledger %+v: want the first fired, the rest skipped", res, rows)
	}
	for _, e := range rows[1:] {
		if e.Fate != jobq.FireSkipped || e.Reason != jobq.FireReasonOverlap || e.JobID != 0 {
			t.Fatalf("skip: ledger row %+v, want skipped overlap", e)
		}
	}
	p, err := st.PeriodicGet(ctx, "skip")
	if err != nil || p.ActiveJobID != rows[0].JobID {
		t.Fatalf("skip: schedule %+v, %v: want active run %d", p, err, rows[0].JobID)
	}
	if _, err := st.JobCancel(ctx, rows[0].JobID); err != nil {
		t.Fatal(err)
	}
	next := advanceCursor(t, st, "skip")
	res = fireOnce(t, st, "skip")
	if len(res.Inserted) != 1 || !res.Inserted[0].Equal(next) {
		t.Fatalf("skip after the run ended: %+v, want %s fired", res, next)
	}

	// queue_one: the first fires, the second is parked (SCHEDULED at
	// ParkedRunAt), the others are skipped (overlap); when the first ends
	// the release makes the parked run WAITING and the active one.
	overlapSchedule(t, st, "q1", jobq.OverlapQueueOne)
	res = fireOnce(t, st, "q1")
	rows = ledger(t, st, "q1")
	if len(res.Inserted) != 2 || rows[0].Fate != jobq.FireFired || rows[1].Fate != jobq.FireFired {
		t.Fatalf("queue_one: %+v, ledger %+v: want two fired", res, rows)
	}
	for _, e := range rows[2:] {
		if e.Fate != jobq.FireSkipped || e.Reason != jobq.FireReasonOverlap {
			t.Fatalf("queue_one: ledger row %+v, want skipped overlap", e)
		}
	}
	first, parked := rows[0].JobID, rows[1].JobID
	if j := jobState(t, st, parked); j.Status != jobq.StateScheduled || !j.RunAt.Equal(jobq.ParkedRunAt) {
		t.Fatalf("queue_one: parked run %+v, want SCHEDULED at %s", j, jobq.ParkedRunAt)
	}
	if p, err := st.PeriodicGet(ctx, "q1"); err != nil || p.ActiveJobID != first || p.QueuedJobID != parked {
		t.Fatalf("queue_one: schedule %+v, %v: want active %d queued %d", p, err, first, parked)
	}
	if got, err := st.PeriodicReleaseQueued(ctx); err != nil || len(got) != 0 {
		t.Fatalf("release while the first run is WAITING: %v, %v; want nothing released", got, err)
	}
	if _, err := st.JobCancel(ctx, first); err != nil {
		t.Fatal(err)
	}
	if got, err := st.PeriodicReleaseQueued(ctx); err != nil || len(got) != 1 || got[0] != "q1" {
		t.Fatalf("release after the first run ended: %v, %v; want [q1]", got, err)
	}
	if j := jobState(t, st, parked); j.Status != jobq.StateWaiting {
		t.Fatalf("queue_one: released run %+v, want WAITING", j)
	}
	if p, err := st.PeriodicGet(ctx, "q1"); err != nil || p.ActiveJobID != parked || p.QueuedJobID != 0 {
		t.Fatalf("queue_one after release: schedule %+v, %v: want active %d, none queued", p, err, parked)
	}
	if got, err := st.PeriodicReleaseQueued(ctx); err != nil || len(got) != 0 {
		t.Fatalf("second release: %v, %v; want nothing", got, err)
	}
	// The next instant is parked behind the released run, the one after
	// that skipped.
	advanceCursor(t, st, "q1")
	res = fireOnce(t, st, "q1")
	if p, err := st.PeriodicGet(ctx, "q1"); err != nil || len(res.Inserted) != 1 || p.QueuedJobID == 0 ||
		jobState(t, st, p.QueuedJobID).Status != jobq.StateScheduled {
		t.Fatalf("queue_one, next fire: %+v, schedule %+v, %v: want the instant parked", res, p, err)
	}

	// Replacing the schedule with policy allow leaves its parked run to the
	// release; removing the schedule cancels it (no one would release it).
	spec := jobq.PeriodicSpec{Name: "q1", Cron: "@every 1s", JobType: "noop", Params: "{}", Misfire: jobq.MisfireSkip,
		Source: jobq.PeriodicSourceAPI, Overlap: jobq.OverlapAllow}
	p, _, err = st.PeriodicUpsert(ctx, spec, func(t time.Time) time.Time { return t })
	if err != nil || p.Overlap != jobq.OverlapAllow || p.QueuedJobID == 0 {
		t.Fatalf("replace q1 with allow: %+v, %v: want the parked run kept", p, err)
	}
	parkedAgain := p.QueuedJobID
	if err := st.PeriodicDelete(ctx, "q1"); err != nil {
		t.Fatal(err)
	}
	if j := jobState(t, st, parkedAgain); j.Status != jobq.StateCanceled {
		t.Fatalf("parked run after its schedule was removed: %s, want CANCELED", j.Status)
	}
	if j := jobState(t, st, parked); j.Status != jobq.StateWaiting {
		t.Fatalf("released run after its schedule was removed: %s, want WAITING (it runs)", j.Status)
	}
	if err := st.PeriodicDelete(ctx, "q1"); !errors.Is(err, jobq.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}

	// cancel_previous: every instant fires and cancels the run before it.
	overlapSchedule(t, st, "cp", jobq.OverlapCancelPrevious)
	res = fireOnce(t, st, "cp")
	rows = ledger(t, st, "cp")
	if len(res.Inserted) != len(rows) {
		t.Fatalf("cancel_previous: %+v, ledger %+v: want all fired", res, rows)
	}
	for i, e := range rows {
		want := jobq.StateCanceled
		if i == len(rows)-1 {
			want = jobq.StateWaiting
		}
		if j := jobState(t, st, e.JobID); j.Status != want {
			t.Fatalf("cancel_previous: run %d of instant %s is %s, want %s", e.JobID, e.Instant, j.Status, want)
		}
	}
}

// advanceCursor waits until the database clock reaches schedule name's
// cursor (the next instant, under a second away), so the next fire has it
// due, and returns it.
func advanceCursor(t *testing.T, st *store.Store, name string) time.Time {
	t.Helper()
	ctx := context.Background()
	p, err := st.PeriodicGet(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		now, err := st.DBNow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !now.Before(p.NextRunAt) {
			return p.NextRunAt
		}
		if time.Now().After(deadline) {
			t.Fatalf("database clock %s never reached %s", now, p.NextRunAt)
		}
		time.Sleep(20 * time.Millisecond) // polling the database clock, no assertion on time
	}
}
