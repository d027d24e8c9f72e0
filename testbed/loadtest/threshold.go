package loadtest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Threshold is one pass/fail criterion in k6's spirit, written
// METRIC.STAT OP VALUE:
//
//	pickup.p99<50ms   submit.p99.9<=200ms   finish.max<2s   pickup.mean<20ms
//	errors.rate<0.001 errors.count==0       unstarted.count==0
//
// Latency metrics are submit, pickup and finish (see Result) with stats
// pNN[.N] (any percentile), min, mean, max; their VALUE is a Go duration
// (ms, s, us/µs). errors has rate (fraction of requests, 0–1) and count;
// unstarted and unfinished have count. OP is one of < <= > >= ==.
type Threshold struct {
	Expr   string  // as written
	Metric string  // submit, pickup, finish, errors, unstarted, unfinished
	Stat   string  // p99, p99.9, min, mean, max, rate, count
	Op     string  // <, <=, >, >=, ==
	Value  float64 // nanoseconds for latencies, else the plain number
}

// Verdict is one threshold's outcome.
type Verdict struct {
	Threshold string  `json:"threshold"`
	Actual    string  `json:"actual"` // human form, e.g. "41.2ms"
	Value     float64 `json:"value"`  // nanoseconds for latencies
	Pass      bool    `json:"pass"`
}

var thresholdRe = regexp.MustCompile(`^\s*([a-z]+)\.([a-z]+[0-9.]*)\s*(<=|>=|==|<|>)\s*(\S+)\s*$`)

var latencyMetrics = map[string]bool{"submit": true, "pickup": true, "finish": true}

// ParseThreshold parses one threshold expression.
func ParseThreshold(s string) (Threshold, error) {
	m := thresholdRe.FindStringSubmatch(s)
	if m == nil {
		return Threshold{}, fmt.Errorf("threshold %q: want METRIC.STAT OP VALUE, e.g. pickup.p99<50ms or errors.rate<0.001", s)
	}
	t := Threshold{Expr: strings.TrimSpace(s), Metric: m[1], Stat: m[2], Op: m[3]}
	switch {
	case latencyMetrics[t.Metric]:
		if !validLatencyStat(t.Stat) {
			return t, fmt.Errorf("threshold %q: %s has stats pNN[.N], min, mean, max; got %q", s, t.Metric, t.Stat)
		}
		d, err := time.ParseDuration(strings.ReplaceAll(m[4], "µ", "u"))
		if err != nil {
			return t, fmt.Errorf("threshold %q: value must be a duration such as 50ms: %v", s, err)
		}
		t.Value = float64(d)
	case t.Metric == "errors" || t.Metric == "unstarted" || t.Metric == "unfinished":
		if t.Stat != "count" && !(t.Metric == "errors" && t.Stat == "rate") {
			return t, fmt.Errorf("threshold %q: %s has stat count%s; got %q", s, t.Metric,
				map[bool]string{true: " or rate", false: ""}[t.Metric == "errors"], t.Stat)
		}
		v, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			return t, fmt.Errorf("threshold %q: value must be a number: %v", s, err)
		}
		t.Value = v
	default:
		return t, fmt.Errorf("threshold %q: unknown metric %q (submit, pickup, finish, errors, unstarted, unfinished)", s, t.Metric)
	}
	return t, nil
}

// ParseThresholds parses every expression.
func ParseThresholds(exprs []string) ([]Threshold, error) {
	out := make([]Threshold, 0, len(exprs))
	for _, e := range exprs {
		t, err := ParseThreshold(e)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func validLatencyStat(s string) bool {
	switch s {
	case "min", "mean", "max":
		return true
	}
	p, ok := percentileOf(s)
	return ok && p > 0 && p <= 100
}

func percentileOf(stat string) (float64, bool) {
	if !strings.HasPrefix(stat, "p") {
		return 0, false
	}
	p, err := strconv.ParseFloat(stat[1:], 64)
	return p, err == nil
}

// NeedsDB reports whether the metric is read from job rows.
func (t Threshold) NeedsDB() bool { return t.Metric != "submit" && t.Metric != "errors" }

// Eval evaluates the threshold on r.
func (t Threshold) Eval(r *Result) Verdict {
	v := Verdict{Threshold: t.Expr}
	if latencyMetrics[t.Metric] {
		sub, pick, fin := r.Histograms()
		hh := map[string]*hdrhistogram.Histogram{"submit": sub, "pickup": pick, "finish": fin}[t.Metric]
		if hh.TotalCount() == 0 {
			v.Actual = "no data"
			return v
		}
		var us float64
		switch t.Stat {
		case "min":
			us = float64(hh.Min())
		case "max":
			us = float64(hh.Max())
		case "mean":
			us = hh.Mean()
		default:
			p, _ := percentileOf(t.Stat)
			us = float64(hh.ValueAtQuantile(p))
		}
		v.Value = us * float64(time.Microsecond)
		v.Actual = fmtDur(time.Duration(v.Value))
	} else {
		switch t.Metric + "." + t.Stat {
		case "errors.rate":
			v.Value = r.ErrorRate
		case "errors.count":
			v.Value = float64(r.Errors)
		case "unstarted.count":
			v.Value = float64(r.Unstarted)
		case "unfinished.count":
			v.Value = float64(r.Unfinished)
		}
		v.Actual = fmtFloat(v.Value)
	}
	switch t.Op {
	case "<":
		v.Pass = v.Value < t.Value
	case "<=":
		v.Pass = v.Value <= t.Value
	case ">":
		v.Pass = v.Value > t.Value
	case ">=":
		v.Pass = v.Value >= t.Value
	case "==":
		v.Pass = v.Value == t.Value
	}
	return v
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// fmtDur prints a latency with 3 significant figures in ms (or s ≥ 10 s).
func fmtDur(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms >= 10000:
		return strconv.FormatFloat(ms/1000, 'f', 1, 64) + "s"
	case ms >= 100:
		return strconv.FormatFloat(ms, 'f', 0, 64) + "ms"
	case ms >= 10:
		return strconv.FormatFloat(ms, 'f', 1, 64) + "ms"
	default:
		return strconv.FormatFloat(ms, 'f', 2, 64) + "ms"
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
