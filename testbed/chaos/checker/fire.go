package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cronplan"
)

// Fire ledger checks (docs/operations.md "Fire ledger"): a history with
// Schedules is checked against each schedule's own instants (its cron
// expression, planned by cronplan) and its ledger.
const (
	// CheckFireMissing: an instant of a schedule, in its checked window, has
	// no ledger row (nothing says it fired or why it was skipped), or its
	// ledger row names a job that is not in job_queue.
	CheckFireMissing = "fire_missing"
	// CheckFireDoubled: an instant has more than one ledger row or more than
	// one job (job_key '<name>@<instant>'), a job for an instant the ledger
	// says was skipped, a ledger row naming another instant's job, or a
	// ledger row for a time that is not an instant of the schedule.
	CheckFireDoubled = "fire_doubled"
)

// Fates of a ledger row (periodic_fire.fate).
const (
	FateFired   = "fired"
	FateLate    = "late"
	FateSkipped = "skipped"
)

// Schedule is one periodic schedule of a run with its fire ledger. Every
// instant of Cron in [From, To) must have exactly one ledger row; rows
// outside the window are judged for doubling only.
type Schedule struct {
	Name string `json:"name"`
	Cron string `json:"cron"`
	// From is the schedule's first instant (its cursor when it was
	// created); To the end of the checked window (at most its cursor when
	// the history was read).
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Overlap is the schedule's overlap policy (informational).
	Overlap string `json:"overlap,omitempty"`
	Fires   []Fire `json:"fires"`
}

// Fire is one ledger row.
type Fire struct {
	Instant time.Time `json:"instant"`
	// Fate is fired, late or skipped; Reason (skipped) misfire or overlap.
	Fate   string `json:"fate"`
	Reason string `json:"reason,omitempty"`
	// JobID is the fired instant's job.
	JobID uint64 `json:"job_id,omitempty"`
	// Covers is how many instants the row stands for (a summary row of a
	// long outage: the instants from Instant up to the next row); 0 means 1.
	Covers int64 `json:"covers,omitempty"`
	// RecordTime is when the row was written (database clock).
	RecordTime time.Time `json:"record_time"`
}

// ScheduleResult is what the checker found for one schedule over its
// checked window.
type ScheduleResult struct {
	Name     string    `json:"name"`
	Cron     string    `json:"cron"`
	Overlap  string    `json:"overlap,omitempty"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Instants int       `json:"instants"`
	Fired    int       `json:"fired"`
	Late     int       `json:"late"`
	// Skipped counts skipped instants by reason.
	Skipped map[string]int `json:"skipped"`
	Missing int            `json:"missing"`
	Doubled int            `json:"doubled"`
}

// maxScheduleInstants bounds the instants one schedule's window is
// expanded to (a second-step schedule over a day is 86,400).
const maxScheduleInstants = 1_000_000

// scheduleSubmits returns an acknowledged submit, at the job's create
// time, for each job a ledger row of h names: a schedule's jobs are
// submitted by the schedule, so the other checks (lost, stuck …) judge
// them like the harness's own and phantom_jobs does not count them.
func scheduleSubmits(h History, jobs map[uint64]*Job) []Submit {
	var out []Submit
	for _, s := range h.Schedules {
		for _, f := range s.Fires {
			if j := jobs[f.JobID]; f.JobID != 0 && j != nil {
				out = append(out, Submit{Key: j.Key, Type: j.Type, JobID: j.ID, Replica: "schedule " + s.Name,
					SentAt: j.CreateTime, AckedAt: j.CreateTime, Tries: 1})
			}
		}
	}
	return out
}

// checkFires runs the fire checks over h's schedules and returns their
// violations and one result per schedule.
func checkFires(h History, jobs map[uint64]*Job) ([]Violation, []ScheduleResult) {
	var missing, doubled []string
	var results []ScheduleResult
	byKey := map[string][]*Job{}
	for _, j := range jobs {
		byKey[j.Key] = append(byKey[j.Key], j)
	}
	for _, s := range h.Schedules {
		r := ScheduleResult{Name: s.Name, Cron: s.Cron, Overlap: s.Overlap, From: s.From, To: s.To, Skipped: map[string]int{}}
		sched, err := cronplan.Parse(s.Cron)
		if err != nil {
			missing = append(missing, fmt.Sprintf("schedule %s: cron %q does not parse (%v): its instants cannot be checked", s.Name, s.Cron, err))
			results = append(results, r)
			continue
		}
		var instants []time.Time
		isInstant := map[time.Time]bool{}
		for t := s.From.UTC(); t.Before(s.To) && len(instants) < maxScheduleInstants; t = sched.Next(t).UTC() {
			instants = append(instants, t)
			isInstant[t] = true
		}
		r.Instants = len(instants)
		fires := slices.Clone(s.Fires)
		slices.SortStableFunc(fires, func(a, b Fire) int { return a.Instant.Compare(b.Instant) })
		rows := map[time.Time][]Fire{}
		for _, f := range fires {
			rows[f.Instant.UTC()] = append(rows[f.Instant.UTC()], f)
		}
		// covered[t]: t is an instant a summary row (covers > 1) stands for.
		covered := map[time.Time]bool{}
		for i, f := range fires {
			if f.Covers <= 1 {
				continue
			}
			next := s.To
			if i+1 < len(fires) {
				next = fires[i+1].Instant
			}
			n := int64(0)
			for _, t := range instants {
				if t.After(f.Instant) && t.Before(next) {
					covered[t] = true
					n++
				}
			}
			if n+1 > f.Covers && f.Instant.Before(s.To) {
				missing = append(missing, fmt.Sprintf("schedule %s: summary row at %s covers %d instants, %d lie before the next row",
					s.Name, fmtT(f.Instant), f.Covers, n+1))
				r.Missing++
			}
		}
		for _, t := range instants {
			rs := rows[t]
			if len(rs) == 0 {
				if !covered[t] {
					missing = append(missing, fmt.Sprintf("schedule %s: instant %s has no ledger row", s.Name, fmtT(t)))
					r.Missing++
				} else {
					r.Skipped[jobq.FireReasonMisfire]++
				}
				continue
			}
			switch f := rs[0]; f.Fate {
			case FateFired, FateLate:
				if f.Fate == FateLate {
					r.Late++
				} else {
					r.Fired++
				}
				if j := jobs[f.JobID]; f.JobID != 0 && j == nil {
					missing = append(missing, fmt.Sprintf("schedule %s: instant %s fired job %d, which is not in job_queue", s.Name, fmtT(t), f.JobID))
					r.Missing++
				}
			case FateSkipped:
				r.Skipped[cmp.Or(f.Reason, "none")]++
				if f.Reason == "" {
					missing = append(missing, fmt.Sprintf("schedule %s: instant %s skipped without a reason", s.Name, fmtT(t)))
					r.Missing++
				}
			default:
				missing = append(missing, fmt.Sprintf("schedule %s: instant %s has fate %q", s.Name, fmtT(t), f.Fate))
				r.Missing++
			}
		}
		// Doubling, over every row and job of the schedule.
		for _, t := range slices.SortedFunc(maps.Keys(rows), time.Time.Compare) {
			rs := rows[t]
			inWindow := !t.Before(s.From) && t.Before(s.To)
			if len(rs) > 1 {
				doubled = append(doubled, fmt.Sprintf("schedule %s: instant %s has %d ledger rows", s.Name, fmtT(t), len(rs)))
				r.Doubled++
			}
			if inWindow && !isInstant[t] {
				doubled = append(doubled, fmt.Sprintf("schedule %s: ledger row at %s, which is not an instant of %q", s.Name, fmtT(t), s.Cron))
				r.Doubled++
			}
			k := jobq.PeriodicKey(s.Name, t)
			js := byKey[k]
			f := rs[0]
			switch {
			case len(js) > 1:
				doubled = append(doubled, fmt.Sprintf("schedule %s: instant %s has %d jobs (%s)", s.Name, fmtT(t), len(js), k))
				r.Doubled++
			case f.Fate == FateSkipped && len(js) > 0:
				doubled = append(doubled, fmt.Sprintf("schedule %s: instant %s skipped (%s) in the ledger, yet job %d ran for it",
					s.Name, fmtT(t), f.Reason, js[0].ID))
				r.Doubled++
			case f.JobID != 0 && jobs[f.JobID] != nil && jobs[f.JobID].Key != k:
				doubled = append(doubled, fmt.Sprintf("schedule %s: instant %s fired job %d, which is %s", s.Name, fmtT(t), f.JobID, jobs[f.JobID].Key))
				r.Doubled++
			}
		}
		// A job of the schedule in the window that no ledger row names.
		prefix := s.Name + "@"
		for _, t := range instants {
			if len(rows[t]) == 0 && len(byKey[jobq.PeriodicKey(s.Name, t)]) > 0 {
				doubled = append(doubled, fmt.Sprintf("schedule %s: job %s ran for an instant the ledger does not record", s.Name, prefix+t.Format(jobq.PeriodicInstantLayout)))
				r.Doubled++
			}
		}
		results = append(results, r)
	}
	var out []Violation
	for _, v := range []struct {
		check string
		ex    []string
	}{{CheckFireMissing, missing}, {CheckFireDoubled, doubled}} {
		if len(v.ex) > 0 {
			out = append(out, Violation{Check: v.check, Count: len(v.ex), Examples: v.ex[:min(len(v.ex), maxExamples)]})
		}
	}
	return out, results
}

func fmtT(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
