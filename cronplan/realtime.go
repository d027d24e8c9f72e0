package cronplan

import (
	"time"

	"github.com/robfig/cron/v3"
)

// realSchedule is a schedule that is not fixed-time (a step or '*' in its
// seconds, minutes or hours field, @hourly): it fires at every instant whose
// local time matches its fields (the daylight-saving rule in wallclock.go).
// A local time that occurs twice fires twice; one that does not exist does
// not fire.
//
// robfig/cron's own Next walks local wall time and, when a day-of-week or
// day-of-month field restricts the day and local midnight falls in a gap
// (Beirut and Cairo change at 00:00), skips the whole day; it also lost
// the repeated hour of a 30-minute shift (Lord Howe). realSchedule instead
// walks the zone's offset periods: within one period local time is a fixed
// offset from UTC, so the first matching wall time of the period is the
// first matching instant in it.
type realSchedule struct {
	spec *cron.SpecSchedule
}

// Next returns the first whole-second instant after t whose local time
// matches, or the zero time when none does within five years.
func (r realSchedule) Next(t time.Time) time.Time {
	loc := r.spec.Location
	if loc == time.Local {
		loc = t.Location()
	}
	u := t.Add(time.Second - time.Duration(t.Nanosecond())) // the first whole second after t
	limit := u.AddDate(maxYears, 0, 0)
	for u.Before(limit) {
		lt := u.In(loc)
		_, off := lt.Zone()
		offset := time.Duration(off) * time.Second
		_, end := lt.ZoneBounds() // zero: the offset never changes again
		if end.IsZero() || end.After(limit) {
			end = limit
		}
		from := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), lt.Second(), 0, time.UTC)
		if w, ok := nextMatch(r.spec, from, end.Add(offset)); ok {
			return w.Add(-offset).In(t.Location())
		}
		u = end
	}
	return time.Time{}
}

// nextMatch returns the first wall time in [from, until) (wall-clock values
// carried in UTC, whole seconds) that matches s's fields.
func nextMatch(s *cron.SpecSchedule, from, until time.Time) (time.Time, bool) {
	day := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, time.UTC)
	fh, fm, fs := from.Clock()
	for first := true; day.Before(until); day, first = day.AddDate(0, 0, 1), false {
		if 1<<uint(day.Month())&s.Month == 0 || !dayMatches(s, day) {
			continue
		}
		for h := 0; h < 24; h++ {
			if 1<<uint(h)&s.Hour == 0 || first && h < fh {
				continue
			}
			firstH := first && h == fh
			for m := 0; m < 60; m++ {
				if 1<<uint(m)&s.Minute == 0 || firstH && m < fm {
					continue
				}
				firstM := firstH && m == fm
				for sec := 0; sec < 60; sec++ {
					if 1<<uint(sec)&s.Second == 0 || firstM && sec < fs {
						continue
					}
					w := day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second)
					return w, w.Before(until)
				}
			}
		}
	}
	return time.Time{}, false
}
