package cronplan_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cronplan"
)

// The DST rule (docs/operations.md "Daylight-saving time"), replayed
// through Plan at fixed instants, no sleeps. A fixed-time schedule fires
// once per matching local day: a local time that occurs twice fires once,
// at its first occurrence; a local time that does not exist fires once, at
// the first instant after the gap. Schedules with a seconds, minutes or
// hours step (or '*') and @every keep counting real time.
//
// 2026 changes (UTC): New York 03-08 07:00 (−5 → −4) and 11-01 06:00
// (−4 → −5); Berlin 03-29 01:00 (+1 → +2) and 10-25 01:00 (+2 → +1);
// Lord Howe 04-04 15:00 (+11 → +10:30) and 10-03 15:30 (+10:30 → +11).
func TestDSTRule(t *testing.T) {
	type change struct {
		zone, name string
		at         string // the change, UTC
		day        string // its local date
	}
	changes := map[string]change{
		"ny-spring": {"America/New_York", "spring forward", "2026-03-08T07:00:00Z", "2026-03-08"},
		"ny-fall":   {"America/New_York", "fall back", "2026-11-01T06:00:00Z", "2026-11-01"},
		"be-spring": {"Europe/Berlin", "spring forward", "2026-03-29T01:00:00Z", "2026-03-29"},
		"be-fall":   {"Europe/Berlin", "fall back", "2026-10-25T01:00:00Z", "2026-10-25"},
		"lh-fall":   {"Australia/Lord_Howe", "fall back", "2026-04-04T15:00:00Z", "2026-04-05"},
		"lh-spring": {"Australia/Lord_Howe", "spring forward", "2026-10-03T15:30:00Z", "2026-10-04"},
	}
	// Daily schedules: the instants (UTC) on the local day before the
	// change, the day of the change and the day after.
	daily := []struct {
		change, spec string
		want         [3]string
	}{
		{"ny-spring", "30 1", [3]string{"03-07T06:30", "03-08T06:30", "03-09T05:30"}},
		{"ny-spring", "30 2", [3]string{"03-07T07:30", "03-08T07:00", "03-09T06:30"}}, // 02:30 does not exist: 03:00 EDT
		{"ny-spring", "0 3", [3]string{"03-07T08:00", "03-08T07:00", "03-09T07:00"}},
		{"ny-fall", "30 1", [3]string{"10-31T05:30", "11-01T05:30", "11-02T06:30"}}, // 01:30 twice: the first (EDT)
		{"ny-fall", "30 2", [3]string{"10-31T06:30", "11-01T07:30", "11-02T07:30"}},
		{"ny-fall", "0 3", [3]string{"10-31T07:00", "11-01T08:00", "11-02T08:00"}},
		{"be-spring", "30 1", [3]string{"03-28T00:30", "03-29T00:30", "03-29T23:30"}},
		{"be-spring", "30 2", [3]string{"03-28T01:30", "03-29T01:00", "03-30T00:30"}}, // 02:30 does not exist: 03:00 CEST
		{"be-spring", "0 3", [3]string{"03-28T02:00", "03-29T01:00", "03-30T01:00"}},
		{"be-fall", "30 1", [3]string{"10-23T23:30", "10-24T23:30", "10-26T00:30"}},
		{"be-fall", "30 2", [3]string{"10-24T00:30", "10-25T00:30", "10-26T01:30"}}, // 02:30 twice: the first (CEST)
		{"be-fall", "0 3", [3]string{"10-24T01:00", "10-25T02:00", "10-26T02:00"}},
		{"lh-fall", "30 1", [3]string{"04-03T14:30", "04-04T14:30", "04-05T15:00"}}, // 01:30 twice: the first (+11)
		{"lh-fall", "30 2", [3]string{"04-03T15:30", "04-04T16:00", "04-05T16:00"}},
		{"lh-fall", "0 3", [3]string{"04-03T16:00", "04-04T16:30", "04-05T16:30"}},
		{"lh-spring", "30 1", [3]string{"10-02T15:00", "10-03T15:00", "10-04T14:30"}},
		{"lh-spring", "30 2", [3]string{"10-02T16:00", "10-03T15:30", "10-04T15:30"}}, // 02:30 exists (02:00–02:29 do not)
		{"lh-spring", "0 3", [3]string{"10-02T16:30", "10-03T16:00", "10-04T16:00"}},
	}
	for _, c := range daily {
		ch := changes[c.change]
		t.Run(fmt.Sprintf("%s %s %s", ch.zone, ch.name, c.spec), func(t *testing.T) {
			loc := mustLoc(t, ch.zone)
			day, err := time.ParseInLocation("2006-01-02", ch.day, loc)
			if err != nil {
				t.Fatal(err)
			}
			from := day.AddDate(0, 0, -1)                // local midnight the day before
			to := day.AddDate(0, 0, 2).Add(-time.Second) // local 23:59:59 the day after
			want := make([]string, 3)
			for i, w := range c.want {
				want[i] = "2026-" + w + ":00Z"
			}
			check(t, "CRON_TZ="+ch.zone+" "+c.spec+" * * *", from, to, want)
		})
	}
	// Step and @every schedules: every 30 minutes and every hour of real
	// time across the change, whatever the local clock does.
	for _, key := range []string{"ny-spring", "ny-fall", "be-spring", "be-fall", "lh-fall", "lh-spring"} {
		ch := changes[key]
		at, err := time.Parse(time.RFC3339, ch.at)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("%s %s */30", ch.zone, ch.name), func(t *testing.T) {
			check(t, "CRON_TZ="+ch.zone+" */30 * * * *", at.Add(-time.Hour), at.Add(time.Hour), instants(at.Add(-time.Hour), 30*time.Minute, 5))
		})
		t.Run(fmt.Sprintf("%s %s @every 1h", ch.zone, ch.name), func(t *testing.T) {
			check(t, "CRON_TZ="+ch.zone+" @every 1h", at.Add(-2*time.Hour), at.Add(time.Hour), instants(at.Add(-2*time.Hour), time.Hour, 4))
		})
	}
}

func mustLoc(t *testing.T, zone string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func instants(from time.Time, step time.Duration, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = from.Add(time.Duration(i) * step).UTC().Format(time.RFC3339)
	}
	return out
}

// check replays expr from cursor from to now to through Plan, with every
// instant on time (a misfire threshold longer than the window), and
// compares the enqueued instants with want (UTC, RFC 3339).
func check(t *testing.T, expr string, from, to time.Time, want []string) {
	t.Helper()
	sched, err := cronplan.Parse(expr)
	if err != nil {
		t.Fatalf("parse %q: %v", expr, err)
	}
	got, _ := cronplan.Plan(sched, jobq.MisfireSkip, 72*time.Hour, from.UTC(), to.UTC())
	gs := make([]string, len(got))
	for i, g := range got {
		gs[i] = g.UTC().Format(time.RFC3339)
	}
	if !slices.Equal(gs, want) {
		t.Errorf("DST rule broken (a repeated local time fires once, at its first occurrence; a skipped one at the end of the gap): %s from %s to %s:\n got  %s\n want %s", expr, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339),
			strings.Join(gs, " "), strings.Join(want, " "))
	}
}

// Away from daylight-saving changes the rule changes nothing: fixed-time
// schedules give robfig/cron's instants, in UTC and in a zone without DST.
func TestFixedTimeMatchesRobfigWithoutDST(t *testing.T) {
	exprs := []string{"30 2 * * *", "0 9-17 * * 1-5", "5 4 1,15 * *", "0 0 0 29 2 *", "10 20 3 * * *",
		"@daily", "@weekly", "@monthly", "@yearly", "0 12 * * SUN", "0 0 13 * 5"}
	for _, zone := range []string{"UTC", "Asia/Tokyo"} {
		for _, e := range exprs {
			expr := "CRON_TZ=" + zone + " " + e
			ours, err := cronplan.Parse(expr)
			if err != nil {
				t.Fatalf("parse %q: %v", expr, err)
			}
			theirs, err := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor).Parse(expr)
			if err != nil {
				t.Fatal(err)
			}
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i := range 200 {
				at = at.Add(time.Duration(i)*97*time.Minute + 13*time.Second)
				if got, want := ours.Next(at), theirs.Next(at); !got.Equal(want) {
					t.Fatalf("%s after %s: got %s, want %s", expr, at, got, want)
				}
			}
		}
	}
}
