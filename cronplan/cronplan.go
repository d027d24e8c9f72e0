// Package cronplan parses cron expressions and plans which instants of a
// periodic schedule one fire enqueues. It is pure (no clock but the one it
// is given, no database) so the service can validate a schedule without
// linking the scheduler.
package cronplan

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/jobq/jobq"
)

// cronParser accepts standard 5-field expressions, an optional leading
// seconds field (6 fields), descriptors (@hourly, @every 5m, …) and a
// CRON_TZ=Zone prefix. Without CRON_TZ expressions are evaluated in UTC.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// farFuture is the cursor of a schedule that will never fire again (for
// example "0 0 30 2 *", February 30th): the largest DATETIME.
var farFuture = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// Parse parses a cron expression: 5 fields (minute hour day-of-month
// month day-of-week), 6 with a leading seconds field, a descriptor such as
// "@hourly" or "@every 10s", optionally prefixed by "CRON_TZ=Europe/Paris ".
// Times are UTC unless CRON_TZ says otherwise. Every schedule but @every is
// planned by this package under the daylight-saving rule in wallclock.go
// (wallSchedule for fixed-time schedules, realSchedule for the others). It fails on a syntax error or
// an expression that never fires within five years of now.
func Parse(expr string) (cron.Schedule, error) {
	sched, err := cronParser.Parse(expr)
	if err != nil {
		return nil, err
	}
	// robfig/cron turns "@every 0s", "@every -5s" and "@every 500ms" into
	// 1s and "@every 1.5s" into 1s without a word: refuse what it would change.
	if cd, ok := sched.(cron.ConstantDelaySchedule); ok {
		f := strings.Fields(expr)
		if d, err := time.ParseDuration(f[len(f)-1]); err != nil || d != cd.Delay {
			return nil, fmt.Errorf("@every needs a whole number of seconds, at least 1s, got %q", f[len(f)-1])
		}
	}
	// Every field schedule is planned by jobq, under the daylight-saving
	// rule (wallclock.go); robfig/cron only parses.
	if spec, ok := sched.(*cron.SpecSchedule); ok {
		if fixedTime(expr) {
			sched = wallSchedule{spec: spec}
		} else {
			sched = realSchedule{spec: spec}
		}
	}
	if sched.Next(time.Now().UTC()).IsZero() {
		return nil, errors.New("never fires (no matching time within five years)")
	}
	return sched, nil
}

// Plan decides what one fire of a schedule enqueues. cursor is the
// first instant not yet enqueued and now the database clock. Due instants
// are those in [cursor, now]. An instant at most threshold old is on time
// and is enqueued; older ones were missed (no replica fired them in time):
// with jobq.MisfireSkip none of them runs, with jobq.MisfireOnce only the
// latest one does. next is the first instant after now (farFuture when the
// schedule never fires again). Nothing is due when cursor is after now.
func Plan(sched cron.Schedule, misfire string, threshold time.Duration, cursor, now time.Time) (enqueue []time.Time, next time.Time) {
	if cursor.After(now) {
		return nil, cursor
	}
	onTimeFrom := now.Add(-threshold)
	if cd, ok := sched.(cron.ConstantDelaySchedule); ok && cd.Delay > 0 {
		return planEvery(cd.Delay, misfire, onTimeFrom, cursor, now)
	}
	if misfire == jobq.MisfireOnce && cursor.Before(onTimeFrom) {
		if m, ok := latestBefore(sched, cursor, onTimeFrom); ok {
			enqueue = append(enqueue, m)
		}
	}
	start := onTimeFrom
	if cursor.After(start) {
		start = cursor
	}
	for i, n := sched.Next(start.Add(-time.Nanosecond)), 0; !i.IsZero() && !i.After(now) && n < 10000; i, n = sched.Next(i), n+1 {
		enqueue = append(enqueue, i)
	}
	next = sched.Next(now)
	if next.IsZero() {
		next = farFuture
	}
	return enqueue, next
}

// planEvery plans an "@every d" schedule. robfig's ConstantDelaySchedule
// counts from whatever time it is given, so its instants are anchored at the
// stored cursor instead: cursor, cursor+d, cursor+2d, … Instants older than
// the misfire threshold are skipped (or, with misfire once, the latest of
// them runs once).
func planEvery(d time.Duration, misfire string, onTimeFrom, cursor, now time.Time) (enqueue []time.Time, next time.Time) {
	i := cursor
	if i.Before(onTimeFrom) {
		// Jump over missed instants without visiting each one.
		k := onTimeFrom.Sub(i) / d
		last := i.Add(k * d)
		if last.Before(onTimeFrom) {
			if misfire == jobq.MisfireOnce {
				enqueue = append(enqueue, last)
			}
			i = last.Add(d)
		} else {
			if misfire == jobq.MisfireOnce && k > 0 {
				enqueue = append(enqueue, last.Add(-d))
			}
			i = last
		}
	}
	for ; !i.After(now); i = i.Add(d) {
		enqueue = append(enqueue, i)
	}
	return enqueue, i
}

// latestBefore returns the latest instant of sched in [from, end), looking
// back from end over a window that doubles from one minute, so a schedule
// missed for years costs a few dozen Next calls, not one per instant.
func latestBefore(sched cron.Schedule, from, end time.Time) (time.Time, bool) {
	for w := time.Minute; ; w *= 2 {
		start := end.Add(-w)
		if start.Before(from) {
			start = from
		}
		var last time.Time
		found := false
		for i, n := sched.Next(start.Add(-time.Nanosecond)), 0; !i.IsZero() && i.Before(end) && n < 100000; i, n = sched.Next(i), n+1 {
			last, found = i, true
		}
		if found || !start.After(from) {
			return last, found
		}
	}
}
