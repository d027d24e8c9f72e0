package scheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// The run queue's places follow what the workers can start within
// runQueueHorizon at the handlers' mean time, not the count that happened
// to finish: after one claim of 60 quick handlers it offers up to RunQueue,
// after four 3 s handlers nothing. (Capped by the count, a replica whose
// claims took longer than runQueueHorizon to come back was offered fewer
// places than its last claim: its claims shrank under a backlog.)
func TestRunQueuePlacesFollowHandlerTime(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name    string
		runs    int
		ran     time.Duration
		workers int
		want    int
	}{
		{"quick handlers", 60, 20 * time.Microsecond, 50, 250_000},
		{"10 ms handlers", 60, 10 * time.Millisecond, 50, 500},
		{"3 s handlers", 4, 3 * time.Second, 4, 0},
		{"released unstarted", 7, 0, 50, 7},
		{"nothing finished", 0, 0, 50, 0},
	} {
		var r recentCount
		for range c.runs {
			r.add(now, c.ran)
		}
		if got := r.places(now, c.workers); got != c.want {
			t.Errorf("%s: places = %d, want %d", c.name, got, c.want)
		}
	}
	s := newSlots(50, 2000, 2000)
	for range 60 {
		s.recent.add(now, 20*time.Microsecond)
	}
	if got := s.available(); got != 2050 {
		t.Errorf("available after quick handlers = %d, want 2,050 (50 workers + the whole run queue)", got)
	}
}

// Completions not yet written beyond one batch hold run-queue places: a
// replica whose completer falls behind claims no faster than it writes,
// and a write that catches up frees the places and wakes a draining scan.
func TestUnwrittenCompletionsHoldRunQueuePlaces(t *testing.T) {
	now := time.Now()
	s := newSlots(50, 2000, 500)
	for range 60 {
		s.recent.add(now, 20*time.Microsecond)
	}
	s.unwritten.Add(500)
	if got := s.available(); got != 2050 {
		t.Fatalf("available with one batch unwritten = %d, want 2,050", got)
	}
	s.unwritten.Add(1500)
	if got := s.available(); got != 550 {
		t.Fatalf("available with 2,000 unwritten (1,500 beyond the batch) = %d, want 550", got)
	}
	s.unwritten.Add(10000)
	if got := s.available(); got != 50 {
		t.Fatalf("available far behind = %d, want the 50 free workers", got)
	}
	s.moreWaiting.Store(true)
	s.written(11600)
	if got := s.available(); got != 2050 {
		t.Fatalf("available after the writes caught up = %d, want 2,050", got)
	}
	select {
	case <-s.wake:
	default:
		t.Fatal("a write that caught up did not wake the draining scan")
	}
}

// A run queue that stands while its completions wait to be written gives
// nothing back (the database is what it waits on); once the writes caught
// up, a stuck queue gives back as before.
func TestRunQueueKeepsJobsWhileWritesAreBehind(t *testing.T) {
	rq := newRunQueue(1, 20*time.Millisecond)
	var behind atomic.Bool
	behind.Store(true)
	release := make(chan struct{})
	given := make(chan jobq.Fence, 8)
	rq.writesBehindFunc = behind.Load
	rq.runFunc = func(q *queuedRun, _ time.Duration) { <-release }
	rq.dropFunc = func(*queuedRun) {}
	rq.giveBackFunc = func(q *queuedRun, _ time.Duration) { given <- q.r.job.Fence() }
	for i := range 3 {
		rq.push(&queuedRun{r: &run{job: &Job{ClaimedJob: jobq.ClaimedJob{ID: uint64(i + 1), Attempt: 1}}}, ctx: context.Background()})
	}
	select {
	case f := <-given:
		t.Fatalf("job %d given back while the writes were behind", f.ID)
	case <-time.After(200 * time.Millisecond):
	}
	behind.Store(false)
	select {
	case <-given:
	case <-time.After(5 * time.Second):
		t.Fatal("nothing given back from a stuck queue after the writes caught up")
	}
	close(release)
	rq.stop()
}
