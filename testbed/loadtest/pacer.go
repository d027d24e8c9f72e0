package loadtest

import (
	"math"
	"time"
)

// schedule is the open-model arrival schedule: submit n (0-based) is due at
// At(n) after the start, whatever happened to the submits before it. It
// implements vegeta.Pacer so the attacker sends on this schedule, and the
// engine charges every latency from At(seq) — the intended send time.
type schedule struct {
	stages []Stage
	starts []time.Duration // start offset of each stage
	firstN []uint64        // index of the first submit of each stage
	total  uint64          // submits in the whole schedule
}

func newSchedule(stages []Stage) *schedule {
	s := &schedule{stages: stages}
	var at time.Duration
	var n uint64
	for _, st := range stages {
		s.starts = append(s.starts, at)
		s.firstN = append(s.firstN, n)
		n += stageHits(st)
		at += st.Duration
	}
	s.total = n
	return s
}

// stageHits is the number of submits a stage sends: rate × duration, rounded.
func stageHits(st Stage) uint64 {
	return uint64(math.Round(st.Rate * st.Duration.Seconds()))
}

// Total is the number of submits the schedule sends.
func (s *schedule) Total() uint64 { return s.total }

// Duration is the schedule's length.
func (s *schedule) Duration() time.Duration {
	var d time.Duration
	for _, st := range s.stages {
		d += st.Duration
	}
	return d
}

// At is the intended send time of submit n, as an offset from the start.
// Within a stage submits are evenly spaced at 1/rate, the first at the
// stage's start.
func (s *schedule) At(n uint64) time.Duration {
	i := len(s.stages) - 1
	for j := range s.stages {
		if j+1 == len(s.stages) || n < s.firstN[j+1] {
			i = j
			break
		}
	}
	k := float64(n - s.firstN[i])
	return s.starts[i] + time.Duration(k/s.stages[i].Rate*float64(time.Second))
}

// Pace implements vegeta.Pacer: wait until submit #hits is due; stop once
// every submit of the schedule was sent. A late attacker gets wait 0 and
// catches up; the lateness is charged to the latency, not forgiven.
func (s *schedule) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= s.total {
		return 0, true
	}
	return max(s.At(hits)-elapsed, 0), false
}

// Rate implements vegeta.Pacer: the stage's rate at elapsed.
func (s *schedule) Rate(elapsed time.Duration) float64 {
	for i := len(s.stages) - 1; i >= 0; i-- {
		if elapsed >= s.starts[i] {
			return s.stages[i].Rate
		}
	}
	return s.stages[0].Rate
}
