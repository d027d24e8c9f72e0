package scheduler

import (
	"testing"
	"time"
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
	s := newSlots(50, 2000)
	for range 60 {
		s.recent.add(now, 20*time.Microsecond)
	}
	if got := s.available(); got != 2050 {
		t.Errorf("available after quick handlers = %d, want 2,050 (50 workers + the whole run queue)", got)
	}
}
