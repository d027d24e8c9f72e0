package bench

import (
	"context"
	"testing"
	"time"
)

// synthetic is a deterministic evaluator: throughput grows with the batch
// limit, shorter polls and more jitter; p99 is batch/10 ms.
func synthetic(calls *map[TuneParams]int) Evaluator {
	return func(_ context.Context, p TuneParams) (float64, time.Duration, error) {
		(*calls)[p]++
		thr := float64(p.BatchLimit)*100 + float64(time.Second-p.PollInterval)/float64(time.Millisecond) + float64(p.PollJitter)/float64(time.Millisecond)
		return thr, time.Duration(p.BatchLimit) * time.Millisecond / 10, nil
	}
}

func TestSearchFindsBestWithinSLO(t *testing.T) {
	calls := map[TuneParams]int{}
	best, all, err := Search(context.Background(), DefaultTuneSpace, [3]int{2, 3, 2}, 50*time.Millisecond, 30, synthetic(&calls))
	if err != nil {
		t.Fatal(err)
	}
	want := TuneParams{BatchLimit: 500, PollInterval: 100 * time.Millisecond, PollJitter: 20 * time.Millisecond}
	if best.TuneParams != want || !best.Feasible {
		t.Errorf("best = %+v, want %+v feasible", best, want)
	}
	for p, n := range calls {
		if n != 1 {
			t.Errorf("%s evaluated %d times, want once", p, n)
		}
	}
	if len(all) != len(calls) {
		t.Errorf("%d evaluations reported, %d made", len(all), len(calls))
	}
	if got := ServeFlagsFor(best.TuneParams); got != "--batch-limit 500 --poll-interval 100ms --poll-jitter 20ms" {
		t.Errorf("flags = %q", got)
	}
}

func TestSearchRespectsBudgetAndInfeasibility(t *testing.T) {
	calls := map[TuneParams]int{}
	best, all, err := Search(context.Background(), DefaultTuneSpace, [3]int{2, 3, 2}, time.Millisecond, 4, synthetic(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Errorf("%d evaluations, want the budget of 4", len(all))
	}
	if best.Feasible || best.BatchLimit != 50 {
		t.Errorf("best = %+v, want the lowest p99 (batch 50), infeasible", best)
	}
}

func TestCompareBaseline(t *testing.T) {
	res := &Result{Points: []Point{
		pt("headline", StrategyCeiling, 0, 50, 50, 1000),
		pt("headline", StrategyClassic, 0, 200, 50, 100),
		pt("headline", StrategySkip, 0, 200, 50, 700),
	}, Idle: []IdlePoint{{Strategy: StrategySkip, QueriesPerSecond: 1.1}}}
	res.Points[2].StatementsPerJob = 0.5
	ApplyRatios(res)
	ok := Compare(res, Baseline{Metrics: map[string]float64{"skiplocked_vs_ceiling": 0.8, "skiplocked_vs_classic": 6,
		"skiplocked_statements_per_job": 0.45, "idle_queries_per_s": 1.0}}, 0.2)
	if !ok.OK {
		t.Errorf("within tolerance: %+v", ok.Rows)
	}
	bad := Compare(res, Baseline{Metrics: map[string]float64{"skiplocked_vs_ceiling": 1.0, "idle_queries_per_s": 0.5}}, 0.2)
	if bad.OK || bad.Rows[0].OK || bad.Rows[1].OK {
		t.Errorf("0.7 vs 1.0 and 1.1 vs 0.5 q/s must both fail at 20%%: %+v", bad.Rows)
	}
	res.Points[2].StatementsPerJob = -1 // --procs: not observable
	if c := Compare(res, Baseline{Metrics: map[string]float64{"skiplocked_statements_per_job": 0.45}}, 0.2); !c.OK || c.Rows[0].Observed {
		t.Errorf("an unobservable metric must not fail: %+v", c.Rows)
	}
	res.Points[2].StatementsPerJob = 0.5
	m := Measure(res)
	if m["skiplocked_vs_ceiling"] != 0.7 || m["idle_queries_per_s"] != 1.1 {
		t.Errorf("Measure = %v", m)
	}
}
