package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// CheckKeyOverlap: more runs of one concurrency key were in flight at once
// than the key's limit (docs/operations.md, "Concurrency keys"). A run is an
// attempt's execution row, from its claim (started_at) to its end
// (finished_at: the completion, the rescue or the release; the history's
// end while it has none). Runs that touch (one ends at the instant the next
// starts) do not overlap.
const CheckKeyOverlap = "concurrency_key_overlap"

// StatusParked is a keyed job waiting for a slot of its key.
const StatusParked = "PARKED"

// checkKeys reports every instant a key had more runs in flight than its
// limit (none when no job carries a key).
func checkKeys(h History, jobs map[uint64]*Job, execs map[uint64][]Execution) []Violation {
	type run struct {
		job     uint64
		attempt int
		start   time.Time
		end     time.Time
	}
	byKey := map[string][]run{}
	limit := map[string]int{}
	for id, j := range jobs {
		if j.ConcurrencyKey == "" {
			continue
		}
		limit[j.ConcurrencyKey] = max(limit[j.ConcurrencyKey], j.ConcurrencyLimit, 1)
		for _, e := range execs[id] {
			end := h.End
			if e.FinishedAt != nil {
				end = *e.FinishedAt
			}
			byKey[j.ConcurrencyKey] = append(byKey[j.ConcurrencyKey], run{id, e.Attempt, e.StartedAt, end})
		}
	}
	var ex []string
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		runs := byKey[k]
		slices.SortFunc(runs, func(a, b run) int { return cmp.Or(a.start.Compare(b.start), cmp.Compare(a.job, b.job)) })
		var open []run // in flight at the current start, by end
		for _, r := range runs {
			open = slices.DeleteFunc(open, func(o run) bool { return !o.end.After(r.start) })
			open = append(open, r)
			if len(open) > limit[k] {
				o := open[0]
				ex = append(ex, fmt.Sprintf("key %q (limit %d): job %d attempt %d started at %s while %d runs were in flight, job %d attempt %d among them (until %s)",
					k, limit[k], r.job, r.attempt, r.start.Format(time.RFC3339Nano), len(open)-1, o.job, o.attempt, o.end.Format(time.RFC3339Nano)))
			}
		}
	}
	if len(ex) == 0 {
		return nil
	}
	return []Violation{{Check: CheckKeyOverlap, Count: len(ex), Examples: ex[:min(len(ex), maxExamples)]}}
}
