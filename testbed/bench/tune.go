package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/scheduler"
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

// TunePoint is an evaluated candidate. After RepeatRounds, Throughput and
// P99 are medians of every round, with their spread beside them.
type TunePoint struct {
	TuneParams
	Throughput float64 `json:"throughput_jobs_per_s"`
	P99        float64 `json:"pickup_p99_ms"`
	Feasible   bool    `json:"feasible"` // P99 ≤ SLO (after rounds: every round's)
	// ThroughputRounds and P99Rounds are every round's figures, in round
	// order (one per round; the search's own evaluation is round 1).
	ThroughputRounds []float64 `json:"throughput_rounds,omitempty"`
	P99Rounds        []float64 `json:"pickup_p99_rounds_ms,omitempty"`
}

// ThroughputSpread and P99Spread are the min and max over the rounds.
func (t TunePoint) ThroughputSpread() (lo, hi float64) {
	return spread(t.ThroughputRounds, t.Throughput)
}
func (t TunePoint) P99Spread() (lo, hi float64) { return spread(t.P99Rounds, t.P99) }

func spread(xs []float64, v float64) (lo, hi float64) {
	if len(xs) == 0 {
		return v, v
	}
	return slices.Min(xs), slices.Max(xs)
}

// IdleQueriesPerSecond is what an idle replica at p costs the database:
// one claim probe per poll interval plus one rescuer pass per rescue
// interval (the statements an idle replica sends; bench's idle point
// measures the same at the defaults).
func (p TuneParams) IdleQueriesPerSecond(rescue time.Duration) float64 {
	return float64(time.Second)/float64(p.PollInterval) + float64(time.Second)/float64(rescue)
}

// RepeatRounds re-measures every candidate rounds−1 more times,
// interleaved (each round passes over all of them, starting one further
// along, so drift on a shared machine hits every candidate alike), and sets
// each one's Throughput and P99 to the median of its rounds and Feasible
// to every round's P99 within slo.
func RepeatRounds(ctx context.Context, pts []TunePoint, rounds int, slo time.Duration, eval Evaluator) error {
	for i := range pts {
		if len(pts[i].ThroughputRounds) == 0 {
			pts[i].ThroughputRounds, pts[i].P99Rounds = []float64{pts[i].Throughput}, []float64{pts[i].P99}
		}
	}
	for r := 1; r < rounds; r++ {
		for k := range pts {
			i := (k + r) % len(pts)
			thr, p99, err := eval(ctx, pts[i].TuneParams)
			if err != nil {
				return fmt.Errorf("tune %s round %d: %w", pts[i].TuneParams, r+1, err)
			}
			pts[i].ThroughputRounds = append(pts[i].ThroughputRounds, thr)
			pts[i].P99Rounds = append(pts[i].P99Rounds, float64(p99)/float64(time.Millisecond))
		}
	}
	sloMs := float64(slo) / float64(time.Millisecond)
	for i := range pts {
		pts[i].Throughput, pts[i].P99 = median(slices.Clone(pts[i].ThroughputRounds)), median(slices.Clone(pts[i].P99Rounds))
		pts[i].Feasible = slices.Max(pts[i].P99Rounds) <= sloMs
	}
	return nil
}

// Recommend picks the recommendation among evaluated candidates (after
// RepeatRounds), pts[0] being the defaults: the feasible candidate with the
// highest median throughput, recommended only when its lowest round beats
// the defaults' highest (outside the spread) — or when the defaults miss
// the SLO in some round and it meets it in every one. ok is false when no
// candidate is outside the noise; why says which comparison decided.
func Recommend(pts []TunePoint) (best TunePoint, ok bool, why string) {
	if len(pts) == 0 {
		return TunePoint{}, false, "nothing measured"
	}
	def := pts[0]
	best = def
	for _, p := range pts[1:] {
		if better(p, best) {
			best = p
		}
	}
	if best.TuneParams == def.TuneParams {
		return best, false, "the defaults are the best candidate"
	}
	bLo, _ := best.ThroughputSpread()
	_, dHi := def.ThroughputSpread()
	switch {
	case !best.Feasible:
		return best, false, "no candidate met the SLO in every round"
	case !def.Feasible:
		return best, true, "the defaults missed the SLO in some round; this candidate met it in every round"
	case bLo > dHi:
		return best, true, fmt.Sprintf("its slowest round (%.0f jobs/s) beat the defaults' fastest (%.0f jobs/s)", bLo, dHi)
	}
	return best, false, fmt.Sprintf("its slowest round (%.0f jobs/s) is within the defaults' spread (up to %.0f jobs/s): the difference is noise", bLo, dHi)
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
	SLO      float64   `json:"slo_p99_ms"`
	Rate     int       `json:"rate_jobs_per_s"`
	Replicas int       `json:"replicas"`
	Rounds   int       `json:"rounds"`
	Best     TunePoint `json:"best"`
	// Recommended is false when no candidate beat the defaults outside the
	// spread of the rounds; Why says which comparison decided.
	Recommended bool   `json:"recommended"`
	Why         string `json:"why"`
	Flags       string `json:"serve_flags"`
	// RescueInterval is the replicas' rescue interval, for the idle cost.
	RescueInterval time.Duration `json:"rescue_interval_ns"`
	// Evaluated[0] is the defaults.
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
	// Start at the defaults: batch 500, poll 1s, jitter 20%
	// (scheduler.BatchLimitDefault, PollIntervalDefault, PollJitterDefault). The search
	// picks the candidates (one sample each: round 1); every candidate is
	// then measured again in interleaved rounds and judged on medians and
	// spreads.
	_, all, err := Search(ctx, DefaultTuneSpace, [3]int{3, 3, 2}, o.SLO, tuneMaxEvals, eval)
	if err != nil {
		return nil, err
	}
	if err := RepeatRounds(ctx, all, o.Rounds, o.SLO, eval); err != nil {
		return nil, err
	}
	best, ok, why := Recommend(all)
	// The bench replicas keep the scheduler's default rescue interval.
	rescue := scheduler.RescueIntervalDefault
	return &TuneResult{SLO: float64(o.SLO) / float64(time.Millisecond), Rate: o.TuneRate, Replicas: 3, Rounds: o.Rounds, Best: best,
		Recommended: ok, Why: why, Flags: ServeFlagsFor(best.TuneParams), RescueInterval: rescue, Evaluated: all}, nil
}

// WriteTune renders the tuning result: every candidate with the median
// and the min–max of its rounds, its idle cost, and a recommendation only
// when it is outside the noise.
func WriteTune(w io.Writer, t *TuneResult) {
	fmt.Fprintf(w, "## Tuning (pickup p99 ≤ %.0f ms at %d jobs/s, %d replicas skiplocked, %d interleaved rounds)\n\n", t.SLO, t.Rate, t.Replicas, t.Rounds)
	fmt.Fprintf(w, "| candidate | jobs/s median (min–max) | pickup p99 median (min–max) | within SLO every round | idle q/s per replica |\n|---|--:|--:|---|--:|\n")
	for i, p := range t.Evaluated {
		name := p.TuneParams.String()
		if i == 0 {
			name += " (defaults)"
		}
		tl, th := p.ThroughputSpread()
		pl, ph := p.P99Spread()
		fmt.Fprintf(w, "| %s | %.0f (%.0f–%.0f) | %.1f ms (%.1f–%.1f) | %v | %.2f |\n", name, p.Throughput, tl, th, p.P99, pl, ph, p.Feasible,
			p.IdleQueriesPerSecond(t.RescueInterval))
	}
	if len(t.Evaluated) == 0 {
		fmt.Fprintln(w)
		return
	}
	def := t.Evaluated[0]
	if t.Recommended {
		fmt.Fprintf(w, "\nRecommended: `jobq serve %s` — %.0f jobs/s, pickup p99 %.1f ms (medians), because %s. It costs %.2f idle queries/s per replica (defaults: %.2f).\n\n",
			t.Flags, t.Best.Throughput, t.Best.P99, t.Why, t.Best.IdleQueriesPerSecond(t.RescueInterval), def.IdleQueriesPerSecond(t.RescueInterval))
		return
	}
	fmt.Fprintf(w, "\nNo recommendation: keep the defaults. Best candidate `jobq serve %s` (%.0f jobs/s, p99 %.1f ms): %s.\n\n",
		ServeFlagsFor(t.Best.TuneParams), t.Best.Throughput, t.Best.P99, t.Why)
}
