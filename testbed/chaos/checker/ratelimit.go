package checker

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// CheckRateLimitExceeded: some window of a rate limit's period held more
// starts (claims, from job_execution.started_at) of its job type than the
// limit allows — the limit was not applied across replicas on the
// database clock.
const CheckRateLimitExceeded = "rate_limit_exceeded"

// RateLimit is a job type's rate limit during the run: at most Starts
// starts in any window [t, t+Period).
type RateLimit struct {
	JobType string        `json:"job_type"`
	Starts  int           `json:"starts"`
	Period  time.Duration `json:"period"`
}

// MostInWindow returns the most of starts (sorted) in any half-open window
// [t, t+period): the fullest window a rate limit of that period saw.
func MostInWindow(starts []time.Time, period time.Duration) int {
	best, j := 0, 0
	for i := range starts {
		for j < len(starts) && starts[j].Before(starts[i].Add(period)) {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

// checkRateLimits counts, for each of h's rate limits, the starts of its
// type that were more than the limit allowed: a start is one too many when
// the window of the period ending at it, (start − Period, start], holds
// more than Starts starts. Every attempt counts, whatever its outcome (a
// released or rescued attempt was a start too).
func checkRateLimits(h History, jobs map[uint64]*Job, execs map[uint64][]Execution) []Violation {
	if len(h.RateLimits) == 0 {
		return nil
	}
	starts := map[string][]time.Time{}
	for id, ex := range execs {
		j := jobs[id]
		if j == nil {
			continue
		}
		for _, e := range ex {
			starts[j.Type] = append(starts[j.Type], e.StartedAt)
		}
	}
	limits := map[string]RateLimit{}
	for _, l := range h.RateLimits {
		limits[l.JobType] = l
	}
	var over []string
	count := 0
	for _, typ := range slices.Sorted(maps.Keys(limits)) {
		l := limits[typ]
		ts := starts[typ]
		slices.SortFunc(ts, time.Time.Compare)
		first, worst, worstAt := 0, 0, time.Time{}
		for k, t := range ts {
			for !ts[first].After(t.Add(-l.Period)) {
				first++
			}
			if n := k - first + 1; n > l.Starts {
				count++
				if n > worst {
					worst, worstAt = n, t
				}
			}
		}
		if worst > 0 {
			over = append(over, fmt.Sprintf("type %s: %d starts in the %s window ending %s, limit %d",
				typ, worst, l.Period, worstAt.Format(time.RFC3339Nano), l.Starts))
		}
	}
	if count == 0 {
		return nil
	}
	return []Violation{{Check: CheckRateLimitExceeded, Count: count, Examples: over[:min(len(over), maxExamples)]}}
}
