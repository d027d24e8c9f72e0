package cronplan_test

import (
	"testing"
	"time"

	"github.com/jobq/jobq/cronplan"
)

// TestMissed counts the instants older than the threshold from the cursor:
// for a cron expression and for @every, none when the fire is on time.
func TestMissed(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		expr        string
		cursor, now time.Time
		n           int
		first, last time.Time
	}{
		// Hourly, cursor 03:00, now 06:00:30, threshold 1m: 03, 04, 05 missed; 06:00 on time.
		{"0 * * * *", base, base.Add(3*time.Hour + 30*time.Second), 3, base, base.Add(2 * time.Hour)},
		{"@every 10s", base, base.Add(65 * time.Second), 1, base, base},
		{"@every 10s", base, base.Add(2*time.Minute + 5*time.Second), 7, base, base.Add(60 * time.Second)},
		{"0 * * * *", base, base.Add(30 * time.Second), 0, time.Time{}, time.Time{}},
	} {
		sched, err := cronplan.Parse(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		n, first, last := cronplan.Missed(sched, time.Minute, c.cursor, c.now)
		if n != c.n || !first.Equal(c.first) || !last.Equal(c.last) {
			t.Errorf("%s now %s: %d %s..%s, want %d %s..%s", c.expr, c.now, n, first, last, c.n, c.first, c.last)
		}
	}
}
