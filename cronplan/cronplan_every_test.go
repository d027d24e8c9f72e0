package cronplan_test

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cronplan"
)

// "@every d" schedules are anchored at the stored cursor: each due instant
// is enqueued once, missed ones follow the misfire policy, and the cursor
// moves to the first instant after now.
func TestPlanPeriodicEvery(t *testing.T) {
	every := cron.Every(10 * time.Second)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	cases := []struct {
		name        string
		misfire     string
		cursor, now time.Time
		want        []time.Time
		next        time.Time
	}{
		{"not due yet", jobq.MisfireSkip, sec(10), sec(5), nil, sec(10)},
		{"due now", jobq.MisfireSkip, sec(10), sec(10), []time.Time{sec(10)}, sec(20)},
		{"due, slightly late", jobq.MisfireSkip, sec(10), sec(10).Add(300 * time.Millisecond), []time.Time{sec(10)}, sec(20)},
		{"missed, skip", jobq.MisfireSkip, sec(10), sec(65), nil, sec(70)},
		{"missed, once", jobq.MisfireOnce, sec(10), sec(65), []time.Time{sec(60)}, sec(70)},
		{"missed, on-time instant too", jobq.MisfireOnce, sec(10), sec(70).Add(500 * time.Millisecond), []time.Time{sec(60), sec(70)}, sec(80)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, next := cronplan.Plan(every, c.misfire, time.Second, c.cursor, c.now)
			if len(got) != len(c.want) {
				t.Fatalf("enqueue = %v, want %v", got, c.want)
			}
			for i := range got {
				if !got[i].Equal(c.want[i]) {
					t.Fatalf("enqueue = %v, want %v", got, c.want)
				}
			}
			if !next.Equal(c.next) {
				t.Fatalf("next = %v, want %v", next, c.next)
			}
		})
	}
}
