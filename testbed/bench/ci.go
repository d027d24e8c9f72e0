package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Baseline is the committed bench/baseline.json: ratios from a reference
// run of `make bench-ci` (see WriteBaseline) that CI runs are compared with.
type Baseline struct {
	Note    string             `json:"note"`
	Metrics map[string]float64 `json:"metrics"`
}

// ciMetric is one compared figure; higher tells whether larger is better.
type ciMetric struct {
	name   string
	higher bool
	value  func(*Result) (float64, bool)
}

var ciMetrics = []ciMetric{
	{"skiplocked_vs_ceiling", true, func(r *Result) (float64, bool) {
		p, ok := findPoint(r, "headline", StrategySkip, pointsSmallest(r), 3)
		return p.VsCeiling, ok
	}},
	{"skiplocked_vs_classic", true, func(r *Result) (float64, bool) {
		p, ok := findPoint(r, "headline", StrategySkip, pointsSmallest(r), 3)
		return p.VsClassic, ok
	}},
	{"cas_vs_classic", true, func(r *Result) (float64, bool) {
		p, ok := findPoint(r, "headline", StrategyCAS, pointsSmallest(r), 3)
		return p.VsClassic, ok
	}},
	{"skiplocked_statements_per_job", false, func(r *Result) (float64, bool) {
		p, ok := findPoint(r, "headline", StrategySkip, pointsSmallest(r), 3)
		return p.StatementsPerJob, ok && p.StatementsPerJob >= 0 // -1 with --procs
	}},
	{"idle_queries_per_s", false, func(r *Result) (float64, bool) {
		for _, ip := range r.Idle {
			if ip.Strategy == StrategySkip {
				return ip.QueriesPerSecond, true
			}
		}
		return 0, false
	}},
}

// CIRow compares one metric.
type CIRow struct {
	Metric   string  `json:"metric"`
	Baseline float64 `json:"baseline"`
	Measured float64 `json:"measured"`
	// Ratio is Measured/Baseline; Limit the worst ratio allowed
	// (1−tolerance when higher is better, 1+tolerance otherwise).
	Ratio float64 `json:"ratio"`
	Limit float64 `json:"limit"`
	OK    bool    `json:"ok"`
	// Observed is false when this run cannot observe the metric (the
	// replicas' statements with --procs); such a row does not fail.
	Observed bool `json:"observed"`
}

// CIComparison is a CI run against the baseline.
type CIComparison struct {
	Baseline  string  `json:"baseline"`
	Tolerance float64 `json:"tolerance"`
	Rows      []CIRow `json:"rows"`
	OK        bool    `json:"ok"`
	Wrote     bool    `json:"wrote_baseline"`
}

// Compare checks res against b within tolerance.
func Compare(res *Result, b Baseline, tolerance float64) *CIComparison {
	c := &CIComparison{Tolerance: tolerance, OK: true}
	for _, m := range ciMetrics {
		base, ok := b.Metrics[m.name]
		if !ok {
			continue
		}
		v, measured := m.value(res)
		row := CIRow{Metric: m.name, Baseline: base, Measured: v, Ratio: Ratio(v, base), Observed: measured}
		if m.higher {
			row.Limit = 1 - tolerance
			row.OK = !measured || row.Ratio >= row.Limit
		} else {
			row.Limit = 1 + tolerance
			row.OK = !measured || base <= 0 || row.Ratio <= row.Limit
		}
		c.OK = c.OK && row.OK
		c.Rows = append(c.Rows, row)
	}
	return c
}

// Measure extracts the compared metrics of res (for --write-baseline).
func Measure(res *Result) map[string]float64 {
	out := map[string]float64{}
	for _, m := range ciMetrics {
		if v, ok := m.value(res); ok {
			out[m.name] = v
		}
	}
	return out
}

func (h *Harness) compareBaseline(res *Result) (*CIComparison, error) {
	o := h.opts
	if o.WriteBaseline {
		b := Baseline{Note: fmt.Sprintf("written by `jobq bench --ci --write-baseline` on %s (%s, %d CPUs); ratios, not absolute speeds",
			res.Started.Format("2006-01-02"), res.Server, res.CPUs), Metrics: Measure(res)}
		data, err := json.MarshalIndent(b, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(o.Baseline, append(data, '\n'), 0o644); err != nil {
			return nil, err
		}
		return &CIComparison{Baseline: o.Baseline, Tolerance: o.Tolerance, OK: true, Wrote: true}, nil
	}
	data, err := os.ReadFile(o.Baseline)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w (write one with --write-baseline)", err)
	}
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("baseline %s: %w", o.Baseline, err)
	}
	c := Compare(res, b, o.Tolerance)
	c.Baseline = o.Baseline
	return c, nil
}

// WriteCI renders the comparison.
func WriteCI(w io.Writer, c *CIComparison) {
	if c.Wrote {
		fmt.Fprintf(w, "## CI baseline\n\nWrote %s.\n\n", c.Baseline)
		return
	}
	fmt.Fprintf(w, "## CI comparison with %s (tolerance %.0f%%)\n\n| metric | baseline | measured | ratio | limit | ok |\n|---|--:|--:|--:|--:|---|\n",
		c.Baseline, c.Tolerance*100)
	for _, r := range c.Rows {
		ok := fmt.Sprint(r.OK)
		if !r.Observed {
			ok = "not observable in this mode"
		}
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %.2f | %.2f | %s |\n", r.Metric, r.Baseline, r.Measured, r.Ratio, r.Limit, ok)
	}
	fmt.Fprintln(w)
}
