package cronplan_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/jobq/jobq/cronplan"
)

// The planner against a brute-force reference of the documented
// daylight-saving rule (docs/operations.md "Daylight-saving time"), around
// every 2026 offset change of every zone in the system tzdata. The
// reference steps minute by minute in UTC, converts each minute to local
// time and matches the fields:
//
//   - a real-time schedule fires at every minute whose local time matches;
//   - a fixed-time schedule fires at a minute whose local time matches and
//     occurs there for the first time, and at the first minute after a gap
//     when a local time inside the gap matches.
//
// The expressions name whole minutes (seconds 0), so minute steps see every
// instant.
var bruteExprs = []struct {
	expr  string
	fixed bool
}{
	{"0 * * 3,4 0", false}, // Beirut: Sunday's midnight falls in the gap
	{"0 * * 4 5", false},   // Cairo: Friday's midnight falls in the gap
	{"0 */2 * * *", false}, // Lord Howe: 02:00 after the 30-minute fall-back
	{"*/30 * * * *", false},
	{"15,45 * * * *", false},
	{"0 * 1,15,29 * 0", false},
	{"* 0-1 * * *", false},
	{"@hourly", false},
	{"30 1 * * *", true},
	{"30 2 * * *", true},
	{"0 0 * * *", true},
	{"0 3 * * 0", true},
	{"59 23 * * *", true},
	{"0 0 29 3 *", true},
	{"30 0,1,2,3 * * *", true},
	{"0 0 * * 5,6", true},
}

var refParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// matches reports whether wall (a local wall-clock value) matches spec's
// fields, with cron's day rule: with '*' in day-of-month or day-of-week
// both must match, else either.
func matches(s *cron.SpecSchedule, wall time.Time) bool {
	const star = 1 << 63
	bit := func(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }
	if !bit(s.Second, wall.Second()) || !bit(s.Minute, wall.Minute()) || !bit(s.Hour, wall.Hour()) || !bit(s.Month, int(wall.Month())) {
		return false
	}
	dom, dow := bit(s.Dom, wall.Day()), bit(s.Dow, int(wall.Weekday()))
	if s.Dom&star != 0 || s.Dow&star != 0 {
		return dom && dow
	}
	return dom || dow
}

func wallOf(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, m, s := t.Clock()
	return time.Date(y, mo, d, h, m, s, 0, time.UTC)
}

// reference returns the fire instants in [from, to) by brute force.
func reference(s *cron.SpecSchedule, fixed bool, loc *time.Location, from, to time.Time) []time.Time {
	var out []time.Time
	seen := map[time.Time]bool{}
	prev := wallOf(from.Add(-time.Minute).In(loc))
	seen[prev] = true
	for u := from; u.Before(to); u = u.Add(time.Minute) {
		w := wallOf(u.In(loc))
		fire := false
		if !fixed {
			fire = matches(s, w)
		} else {
			fire = matches(s, w) && !seen[w]
			for g := prev.Add(time.Minute); !fire && g.Before(w); g = g.Add(time.Minute) {
				fire = matches(s, g) // a local time skipped by a gap fires at its end
			}
		}
		if fire {
			out = append(out, u)
		}
		seen[w] = true
		prev = w
	}
	return out
}

// planned returns the planner's instants in [from, to).
func planned(sched cron.Schedule, from, to time.Time) []time.Time {
	var out []time.Time
	for i := sched.Next(from.Add(-time.Second)); !i.IsZero() && i.Before(to); i = sched.Next(i) {
		out = append(out, i.UTC())
	}
	return out
}

// zones2026 returns the zones of the system tzdata whose offset changes
// in 2026, one per distinct list of changes, with the instants of the
// changes.
func zones2026(t *testing.T) (names []string, changes map[string][]time.Time) {
	root := "/usr/share/zoneinfo"
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("system tzdata: %v (install tzdata)", err)
	}
	start, end := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	changes = map[string][]time.Time{}
	signatures := map[string]bool{}
	all := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "posix" || rel == "right" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.ContainsAny(rel, ".") || strings.ToLower(rel) == rel { // zone.tab, tzdata.zi, leapseconds …
			return nil
		}
		loc, err := time.LoadLocation(rel)
		if err != nil {
			return nil
		}
		var at []time.Time
		var sig strings.Builder
		_, off0 := start.In(loc).Zone()
		fmt.Fprintf(&sig, "%d,", off0)
		for u := start; ; {
			_, e := u.In(loc).ZoneBounds()
			if e.IsZero() || !e.Before(end) {
				break
			}
			_, off := e.In(loc).Zone()
			at = append(at, e)
			fmt.Fprintf(&sig, "%d@%d,", off, e.Unix())
			u = e
		}
		if len(at) == 0 {
			return nil
		}
		all++
		if signatures[sig.String()] {
			return nil
		}
		signatures[sig.String()] = true
		names = append(names, rel)
		changes[rel] = at
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	t.Logf("%d zones of the system tzdata change offset in 2026; %d distinct offset histories", all, len(names))
	return names, changes
}

func TestPlannerMatchesBruteForceEveryZone2026(t *testing.T) {
	t.Parallel()
	names, changes := zones2026(t)
	if len(names) < 20 {
		t.Fatalf("only %d zones with 2026 changes in the system tzdata: %v", len(names), names)
	}
	mismatches := 0
	for _, name := range names {
		loc, _ := time.LoadLocation(name)
		for _, e := range bruteExprs {
			full := "CRON_TZ=" + name + " " + e.expr
			sched, err := cronplan.Parse(full)
			if err != nil {
				t.Fatalf("parse %q: %v", full, err)
			}
			spec, err := refParser.Parse(full)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range changes[name] {
				// The local days around the change: 36 h each side.
				from, to := c.Add(-36*time.Hour), c.Add(36*time.Hour)
				want := reference(spec.(*cron.SpecSchedule), e.fixed, loc, from, to)
				got := planned(sched, from, to)
				if !slices.EqualFunc(got, want, time.Time.Equal) {
					mismatches++
					if mismatches <= 10 {
						t.Errorf("%q around %s: planner %d instants, reference %d\n  only planner: %v\n  only reference: %v",
							full, c.Format(time.RFC3339), len(got), len(want), minus(got, want), minus(want, got))
					}
				}
			}
		}
	}
	if mismatches > 0 {
		t.Fatalf("%d (zone, expression, change) windows differ from the reference", mismatches)
	}
}

func minus(a, b []time.Time) []string {
	var out []string
	for _, x := range a {
		if !slices.ContainsFunc(b, x.Equal) {
			out = append(out, x.Format(time.RFC3339))
		}
	}
	if len(out) > 6 {
		out = append(out[:6], fmt.Sprintf("… %d in all", len(out)))
	}
	return out
}

// The three replays of the issue, by hand: each fires every hour of its
// day (23 on a day with a one-hour gap), and Lord Howe fires local 02:00
// after its fall-back.
func TestRealTimeScheduleAcrossMidnightGap(t *testing.T) {
	cases := []struct {
		expr     string
		day      string // local date
		zone     string
		wantJobs int
	}{
		{"CRON_TZ=Asia/Beirut 0 * * 3,4 0", "2026-03-29", "Asia/Beirut", 23},
		{"CRON_TZ=Africa/Cairo 0 * * 4 5", "2026-04-24", "Africa/Cairo", 23},
	}
	for _, c := range cases {
		sched, err := cronplan.Parse(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		loc, _ := time.LoadLocation(c.zone)
		d, _ := time.ParseInLocation("2006-01-02", c.day, loc)
		from := d.Add(-12 * time.Hour)
		n := 0
		for i := sched.Next(from); i.Before(d.Add(36 * time.Hour)); i = sched.Next(i) {
			if i.In(loc).Format("2006-01-02") == c.day {
				n++
			}
		}
		if n != c.wantJobs {
			t.Errorf("%s on %s: %d fires, want %d", c.expr, c.day, n, c.wantJobs)
		}
	}
	sched, err := cronplan.Parse("CRON_TZ=Australia/Lord_Howe 0 */2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	// Lord Howe falls back at 2026-04-04T15:00Z (02:00 +11 → 01:30 +10:30);
	// 02:00 +10:30 is 15:30Z.
	from := time.Date(2026, 4, 4, 14, 0, 0, 0, time.UTC)
	var got []string
	for i := sched.Next(from); i.Before(from.Add(6 * time.Hour)); i = sched.Next(i) {
		got = append(got, i.UTC().Format("15:04"))
	}
	if want := []string{"15:30", "17:30", "19:30"}; !slices.Equal(got, want) {
		t.Errorf("Lord Howe 0 */2 from 14:00Z on 2026-04-04: %v, want %v", got, want)
	}
}
