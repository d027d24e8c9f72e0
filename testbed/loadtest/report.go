package loadtest

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// spectrumPercentiles are the rows of the percentile spectrum table.
var spectrumPercentiles = []float64{0, 50, 75, 90, 95, 99, 99.9, 99.99, 100}

// PrintSpectrum writes the run's summary and its HdrHistogram percentile
// spectrum: one row per percentile, one column per latency (submit,
// pickup, finish; ms), from the coordinated-omission-free histograms.
func PrintSpectrum(w io.Writer, r *Result) {
	fmt.Fprintf(w, "\n=== jobq loadtest: %s ===\n", r.Name)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "schedule\t%s over %d target(s), job_type %s\n", stagesString(r.Stages), len(r.Targets), r.JobType)
	fmt.Fprintf(tw, "requests\t%d sent, %d ok, %d errors (rate %.5f) %v\n", r.Requests, r.OK, r.Errors, r.ErrorRate, kinds(r.ErrorKinds))
	fmt.Fprintf(tw, "achieved rate\t%.1f submits/s (worst send lag behind schedule %s)\n", r.AchievedRate, fmtDur(r.SendLagMax))
	if r.Clock != nil {
		fmt.Fprintf(tw, "throughput\t%.1f jobs/s finished (drain after last submit %s)\n", r.Throughput, fmtDur(r.Drain))
		fmt.Fprintf(tw, "unstarted / unfinished\t%d / %d\n", r.Unstarted, r.Unfinished)
		fmt.Fprintf(tw, "clock offset (DB - local)\t%s ± %s, drift %s; create_time bounds [%s, %s] over %d jobs (agree: %v)\n",
			r.Clock.Offset, r.Clock.Uncertainty, r.Clock.Drift, r.Clock.BoundsLow, r.Clock.BoundsHigh, r.Clock.BoundsJobs, r.Clock.OffsetInBounds)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nlatency percentile spectrum (HdrHistogram, from intended send time; ms)")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	cols := []struct {
		name string
		h    *hdrhistogram.Histogram
	}{{"submit", r.hSubmit}, {"uncorrected", r.hRaw}, {"pickup", r.hPickup}, {"finish", r.hFinish}}
	fmt.Fprint(tw, "percentile\t")
	for _, c := range cols {
		if c.h.TotalCount() > 0 {
			fmt.Fprintf(tw, "%s\t", c.name)
		}
	}
	fmt.Fprintln(tw)
	for _, p := range spectrumPercentiles {
		label := fmtFloat(p)
		switch p {
		case 0:
			label = "min"
		case 100:
			label = "max"
		}
		fmt.Fprintf(tw, "%s\t", label)
		for _, c := range cols {
			if c.h.TotalCount() == 0 {
				continue
			}
			v := c.h.ValueAtQuantile(p)
			if p == 0 {
				v = c.h.Min()
			}
			fmt.Fprintf(tw, "%.3f\t", float64(v)/1000)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "count\t")
	for _, c := range cols {
		if c.h.TotalCount() > 0 {
			fmt.Fprintf(tw, "%d\t", c.h.TotalCount())
		}
	}
	fmt.Fprintln(tw)
	tw.Flush()
	fmt.Fprintln(w, "(uncorrected = vegeta's own latency from the actual send, shown only for contrast)")
	if len(r.Thresholds) > 0 {
		fmt.Fprintln(w, "\nthresholds")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, v := range r.Thresholds {
			mark := "ok  "
			if !v.Pass {
				mark = "FAIL"
			}
			fmt.Fprintf(tw, "  %s\t%s\tactual %s\n", mark, v.Threshold, v.Actual)
		}
		tw.Flush()
	}
}

func kinds(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func stagesString(st []Stage) string {
	s := ""
	for i, x := range st {
		if i > 0 {
			s += ","
		}
		s += x.String()
	}
	return s
}

// WriteJSON writes v as indented JSON to path, creating its directory.
func WriteJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WritePNG draws the run over time to path (PNG, 1000×750 px): on top the
// submit and pickup latency p50/p99 and the finish p99 per bucket (ms, log
// scale, by intended send time); below the target and achieved submit rate
// and the backlog.
func WritePNG(path string, r *Result) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	lat := plot.New()
	lat.Title.Text = fmt.Sprintf("jobq loadtest %s — latency percentiles over time (from intended send)", r.Name)
	lat.X.Label.Text = "time since start (s)"
	lat.Y.Label.Text = "latency (ms, log)"
	lat.Y.Scale = plot.LogScale{}
	lat.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	lat.Legend.Top = true
	lat.Legend.Left = false
	type series struct {
		name  string
		get   func(Point) time.Duration
		color color.RGBA
		dash  []vg.Length
	}
	blue, red, green := color.RGBA{31, 119, 180, 255}, color.RGBA{214, 39, 40, 255}, color.RGBA{44, 160, 44, 255}
	for _, s := range []series{
		{"submit p50", func(p Point) time.Duration { return p.SubmitP50 }, blue, []vg.Length{vg.Points(4), vg.Points(3)}},
		{"submit p99", func(p Point) time.Duration { return p.SubmitP99 }, blue, nil},
		{"pickup p50", func(p Point) time.Duration { return p.PickupP50 }, red, []vg.Length{vg.Points(4), vg.Points(3)}},
		{"pickup p99", func(p Point) time.Duration { return p.PickupP99 }, red, nil},
		{"finish p99", func(p Point) time.Duration { return p.FinishP99 }, green, nil},
	} {
		var xys plotter.XYs
		for _, p := range r.Series {
			if d := s.get(p); d > 0 {
				xys = append(xys, plotter.XY{X: p.T, Y: max(float64(d)/float64(time.Millisecond), 0.001)})
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color, l.Dashes, l.Width = s.color, s.dash, vg.Points(1.5)
		lat.Add(l)
		lat.Legend.Add(s.name, l)
	}
	lat.Add(plotter.NewGrid())

	rate := plot.New()
	rate.X.Label.Text = "time since start (s)"
	rate.Y.Label.Text = "submits/s · jobs"
	rate.Legend.Top = true
	rate.Legend.Left = true
	bucket := 1.0
	if len(r.Series) > 1 {
		bucket = r.Series[1].T - r.Series[0].T
	}
	var target, sent, backlog plotter.XYs
	for _, p := range r.Series {
		if p.T >= r.Duration.Seconds() {
			break
		}
		target = append(target, plotter.XY{X: p.T, Y: p.TargetRate})
		sent = append(sent, plotter.XY{X: p.T, Y: float64(p.Sent) / bucket})
		if p.Backlog >= 0 {
			backlog = append(backlog, plotter.XY{X: p.T, Y: float64(p.Backlog)})
		}
	}
	for _, s := range []struct {
		name string
		xys  plotter.XYs
		c    color.RGBA
	}{{"target rate", target, color.RGBA{127, 127, 127, 255}}, {"achieved rate", sent, blue}, {"backlog (WAITING)", backlog, red}} {
		if len(s.xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return err
		}
		l.Color, l.Width = s.c, vg.Points(1.5)
		rate.Add(l)
		rate.Legend.Add(s.name, l)
	}
	rate.Add(plotter.NewGrid())

	const w, h = 1000, 750
	img := vgimg.New(vg.Points(w*0.75), vg.Points(h*0.75))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4),
		PadRight: vg.Points(10), PadY: vg.Points(12)}
	plots := [][]*plot.Plot{{lat}, {rate}}
	canvases := plot.Align(plots, tiles, dc)
	lat.Draw(canvases[0][0])
	rate.Draw(canvases[1][0])
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
