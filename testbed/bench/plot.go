package bench

import (
	"fmt"
	"os"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
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
	if res.Tune != nil {
		if err := PlotTune(outPath(dir, "tune_candidates.png"), res.Tune); err != nil {
			return fmt.Errorf("plot tune: %w", err)
		}
	}
	return nil
}

// saveLegendOutside saves p as a PNG of w×h with its legend in a strip
// right of the axes, never over the data, and the axis ranges padded so
// that no point sits on (or is cut off at) an edge.
func saveLegendOutside(p *plot.Plot, w, h vg.Length, path string) error {
	padRange(&p.X)
	padRange(&p.Y)
	leg := p.Legend
	p.Legend = plot.NewLegend()
	leg.TextStyle.Font.Size = vg.Points(9)
	img := vgimg.New(w, h)
	dc := draw.New(img)
	// The strip is as wide as the legend's longest entry.
	lw := leg.Rectangle(dc).Size().X + vg.Points(16)
	w = max(w, lw+4*vg.Inch)
	if iw, _ := img.Size(); w > iw {
		img = vgimg.New(w, h)
		dc = draw.New(img)
	}
	p.Draw(draw.Crop(dc, 0, -lw, 0, 0))
	leg.Top, leg.Left = true, true
	leg.YOffs = -p.Title.TextStyle.Height(p.Title.Text) - vg.Points(10)
	leg.Draw(draw.Crop(dc, w-lw+vg.Points(8), 0, 0, 0))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// padRange widens an axis by 8 % on each side (a factor of 1.25 on a log
// axis) so that the extreme points are drawn whole, inside the frame.
func padRange(a *plot.Axis) {
	if a.Max <= a.Min {
		a.Min, a.Max = a.Min-1, a.Max+1
		return
	}
	if _, log := a.Scale.(plot.LogScale); log {
		a.Min, a.Max = a.Min/1.25, a.Max*1.25
		return
	}
	d := (a.Max - a.Min) * 0.08
	a.Min, a.Max = a.Min-d, a.Max+d
	if a.Min < 0 && a.Max > 0 && a.Min > -d*1.01 {
		a.Min = 0 // keep a zero baseline for non-negative data
	}
}

// PlotTune draws every tuning candidate: its median pickup p99 (x) against
// its median throughput (y), with the min–max of its rounds as error bars,
// one legend entry per candidate (defaults first), the SLO as a vertical
// line and the legend outside the data.
func PlotTune(path string, t *TuneResult) error {
	if len(t.Evaluated) == 0 {
		return nil
	}
	p := newPlot(fmt.Sprintf("Tuning candidates (%d replicas, %d jobs/s, %d rounds: median, min–max)", t.Replicas, t.Rate, t.Rounds),
		"pickup p99 (ms)", "throughput (jobs/s)", false)
	p.Y.Scale, p.Y.Tick.Marker = plot.LinearScale{}, plot.DefaultTicks{}
	for i, c := range t.Evaluated {
		tl, th := c.ThroughputSpread()
		pl, ph := c.P99Spread()
		pts := errPoints{{X: c.P99, Y: c.Throughput, xlo: c.P99 - pl, xhi: ph - c.P99, ylo: c.Throughput - tl, yhi: th - c.Throughput}}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Color = plotutil.Color(i)
		sc.GlyphStyle.Shape = plotutil.Shape(i)
		sc.GlyphStyle.Radius = vg.Points(4)
		xe, err := plotter.NewXErrorBars(pts)
		if err != nil {
			return err
		}
		ye, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return err
		}
		xe.Color, ye.Color = plotutil.Color(i), plotutil.Color(i)
		p.Add(xe, ye, sc)
		name := c.TuneParams.String()
		switch {
		case i == 0:
			name += " (defaults)"
		case t.Recommended && c.TuneParams == t.Best.TuneParams:
			name += " (recommended)"
		}
		p.Legend.Add(name, sc)
	}
	ymin, ymax := p.Y.Min, p.Y.Max
	slo, err := plotter.NewLine(plotter.XYs{{X: t.SLO, Y: ymin}, {X: t.SLO, Y: ymax}})
	if err != nil {
		return err
	}
	slo.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(slo)
	p.Legend.Add(fmt.Sprintf("SLO p99 %.0f ms", t.SLO), slo)
	p.X.Min = min(p.X.Min, 0)
	p.Title.Padding = vg.Points(8)
	return saveLegendOutside(p, 12*vg.Inch, 6*vg.Inch, path)
}

// errPoints are points with asymmetric error bars on both axes.
type errPoints []struct {
	X, Y               float64
	xlo, xhi, ylo, yhi float64
}

func (e errPoints) Len() int                        { return len(e) }
func (e errPoints) XY(i int) (float64, float64)     { return e[i].X, e[i].Y }
func (e errPoints) XError(i int) (float64, float64) { return e[i].xlo, e[i].xhi }
func (e errPoints) YError(i int) (float64, float64) { return e[i].ylo, e[i].yhi }

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
	return saveLegendOutside(p, 10*vg.Inch, 5*vg.Inch, path)
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
	return saveLegendOutside(p, 10*vg.Inch, 5*vg.Inch, path)
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
