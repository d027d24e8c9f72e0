package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// CheckRateLimitExceeded: some window of a rate limit's period held more
// starts (claims, from job_execution.started_at) of its job type — or, for
// a per-key limit, of one rate key of its type — than the limit allows: the
// limit was not applied across replicas on the database clock.
const CheckRateLimitExceeded = "rate_limit_exceeded"

// RateLimit is a job type's rate limit during the run: at most Starts
// starts in any window [t, t+Period) — of each rate key of the type on its
// own when PerKey (Job.RateKey; jobs without one share the key "").
type RateLimit struct {
	JobType string        `json:"job_type"`
	Starts  int           `json:"starts"`
	Period  time.Duration `json:"period"`
	PerKey  bool          `json:"per_key,omitempty"`
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

// rateWindow names the starts one limit counts together: a job type, and
// the rate key under a per-key limit ("" otherwise).
type rateWindow struct{ typ, key string }

// checkRateLimits counts, for each of h's rate limits, the starts of its
// type (of each of its rate keys, for a per-key limit) that were more than
// the limit allowed: a start is one too many when the window of the period
// ending at it, (start − Period, start], holds more than Starts starts of
// its type (key). Every attempt counts, whatever its outcome (a released or
// rescued attempt was a start too).
func checkRateLimits(h History, jobs map[uint64]*Job, execs map[uint64][]Execution) []Violation {
	if len(h.RateLimits) == 0 {
		return nil
	}
	limits := map[string]RateLimit{}
	for _, l := range h.RateLimits {
		limits[l.JobType] = l
	}
	starts := map[rateWindow][]time.Time{}
	for id, ex := range execs {
		j := jobs[id]
		if j == nil {
			continue
		}
		w := rateWindow{typ: j.Type}
		if limits[j.Type].PerKey {
			w.key = j.RateKey
		}
		for _, e := range ex {
			starts[w] = append(starts[w], e.StartedAt)
		}
	}
	windows := slices.SortedFunc(maps.Keys(starts), func(a, b rateWindow) int {
		return cmp.Or(strings.Compare(a.typ, b.typ), strings.Compare(a.key, b.key))
	})
	var over []string
	count := 0
	for _, w := range windows {
		l, ok := limits[w.typ]
		if !ok {
			continue
		}
		ts := starts[w]
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
			what := "type " + w.typ
			if l.PerKey {
				what += fmt.Sprintf(" key %q", w.key)
			}
			over = append(over, fmt.Sprintf("%s: %d starts in the %s window ending %s, limit %d",
				what, worst, l.Period, worstAt.Format(time.RFC3339Nano), l.Starts))
		}
	}
	if count == 0 {
		return nil
	}
	return []Violation{{Check: CheckRateLimitExceeded, Count: count, Examples: over[:min(len(over), maxExamples)]}}
}
