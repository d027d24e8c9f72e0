package cronplan

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// The daylight-saving rule. robfig/cron walks local wall time with whole
// hours added and subtracted, so around a change a fixed-time schedule fired
// twice (a local time that occurs twice), not at all (a local time that
// does not exist), or an hour or half an hour off (Lord Howe's 30-minute
// shift). jobq's rule, tested at fixed instants in dst_test.go:
//
//   - A fixed-time schedule (seconds, minutes and hours fields all without
//     '*', '?' or a '/' step; @daily, @weekly, @monthly, @yearly) fires once
//     per matching local day at each listed local time.
//   - A local time that occurs twice (clocks go back) fires once, at its
//     first occurrence.
//   - A local time that does not exist (clocks go forward) fires once, at the
//     first instant after the gap (what Debian's cron does for fixed-time
//     jobs): 02:30 on a day New York skips 02:00–03:00 fires at 03:00 EDT.
//   - Every other schedule (a step or '*' in the seconds, minutes or hours
//     field, @hourly, @every) keeps counting real time: it fires at every
//     instant whose local time matches, so `*/30 * * * *` fires every 30
//     minutes of real time through any change and `@every 1h` every hour
//     (realSchedule, realtime.go).

// wallSchedule is a fixed-time SpecSchedule evaluated by the rule above.
type wallSchedule struct {
	spec *cron.SpecSchedule
}

// starBit is robfig/cron's marker of a '*' or '?' field (spec.go).
const starBit = 1 << 63

// maxYears bounds the search as robfig/cron does: no match within five
// years means never.
const maxYears = 5

// Next returns the first instant after t at which the schedule fires, or
// the zero time when it never does within five years.
func (w wallSchedule) Next(t time.Time) time.Time {
	s := w.spec
	loc := s.Location
	if loc == time.Local {
		loc = t.Location()
	}
	lt := t.In(loc)
	day := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, time.UTC) // the local date, as a wall-clock value
	end := day.AddDate(maxYears, 0, 0)
	for ; day.Before(end); day = day.AddDate(0, 0, 1) {
		if 1<<uint(day.Month())&s.Month == 0 || !dayMatches(s, day) {
			continue
		}
		// Resolved instants grow with the wall time within a day (a gap maps
		// to its end, a repeat to its first occurrence), so the first one
		// after t is the answer.
		for h := 0; h < 24; h++ {
			if 1<<uint(h)&s.Hour == 0 {
				continue
			}
			for m := 0; m < 60; m++ {
				if 1<<uint(m)&s.Minute == 0 {
					continue
				}
				for sec := 0; sec < 60; sec++ {
					if 1<<uint(sec)&s.Second == 0 {
						continue
					}
					wall := day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second)
					if at := resolveWall(wall, loc); at.After(t) {
						return at.In(t.Location())
					}
				}
			}
		}
	}
	return time.Time{}
}

// dayMatches is robfig/cron's day rule: with '*' in day-of-month or
// day-of-week both must match, else either.
func dayMatches(s *cron.SpecSchedule, day time.Time) bool {
	dom := 1<<uint(day.Day())&s.Dom > 0
	dow := 1<<uint(day.Weekday())&s.Dow > 0
	if s.Dom&starBit > 0 || s.Dow&starBit > 0 {
		return dom && dow
	}
	return dom || dow
}

// resolveWall returns the instant at which loc's clocks show wall (a
// wall-clock value carried in UTC): its first occurrence when the clocks show
// it twice, the first instant after the gap when they skip it.
func resolveWall(wall time.Time, loc *time.Location) time.Time {
	_, before := wall.Add(-24 * time.Hour).In(loc).Zone()
	_, at := wall.In(loc).Zone()
	_, after := wall.Add(24 * time.Hour).In(loc).Zone()
	var first time.Time
	for _, off := range []int{before, at, after} {
		u := wall.Add(-time.Duration(off) * time.Second)
		if sameWall(u.In(loc), wall) && (first.IsZero() || u.Before(first)) {
			first = u
		}
	}
	if !first.IsZero() {
		return first
	}
	// A gap: read with the offset in force before it, wall is an instant
	// past the change, inside the new zone; the change is where that zone
	// starts.
	start, _ := wall.Add(-time.Duration(before) * time.Second).In(loc).ZoneBounds()
	return start
}

func sameWall(t, wall time.Time) bool {
	y, mo, d := t.Date()
	h, m, s := t.Clock()
	return y == wall.Year() && mo == wall.Month() && d == wall.Day() && h == wall.Hour() && m == wall.Minute() && s == wall.Second()
}

// fixedTime reports whether expr (as Parse accepts it) names fixed local
// times of day: no '*', '?' or '/' in its seconds, minutes and hours
// fields, or a daily-or-longer descriptor.
func fixedTime(expr string) bool {
	f := strings.Fields(expr)
	if len(f) > 0 && (strings.HasPrefix(f[0], "CRON_TZ=") || strings.HasPrefix(f[0], "TZ=")) {
		f = f[1:]
	}
	if len(f) == 0 {
		return false
	}
	if strings.HasPrefix(f[0], "@") {
		switch f[0] {
		case "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight":
			return true
		}
		return false
	}
	var timeFields []string
	switch len(f) {
	case 5:
		timeFields = f[:2]
	case 6:
		timeFields = f[:3]
	default:
		return false
	}
	for _, v := range timeFields {
		if strings.ContainsAny(v, "*?/") {
			return false
		}
	}
	return true
}
