package bench

import (
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlots writes throughput_vs_batch.png (throughput against batch limit
// per strategy, the ceiling included, 3 replicas, smallest table) and
// latency_vs_rate.png (pickup p50/p99 against arrival rate per strategy),
// when the run measured them.
func WritePlots(dir string, res *Result) error {
	if err := plotBatch(outPath(dir, "throughput_vs_batch.png"), res); err != nil {
		return fmt.Errorf("plot throughput: %w", err)
	}
	if err := plotLatency(outPath(dir, "latency_vs_rate.png"), res); err != nil {
		return fmt.Errorf("plot latency: %w", err)
	}
	return nil
}

// BatchSeries returns, per strategy, (batch limit, jobs/s) points of the
// batch sweep (workers ≥ batch limit, so the limit is what a claim takes),
// completed by the headline point where the sweep skipped it, sorted by
// batch limit, at the smallest table size with 3 replicas.
func BatchSeries(res *Result) map[string]plotter.XYs {
	small := pointsSmallest(res)
	out := map[string]plotter.XYs{}
	have := map[string]bool{}
	// The batch sweep first; a headline point only for a batch the sweep
	// skipped because it was the headline's configuration.
	for _, group := range []string{"batch", "headline"} {
		for _, p := range res.Points {
			key := fmt.Sprint(p.Strategy, p.BatchLimit)
			if p.Group != group || p.TableRows != small || p.Replicas != 3 || p.Strategy == StrategyCeilingQueue || have[key] {
				continue
			}
			have[key] = true
			out[p.Strategy] = append(out[p.Strategy], plotter.XY{X: float64(p.BatchLimit), Y: p.Throughput})
		}
	}
	for k := range out {
		slices.SortFunc(out[k], func(a, b plotter.XY) int { return int(a.X - b.X) })
	}
	return out
}

func plotBatch(path string, res *Result) error {
	series := BatchSeries(res)
	if len(series) == 0 {
		return nil
	}
	p := newPlot("Throughput vs batch limit (3 replicas, no-op jobs)", "batch limit (jobs per claim, log)", "jobs/s", true)
	var args []any
	for _, s := range []string{StrategyCeiling, StrategyClassic, StrategyCAS, StrategySkip} {
		if xy, ok := series[s]; ok {
			args = append(args, s, xy)
		}
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	p.Legend.Left = true // the lines rise to the right
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

func pointsSmallest(res *Result) int {
	small := -1
	for _, p := range res.Points {
		if small < 0 || p.TableRows < small {
			small = p.TableRows
		}
	}
	return max(small, 0)
}

func plotLatency(path string, res *Result) error {
	if len(res.Latency) == 0 {
		return nil
	}
	p := newPlot("Pickup latency vs arrival rate (open model, HTTP API, 3 replicas)", "arrival rate (jobs/s)", "pickup latency (ms, log)", false)
	var args []any
	for _, s := range []string{StrategyClassic, StrategyCAS, StrategySkip} {
		var p50, p99 plotter.XYs
		for _, l := range res.Latency {
			if l.Strategy == s {
				p50 = append(p50, plotter.XY{X: float64(l.Rate), Y: max(l.Pickup.P50, 0.01)})
				p99 = append(p99, plotter.XY{X: float64(l.Rate), Y: max(l.Pickup.P99, 0.01)})
			}
		}
		if len(p50) > 0 {
			args = append(args, s+" p50", p50, s+" p99", p99)
		}
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	p.Legend.Top = true
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// newPlot returns a plot with a title, axis labels and a log scale on X
// (logX) or Y.
func newPlot(title, x, y string, logX bool) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	ax := &p.Y
	if logX {
		ax = &p.X
	}
	ax.Scale = plot.LogScale{}
	ax.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	return p
}
