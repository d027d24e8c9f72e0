package schedulertest_test

import (
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
)

// TestRecorderWaitsForPastAndLaterEvents checks the recorder's contract: an
// event emitted before the wait matches at once, one emitted later ends the
// wait, WaitAfter ignores what came before its mark, and WaitN counts.
func TestRecorderWaitsForPastAndLaterEvents(t *testing.T) {
	rec := schedulertest.NewRecorder()
	done := func(id uint64, o jobq.Outcome) scheduler.Event {
		return scheduler.Event{Kind: scheduler.EventCompleted, Applied: true, Completion: jobq.Completion{Fence: jobq.Fence{ID: id, Attempt: 1}, Outcome: o}}
	}
	rec.Observe(done(1, jobq.OutcomeSuccess))
	if e := rec.WaitFor(t, scheduler.EventCompleted, schedulertest.Finished(1, jobq.OutcomeSuccess), time.Second); e.Completion.ID != 1 {
		t.Fatalf("past event: got %+v", e)
	}
	mark := rec.Mark()
	go func() {
		rec.Observe(scheduler.Event{Kind: scheduler.EventRenewed, N: 3})
		rec.Observe(done(2, jobq.OutcomeCanceled))
	}()
	e := rec.WaitAfter(t, mark, scheduler.EventCompleted, nil, 10*time.Second)
	if e.Completion.ID != 2 {
		t.Fatalf("WaitAfter returned job %d, want 2 (job 1 came before the mark)", e.Completion.ID)
	}
	if got := rec.WaitN(t, scheduler.EventCompleted, nil, 2, 10*time.Second); len(got) != 2 {
		t.Fatalf("WaitN = %d events, want 2", len(got))
	}
	if n := rec.Count(scheduler.EventRenewed, schedulertest.NonEmpty); n != 1 {
		t.Fatalf("Count(renewed) = %d, want 1", n)
	}
	if !schedulertest.Job(2)(e) || schedulertest.Job(1)(e) {
		t.Fatalf("Job predicate wrong for %s", schedulertest.Describe(e))
	}
	// Await: the same wait, reporting a timeout instead of failing.
	if e, ok := rec.Await(scheduler.EventCompleted, schedulertest.Finished(2, jobq.OutcomeCanceled), time.Second); !ok || e.Completion.ID != 2 {
		t.Fatalf("Await(job 2 canceled) = %s, %v; want the recorded event", schedulertest.Describe(e), ok)
	}
	if e, ok := rec.Await(scheduler.EventCompleted, schedulertest.Finished(3, jobq.OutcomeSuccess), 50*time.Millisecond); ok {
		t.Fatalf("Await(job 3) = %s, true; want false (no such event)", schedulertest.Describe(e))
	}
}
