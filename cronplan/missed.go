package cronplan

import (
	"time"

	"github.com/robfig/cron/v3"
)

// MissedMax bounds the instants Missed counts.
const MissedMax = 10000

// Missed reports the instants of sched that one fire at now finds missed:
// those in [cursor, now−threshold), older than the misfire threshold, so
// no replica fired them in time (Plan skips them, or runs only the latest
// with jobq.MisfireOnce). n counts them (at most MissedMax); first and last
// are the earliest and latest. n is 0 when nothing was missed.
func Missed(sched cron.Schedule, threshold time.Duration, cursor, now time.Time) (n int, first, last time.Time) {
	onTimeFrom := now.Add(-threshold)
	if !cursor.Before(onTimeFrom) {
		return 0, time.Time{}, time.Time{}
	}
	if cd, ok := sched.(cron.ConstantDelaySchedule); ok && cd.Delay > 0 {
		k := (onTimeFrom.Sub(cursor) - 1) / cd.Delay // instants cursor + i·d < onTimeFrom, i = 0..k
		return int(min(k+1, MissedMax)), cursor, cursor.Add(k * cd.Delay)
	}
	// The cursor is the first instant not yet enqueued: an instant itself.
	for i := cursor; !i.IsZero() && i.Before(onTimeFrom) && n < MissedMax; i = sched.Next(i) {
		if n == 0 {
			first = i
		}
		last = i
		n++
	}
	return n, first, last
}
