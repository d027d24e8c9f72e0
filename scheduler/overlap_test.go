package scheduler_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
)

// holdHandler runs until its gate opens or its context ends (timeout,
// cancel request, shutdown).
type holdHandler struct {
	once sync.Once
	gate chan struct{}
}

func newHoldHandler() *holdHandler { return &holdHandler{gate: make(chan struct{})} }

func (h *holdHandler) open() { h.once.Do(func() { close(h.gate) }) }

func (h *holdHandler) Work(ctx context.Context, job *scheduler.Job) error {
	select {
	case <-h.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// overlapRun is one run of a schedule as job_queue has it.
type overlapRun struct {
	id                  uint64
	status              jobq.JobState
	started, finished   time.Time
	hasStart, hasFinish bool
}

// startOverlapSchedule creates an every-second schedule of type "hold"
// with policy and starts one replica on it; it returns the handler and a
// func that opens the handler's gate and stops the replica.
func startOverlapSchedule(t *testing.T, st *store.Store, name, policy string) (*holdHandler, func()) {
	t.Helper()
	h := newHoldHandler()
	t.Cleanup(h.open)
	reg := scheduler.NewRegistry()
	reg.Register("hold", h)
	if _, _, err := st.PeriodicUpsert(context.Background(), jobq.PeriodicSpec{Name: name, Cron: "@every 1s", JobType: "hold",
		Params: "{}", MaxRetry: 0, Misfire: jobq.MisfireSkip, Source: jobq.PeriodicSourceAPI, Overlap: policy}, mustCron(t, "@every 1s")); err != nil {
		t.Fatal(err)
	}
	s := startScheduler(t, st, reg, fastConfig("p1"))
	return h, func() {
		h.open()
		if err := s.Stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
}

// claimedOf returns a predicate for a claim of one of schedule name's runs;
// it stores the run's id in *id.
func claimedOf(name string, id *uint64) func(scheduler.Event) bool {
	return func(e scheduler.Event) bool {
		for _, j := range e.Jobs {
			if strings.HasPrefix(j.JobKey, name+"@") {
				*id = j.ID
				return true
			}
		}
		return false
	}
}

// firstRunThenFires waits until schedule name's first run is claimed and
// then for n fires of it that decided an instant (created a run or
// skipped one); it returns the run's id and those fires.
func firstRunThenFires(t *testing.T, name string, n int) (uint64, []scheduler.Event) {
	t.Helper()
	rec := events(t)
	var first uint64
	rec.WaitFor(t, scheduler.EventClaimed, claimedOf(name, &first), slowWait)
	if n == 0 {
		return first, nil
	}
	fires := rec.WaitAfterN(t, rec.Mark(), scheduler.EventPeriodicFired, func(e scheduler.Event) bool {
		return e.Name == name && e.Err == nil && (e.Fire.Skipped > 0 || len(e.Fire.Inserted) > 0)
	}, n, slowWait)
	return first, fires
}

// inserted counts the instants fires created runs for.
func inserted(fires []scheduler.Event) int {
	n := 0
	for _, e := range fires {
		n += len(e.Fire.Inserted)
	}
	return n
}

func overlapRuns(t *testing.T, st *store.Store, name string) map[uint64]overlapRun {
	t.Helper()
	rows, err := st.DB().Query(`SELECT id, status, started_at, finished_at FROM job_queue WHERE job_key LIKE ?`, name+"@%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uint64]overlapRun{}
	for rows.Next() {
		var r overlapRun
		var s, f *time.Time
		if err := rows.Scan(&r.id, &r.status, &s, &f); err != nil {
			t.Fatal(err)
		}
		if s != nil {
			r.started, r.hasStart = *s, true
		}
		if f != nil {
			r.finished, r.hasFinish = *f, true
		}
		out[r.id] = r
	}
	return out
}

// checkLedger fails unless every instant of name's ledger is fired with a
// job of the schedule, or skipped for an overlap (misfires are allowed:
// a loaded machine may fire late), with no gap between instants; it
// returns the fired job ids in instant order and the overlap skips.
func checkLedger(t *testing.T, st *store.Store, name string) (fired []uint64, overlaps int) {
	t.Helper()
	rows, err := st.FireRange(context.Background(), name, time.Time{}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	runs := overlapRuns(t, st, name)
	for i, r := range rows {
		if i > 0 && !r.Instant.Equal(rows[i-1].Instant.Add(time.Second)) {
			t.Fatalf("ledger gap: %s after %s", r.Instant, rows[i-1].Instant)
		}
		switch {
		case r.Fate == jobq.FireSkipped && r.Reason == jobq.FireReasonOverlap:
			overlaps++
		case r.Fate == jobq.FireSkipped && r.Reason == jobq.FireReasonMisfire:
		case r.Fate == jobq.FireFired || r.Fate == jobq.FireLate:
			if _, ok := runs[r.JobID]; !ok {
				t.Fatalf("ledger row %+v: no such run of %s", r, name)
			}
			fired = append(fired, r.JobID)
		default:
			t.Fatalf("ledger row %+v", r)
		}
	}
	if len(fired) != len(runs) {
		t.Fatalf("ledger names %d runs, job_queue has %d", len(fired), len(runs))
	}
	return fired, overlaps
}

// skip: while a run is RUNNING every instant is skipped (reason overlap);
// no two runs of the schedule ever overlap in time.
func TestOverlapSkipWhileRunning(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	h, stop := startOverlapSchedule(t, st, "skip", jobq.OverlapSkip)
	rec := events(t)
	first, fires := firstRunThenFires(t, "skip", 2)
	if n := inserted(fires); n > 0 {
		t.Fatalf("skip: %d instants fired while run %d was running, want each skipped for overlap", n, first)
	}
	h.open()
	waitFinished(t, st, first, jobq.OutcomeSuccess)
	m := rec.Mark()
	var next uint64
	rec.WaitAfter(t, m, scheduler.EventClaimed, claimedOf("skip", &next), slowWait)
	waitFinished(t, st, next, jobq.OutcomeSuccess)
	stop()
	fired, overlaps := checkLedger(t, st, "skip")
	if overlaps < 2 || fired[0] != first {
		t.Fatalf("fired %v, %d overlap skips: want the first run %d first and ≥ 2 skips", fired, overlaps, first)
	}
	runs := overlapRuns(t, st, "skip")
	for i := 1; i < len(fired); i++ {
		prev, cur := runs[fired[i-1]], runs[fired[i]]
		if cur.hasStart && (!prev.hasFinish || cur.started.Before(prev.finished)) {
			t.Fatalf("run %d started %s before run %d finished (%s)", cur.id, cur.started, prev.id, prev.finished)
		}
	}
}

// queue_one: the instant after a long run is parked, the ones after it
// skipped; when the long run ends the parked run starts (released by the
// planner within ReleaseInterval, or by the next fire) and only then.
func TestOverlapQueueOneParksAndReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	h, stop := startOverlapSchedule(t, st, "q1", jobq.OverlapQueueOne)
	rec := events(t)
	first, fires := firstRunThenFires(t, "q1", 3)
	if n := inserted(fires); n > 1 {
		t.Fatalf("queue_one: %d runs parked while run %d was running, want at most one", n, first)
	}
	p, err := st.PeriodicGet(ctx, "q1")
	if err != nil || p.ActiveJobID != first || p.QueuedJobID == 0 {
		t.Fatalf("schedule %+v, %v: want active %d and a parked run", p, err, first)
	}
	parked := p.QueuedJobID
	if j, err := st.JobGet(ctx, parked); err != nil || j.Status != jobq.StateScheduled || !j.RunAt.Equal(jobq.ParkedRunAt) {
		t.Fatalf("parked run %+v, %v: want SCHEDULED at %s", j, err, jobq.ParkedRunAt)
	}
	h.open()
	waitFinished(t, st, first, jobq.OutcomeSuccess)
	waitFinished(t, st, parked, jobq.OutcomeSuccess)
	stop()
	fired, overlaps := checkLedger(t, st, "q1")
	if len(fired) < 2 || fired[0] != first || fired[1] != parked || overlaps < 2 {
		t.Fatalf("fired %v, %d overlap skips: want %d, %d first and ≥ 2 skips", fired, overlaps, first, parked)
	}
	runs := overlapRuns(t, st, "q1")
	if a, b := runs[first], runs[parked]; !b.hasStart || b.started.Before(a.finished) {
		t.Fatalf("parked run started %s, before the run ahead of it finished (%s)", b.started, a.finished)
	} else {
		t.Logf("parked run started %s after the run ahead of it finished", b.started.Sub(a.finished))
	}
	if n := rec.Count(scheduler.EventPeriodicReleased, func(e scheduler.Event) bool { return e.Name == "q1" }); n > 1 {
		t.Fatalf("%d releases of one parked run", n)
	}
}

// cancel_previous: each instant cancels the run before it (its handler
// sees the cancel request) and fires.
func TestOverlapCancelPrevious(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	_, stop := startOverlapSchedule(t, st, "cp", jobq.OverlapCancelPrevious)
	rec := events(t)
	first, fires := firstRunThenFires(t, "cp", 1)
	if j := getJob(t, st, first); inserted(fires) == 0 || !(j.CancelRequested || j.Status == jobq.StateCanceled) {
		t.Fatalf("cancel_previous: the next instant (fire %+v) left run %d %s without a cancel request, want it cancelled", fires[0].Fire, first, j.Status)
	}
	waitFinished(t, st, first, jobq.OutcomeCanceled)
	m := rec.Mark()
	rec.WaitAfter(t, m, scheduler.EventCompleted, func(e scheduler.Event) bool {
		return e.Applied && e.Completion.Outcome == jobq.OutcomeCanceled && e.Completion.ID != first
	}, slowWait)
	stop()
	fired, overlaps := checkLedger(t, st, "cp")
	if overlaps != 0 || len(fired) < 3 {
		t.Fatalf("fired %v, %d overlap skips: want ≥ 3 fired, none skipped", fired, overlaps)
	}
	runs := overlapRuns(t, st, "cp")
	canceled := 0
	for i, id := range fired {
		switch r := runs[id]; {
		case r.status == jobq.StateCanceled && i < len(fired)-1:
			canceled++ // cancelled by the fire of the next instant
		case r.status == jobq.StateSuccess || !r.hasStart: // ran after the gate opened, or released at the stop
		default:
			t.Fatalf("run %d of %d: %s", i, len(fired), r.status)
		}
	}
	if canceled < 2 {
		t.Fatalf("%d runs cancelled by the next instant, want ≥ 2", canceled)
	}
}
