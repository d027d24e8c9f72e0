// Package schedulertest lets tests of any package wait on a scheduler's
// events (scheduler.Event) instead of polling the database or sleeping: a
// Recorder is a scheduler.Observer that keeps every event, and WaitFor
// returns as soon as a matching one has been emitted — before the wait
// began or after.
//
//	rec := schedulertest.NewRecorder()
//	cfg.Observer = rec                      // or app.Config.Scheduler.Observer
//	…
//	rec.WaitFor(t, scheduler.EventCompleted, schedulertest.Finished(job.ID, jobq.OutcomeSuccess), time.Minute)
//
// A scheduler emits EventCompleted after the completion committed, so what
// the event reports is in the database when WaitFor returns.
package schedulertest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/scheduler"
)

// Recorder records every event it observes, from any number of
// schedulers at once. The zero value is not usable; call NewRecorder.
type Recorder struct {
	mu      sync.Mutex
	events  []scheduler.Event
	changed chan struct{} // closed (and replaced) at every event
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{changed: make(chan struct{})} }

// Observe records e (Recorder is a scheduler.Observer).
func (r *Recorder) Observe(e scheduler.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// Mark is a position in a Recorder's events (see Mark and WaitAfter).
type Mark int

// Mark returns the position after the events recorded so far: WaitAfter
// with it sees only later events.
func (r *Recorder) Mark() Mark {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Mark(len(r.events))
}

// Events returns the recorded events of kind ("" for every kind) that
// pred accepts (nil accepts all), oldest first.
func (r *Recorder) Events(kind scheduler.EventKind, pred func(scheduler.Event) bool) []scheduler.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return match(r.events, kind, pred)
}

// Count is len(Events(kind, pred)).
func (r *Recorder) Count(kind scheduler.EventKind, pred func(scheduler.Event) bool) int {
	return len(r.Events(kind, pred))
}

func match(events []scheduler.Event, kind scheduler.EventKind, pred func(scheduler.Event) bool) []scheduler.Event {
	var out []scheduler.Event
	for _, e := range events {
		if (kind == "" || e.Kind == kind) && (pred == nil || pred(e)) {
			out = append(out, e)
		}
	}
	return out
}

// WaitFor returns the first event of kind that pred accepts, recorded at
// any time since NewRecorder, waiting for it up to timeout; after that it
// fails the test, listing the events of kind it did see.
func (r *Recorder) WaitFor(t testing.TB, kind scheduler.EventKind, pred func(scheduler.Event) bool, timeout time.Duration) scheduler.Event {
	t.Helper()
	return r.WaitAfterN(t, 0, kind, pred, 1, timeout)[0]
}

// WaitN waits until n events of kind that pred accepts have been recorded
// and returns the first n of them; see WaitFor.
func (r *Recorder) WaitN(t testing.TB, kind scheduler.EventKind, pred func(scheduler.Event) bool, n int, timeout time.Duration) []scheduler.Event {
	t.Helper()
	return r.WaitAfterN(t, 0, kind, pred, n, timeout)
}

// WaitAfter is WaitFor over the events recorded after mark.
func (r *Recorder) WaitAfter(t testing.TB, mark Mark, kind scheduler.EventKind, pred func(scheduler.Event) bool, timeout time.Duration) scheduler.Event {
	t.Helper()
	return r.WaitAfterN(t, mark, kind, pred, 1, timeout)[0]
}

// WaitAfterN is WaitN over the events recorded after mark.
func (r *Recorder) WaitAfterN(t testing.TB, mark Mark, kind scheduler.EventKind, pred func(scheduler.Event) bool, n int, timeout time.Duration) []scheduler.Event {
	t.Helper()
	got, ok := r.awaitAfterN(mark, kind, pred, n, timeout)
	if !ok {
		t.Fatalf("schedulertest: %d of %d %s events within %s; saw %s", len(got), n, kind, timeout, r.summary(kind))
		return nil
	}
	return got
}

// Await is WaitFor for a caller that fails with its own message: it
// returns the first event of kind that pred accepts, recorded at any time
// since NewRecorder, and false when none was recorded within timeout.
func (r *Recorder) Await(kind scheduler.EventKind, pred func(scheduler.Event) bool, timeout time.Duration) (scheduler.Event, bool) {
	got, ok := r.awaitAfterN(0, kind, pred, 1, timeout)
	if !ok {
		return scheduler.Event{}, false
	}
	return got[0], true
}

// awaitAfterN waits until n events after mark match, woken by each new
// event (never by a timer but the deadline): the first n of them, or those
// seen and false once timeout passed.
func (r *Recorder) awaitAfterN(mark Mark, kind scheduler.EventKind, pred func(scheduler.Event) bool, n int, timeout time.Duration) ([]scheduler.Event, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		got := match(r.events[mark:], kind, pred)
		changed := r.changed
		r.mu.Unlock()
		if len(got) >= n {
			return got[:n], true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return got, false
		}
	}
}

// WaitUntil waits until cond holds over every event recorded so far
// (oldest first), checking it after each new event, up to timeout; after
// that it fails the test naming what. Use it for a condition over several
// events, e.g. a number of jobs claimed across claims.
func (r *Recorder) WaitUntil(t testing.TB, what string, cond func(events []scheduler.Event) bool, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok := cond(r.events)
		changed := r.changed
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("schedulertest: no %s within %s", what, timeout)
			return
		}
	}
}

// summary lists the recorded events of kind, at most 20, for a failure.
func (r *Recorder) summary(kind scheduler.EventKind) string {
	evs := r.Events(kind, nil)
	var b strings.Builder
	fmt.Fprintf(&b, "%d:", len(evs))
	for i, e := range evs {
		if i == 20 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, " %s", Describe(e))
	}
	return b.String()
}

// Describe renders e in one line for test output.
func Describe(e scheduler.Event) string {
	switch e.Kind {
	case scheduler.EventCompleted, scheduler.EventCompletionFailed:
		c := e.Completion
		s := fmt.Sprintf("%s{job %d attempt %d %s", e.Kind, c.ID, c.Attempt, c.Outcome)
		if c.Retry {
			s += " retry"
		}
		if !e.Applied && e.Kind == scheduler.EventCompleted {
			s += " stale"
		}
		if e.Err != nil {
			s += " err=" + e.Err.Error()
		}
		return s + "}"
	case scheduler.EventStarted, scheduler.EventGivenBack, scheduler.EventLeaseLost, scheduler.EventAdopted:
		return fmt.Sprintf("%s{job %d attempt %d}", e.Kind, e.Fence.ID, e.Fence.Attempt)
	case scheduler.EventClaimed, scheduler.EventFetchClaimed:
		return fmt.Sprintf("%s{%d jobs}", e.Kind, len(e.Jobs))
	case scheduler.EventFetched, scheduler.EventRemoteHeartbeat, scheduler.EventRemoteCompleted:
		return fmt.Sprintf("%s{%s n=%d}", e.Kind, e.Result, e.N)
	case scheduler.EventRescued:
		return fmt.Sprintf("%s{%v}", e.Kind, e.Fences)
	default:
		return fmt.Sprintf("%s{n=%d op=%s err=%v}", e.Kind, e.N, e.Op, e.Err)
	}
}

// Job accepts the events about job id: a completion of it, its fence, or
// a claim or rescue that includes it.
func Job(id uint64) func(scheduler.Event) bool {
	return func(e scheduler.Event) bool {
		return e.Completion.ID == id || e.Fence.ID == id ||
			slices.ContainsFunc(e.Jobs, func(j jobq.ClaimedJob) bool { return j.ID == id }) ||
			slices.ContainsFunc(e.Fences, func(f jobq.Fence) bool { return f.ID == id })
	}
}

// Finished accepts an applied completion of job id that leaves it
// terminal with outcome: SUCCESS, CANCELED, or FAILED with no retry left.
// (A failure that is retried, a release and a stale completion leave the
// job to another run.)
func Finished(id uint64, outcome jobq.Outcome) func(scheduler.Event) bool {
	return func(e scheduler.Event) bool {
		c := e.Completion
		return e.Kind == scheduler.EventCompleted && e.Applied && c.ID == id && c.Outcome == outcome && !c.Retry
	}
}

// Requeued accepts an applied failure of job id that re-queues it for
// another attempt (SCHEDULED with backoff, or WAITING).
func Requeued(id uint64) func(scheduler.Event) bool {
	return func(e scheduler.Event) bool {
		c := e.Completion
		return e.Kind == scheduler.EventCompleted && e.Applied && c.ID == id && c.Outcome == jobq.OutcomeFailed && c.Retry
	}
}

// Applied accepts an applied completion with outcome (any job; retried
// failures included).
func Applied(outcome jobq.Outcome) func(scheduler.Event) bool {
	return func(e scheduler.Event) bool {
		return e.Kind == scheduler.EventCompleted && e.Applied && e.Completion.Outcome == outcome
	}
}

// Succeeded returns the ids of the jobs whose run succeeded in evs (an
// applied SUCCESS completion each).
func Succeeded(evs []scheduler.Event) map[uint64]bool {
	out := map[uint64]bool{}
	for _, e := range evs {
		if e.Kind == scheduler.EventCompleted && e.Applied && e.Completion.Outcome == jobq.OutcomeSuccess {
			out[e.Completion.ID] = true
		}
	}
	return out
}

// Stale accepts a completion the fence refused.
func Stale(e scheduler.Event) bool { return e.Stale() }

// NonEmpty accepts a claim that took jobs, a rescue that returned runs, or
// a pass (promoter, heartbeat) that counted some.
func NonEmpty(e scheduler.Event) bool { return len(e.Jobs) > 0 || len(e.Fences) > 0 || e.N > 0 }
