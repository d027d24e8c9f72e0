package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// TuneParams is one candidate configuration of the tuning search.
type TuneParams struct {
	BatchLimit   int           `json:"batch_limit"`
	PollInterval time.Duration `json:"poll_interval_ns"`
	PollJitter   time.Duration `json:"poll_jitter_ns"`
}

func (t TuneParams) String() string {
	return fmt.Sprintf("batch=%d poll=%s jitter=%s", t.BatchLimit, t.PollInterval, fmtDur(t.PollJitter))
}

// TunePoint is an evaluated candidate.
type TunePoint struct {
	TuneParams
	Throughput float64 `json:"throughput_jobs_per_s"`
	P99        float64 `json:"pickup_p99_ms"`
	Feasible   bool    `json:"feasible"` // P99 ≤ SLO
}

// TuneSpace is the grid searched: batch limits, poll intervals and jitter
// as a fraction of the poll interval.
type TuneSpace struct {
	Batches     []int
	Polls       []time.Duration
	JitterFracs []float64
}

// DefaultTuneSpace is searched by `jobq bench --tune`.
var DefaultTuneSpace = TuneSpace{
	Batches:     []int{50, 100, 200, 500, 1000},
	Polls:       []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second},
	JitterFracs: []float64{0, 0.1, 0.2},
}

// tuneMaxEvals caps the evaluations of one search (each is a throughput
// point plus a latency run).
const tuneMaxEvals = 14

// Evaluator measures one candidate: throughput in jobs/s and pickup p99.
type Evaluator func(ctx context.Context, p TuneParams) (throughput float64, p99 time.Duration, err error)

// better orders candidates: feasible before infeasible; among feasible the
// higher throughput; among infeasible the lower p99.
func better(a, b TunePoint) bool {
	switch {
	case a.Feasible != b.Feasible:
		return a.Feasible
	case a.Feasible:
		return a.Throughput > b.Throughput
	default:
		return a.P99 < b.P99
	}
}

// Search is a coordinate search over space from start (indexes into the
// batch, poll and jitter lists): for each dimension in turn it evaluates
// every value with the others held, moves to the best, and repeats while
// a round improves, within maxEvals evaluations (each candidate evaluated
// once). It returns the best candidate — the highest throughput whose p99
// is within slo, or, when none is, the lowest p99 (Feasible false) — and
// every evaluation in order.
func Search(ctx context.Context, space TuneSpace, start [3]int, slo time.Duration, maxEvals int, eval Evaluator) (TunePoint, []TunePoint, error) {
	params := func(ix [3]int) TuneParams {
		poll := space.Polls[ix[1]]
		return TuneParams{BatchLimit: space.Batches[ix[0]], PollInterval: poll,
			PollJitter: time.Duration(float64(poll) * space.JitterFracs[ix[2]])}
	}
	seen := map[[3]int]TunePoint{}
	var order []TunePoint
	get := func(ix [3]int) (TunePoint, bool, error) {
		if tp, ok := seen[ix]; ok {
			return tp, true, nil
		}
		if len(order) >= maxEvals {
			return TunePoint{}, false, nil
		}
		p := params(ix)
		thr, p99, err := eval(ctx, p)
		if err != nil {
			return TunePoint{}, false, fmt.Errorf("tune %s: %w", p, err)
		}
		tp := TunePoint{TuneParams: p, Throughput: thr, P99: float64(p99) / float64(time.Millisecond), Feasible: p99 <= slo}
		seen[ix] = tp
		order = append(order, tp)
		return tp, true, nil
	}
	cur := start
	best, ok, err := get(cur)
	if err != nil || !ok {
		return best, order, err
	}
	sizes := [3]int{len(space.Batches), len(space.Polls), len(space.JitterFracs)}
	for round := 0; round < 3; round++ {
		improved := false
		for dim := range 3 {
			for v := range sizes[dim] {
				ix := cur
				ix[dim] = v
				tp, ok, err := get(ix)
				if err != nil {
					return best, order, err
				}
				if ok && better(tp, best) {
					best, cur, improved = tp, ix, true
				}
			}
		}
		if !improved {
			break
		}
	}
	return best, order, nil
}

// TuneResult is the outcome of --tune.
type TuneResult struct {
	SLO       float64     `json:"slo_p99_ms"`
	Rate      int         `json:"rate_jobs_per_s"`
	Replicas  int         `json:"replicas"`
	Best      TunePoint   `json:"best"`
	Flags     string      `json:"serve_flags"`
	Evaluated []TunePoint `json:"evaluated"`
}

// ServeFlagsFor formats the recommended `jobq serve` flags.
func ServeFlagsFor(p TuneParams) string {
	return strings.Join([]string{"--batch-limit", strconv.Itoa(p.BatchLimit), "--poll-interval", p.PollInterval.String(),
		"--poll-jitter", fmtDur(p.PollJitter)}, " ")
}

// tune searches DefaultTuneSpace from jobq's defaults with 3 skiplocked
// replicas: throughput from a backlog point, p99 from an open-model run at
// TuneRate.
func (h *Harness) tune(ctx context.Context) (*TuneResult, error) {
	o := h.opts
	eval := func(ctx context.Context, p TuneParams) (float64, time.Duration, error) {
		spec := h.headline(StrategySkip, h.env.TableRows)
		spec.Group = "tune"
		spec.BatchLimit, spec.PollInterval, spec.PollJitter = p.BatchLimit, p.PollInterval, p.PollJitter
		h.step("tune " + p.String())
		pt, err := h.measureThroughput(ctx, spec)
		if err != nil {
			return 0, 0, err
		}
		lp, err := h.measureLatency(ctx, spec, o.TuneRate, min(o.LatencyDuration, 3*time.Second))
		if err != nil {
			return 0, 0, err
		}
		h.done()
		o.Logger.Info("bench tune", "candidate", p.String(), "throughput", fmt.Sprintf("%.0f", pt.Throughput), "pickup_p99_ms", lp.Pickup.P99)
		return pt.Throughput, time.Duration(lp.Pickup.P99 * float64(time.Millisecond)), nil
	}
	// Start at the defaults: batch 200, poll 1s, jitter 20%.
	best, all, err := Search(ctx, DefaultTuneSpace, [3]int{2, 3, 2}, o.SLO, tuneMaxEvals, eval)
	if err != nil {
		return nil, err
	}
	return &TuneResult{SLO: float64(o.SLO) / float64(time.Millisecond), Rate: o.TuneRate, Replicas: 3, Best: best,
		Flags: ServeFlagsFor(best.TuneParams), Evaluated: all}, nil
}

// WriteTune renders the tuning result.
func WriteTune(w io.Writer, t *TuneResult) {
	fmt.Fprintf(w, "## Tuning (pickup p99 ≤ %.0f ms at %d jobs/s, %d replicas skiplocked)\n\n", t.SLO, t.Rate, t.Replicas)
	fmt.Fprintf(w, "| candidate | jobs/s | pickup p99 | within SLO |\n|---|--:|--:|---|\n")
	for _, p := range t.Evaluated {
		fmt.Fprintf(w, "| %s | %.0f | %.2f ms | %v |\n", p.TuneParams, p.Throughput, p.P99, p.Feasible)
	}
	if t.Best.Feasible {
		fmt.Fprintf(w, "\nRecommended: `jobq serve %s` (%.0f jobs/s, pickup p99 %.2f ms)\n\n", t.Flags, t.Best.Throughput, t.Best.P99)
	} else {
		fmt.Fprintf(w, "\nNo candidate met the SLO; the lowest p99 was `jobq serve %s` (%.2f ms).\n\n", t.Flags, t.Best.P99)
	}
}
