package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"
)

// Defaults of CapacityConfig.
const (
	CapacityStartRateDefault  = 50.0
	CapacityMaxRateDefault    = 5000.0
	CapacityTrialDefault      = 10 * time.Second
	CapacityResolutionDefault = 0.1
	CapacityMaxTrialsDefault  = 10
)

// CapacityConfig configures the capacity search: constant-rate trials,
// doubling from StartRate until one fails its thresholds (or MaxRate
// passes), then bisecting between the highest pass and the lowest failure
// until they are within Resolution of each other.
type CapacityConfig struct {
	// StartRate is the first trial's rate, submits/s. Defaults to 50.
	StartRate float64
	// MaxRate is the highest rate tried, submits/s. Defaults to 5000.
	MaxRate float64
	// TrialDuration is each trial's length. Defaults to 10s.
	TrialDuration time.Duration
	// Resolution stops the bisection once (high-low)/low ≤ Resolution.
	// Defaults to 0.1 (10 %).
	Resolution float64
	// MaxTrials caps the number of trials. Defaults to 10.
	MaxTrials int
}

// WithDefaults fills zero fields.
func (c CapacityConfig) WithDefaults() CapacityConfig {
	if c.StartRate <= 0 {
		c.StartRate = CapacityStartRateDefault
	}
	if c.MaxRate <= 0 {
		c.MaxRate = CapacityMaxRateDefault
	}
	if c.TrialDuration <= 0 {
		c.TrialDuration = CapacityTrialDefault
	}
	if c.Resolution <= 0 {
		c.Resolution = CapacityResolutionDefault
	}
	if c.MaxTrials <= 0 {
		c.MaxTrials = CapacityMaxTrialsDefault
	}
	return c
}

// Trial is one constant-rate run of the capacity search.
type Trial struct {
	Rate         float64       `json:"rate"` // target submits/s
	Pass         bool          `json:"pass"`
	Failed       []string      `json:"failed,omitempty"` // thresholds that failed, with actual values
	AchievedRate float64       `json:"achieved_rate"`
	Throughput   float64       `json:"throughput"`
	ErrorRate    float64       `json:"error_rate"`
	SubmitP99    time.Duration `json:"submit_p99_ns"`
	PickupP99    time.Duration `json:"pickup_p99_ns"`
	Unfinished   int           `json:"unfinished"`
}

// Capacity is the search's answer: Rate is the highest trial rate whose
// thresholds held (0 when none did); the true capacity lies in [Rate,
// High) where High is the lowest failing rate (0 when none failed).
type Capacity struct {
	Rate          float64       `json:"rate"`
	High          float64       `json:"high"`
	Thresholds    []string      `json:"thresholds"`
	TrialDuration time.Duration `json:"trial_duration_ns"`
	Trials        []Trial       `json:"trials"`
}

// SearchCapacity searches for the highest constant arrival rate at which
// every threshold holds, running one Run per trial with base's targets,
// DSN and job type. Thresholds are required.
func SearchCapacity(ctx context.Context, base Config, thresholds []Threshold, cc CapacityConfig) (*Capacity, error) {
	if len(thresholds) == 0 {
		return nil, errors.New("capacity search: at least one threshold is required (--threshold)")
	}
	cc = cc.WithDefaults()
	trial := func(ctx context.Context, rate float64) (Trial, error) {
		cfg := base
		cfg.Stages = []Stage{{Rate: rate, Duration: cc.TrialDuration}}
		cfg.Name = fmt.Sprintf("capacity trial %s/s", fmtFloat(rate))
		cfg.KeyPrefix = fmt.Sprintf("ltc-%d-", time.Now().UnixNano())
		r, err := Run(ctx, cfg, thresholds)
		if err != nil && !errors.Is(err, ErrNoAcks) {
			return Trial{}, err
		}
		t := Trial{Rate: rate, Pass: err == nil && r.Pass, AchievedRate: r.AchievedRate, Throughput: r.Throughput,
			ErrorRate: r.ErrorRate, SubmitP99: r.Submit.P["p99"], PickupP99: r.Pickup.P["p99"], Unfinished: r.Unfinished}
		for _, v := range r.Thresholds {
			if !v.Pass {
				t.Failed = append(t.Failed, v.Threshold+" (actual "+v.Actual+")")
			}
		}
		if err != nil {
			t.Failed = append(t.Failed, err.Error())
		}
		return t, nil
	}
	c, err := searchRates(ctx, cc, trial)
	if c != nil {
		for _, t := range thresholds {
			c.Thresholds = append(c.Thresholds, t.Expr)
		}
	}
	return c, err
}

// searchRates is the search itself, over any trial function.
func searchRates(ctx context.Context, cc CapacityConfig, trial func(context.Context, float64) (Trial, error)) (*Capacity, error) {
	c := &Capacity{TrialDuration: cc.TrialDuration}
	lo, hi := 0.0, math.Inf(1)
	run := func(rate float64) error {
		t, err := trial(ctx, rate)
		if err != nil {
			return err
		}
		c.Trials = append(c.Trials, t)
		if t.Pass {
			lo = max(lo, rate)
		} else {
			hi = min(hi, rate)
		}
		return nil
	}
	// Grow: double until a failure or MaxRate passes.
	for rate := cc.StartRate; len(c.Trials) < cc.MaxTrials && math.IsInf(hi, 1); rate = min(rate*2, cc.MaxRate) {
		if err := run(rate); err != nil {
			return c, err
		}
		if lo >= cc.MaxRate {
			break
		}
	}
	// Bisect between the highest pass and the lowest failure.
	for len(c.Trials) < cc.MaxTrials && !math.IsInf(hi, 1) {
		if lo > 0 && (hi-lo)/lo <= cc.Resolution {
			break
		}
		mid := math.Round((lo + hi) / 2)
		if mid <= lo || mid >= hi {
			break
		}
		if err := run(mid); err != nil {
			return c, err
		}
	}
	c.Rate = lo
	if !math.IsInf(hi, 1) {
		c.High = hi
	}
	return c, nil
}

// PrintCapacity writes the trial table and the answer.
func PrintCapacity(w io.Writer, c *Capacity) {
	fmt.Fprintf(w, "\n=== capacity search (%s trials; thresholds %v) ===\n", c.TrialDuration, c.Thresholds)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "rate/s\tresult\tachieved/s\tjobs/s\terrors\tsubmit p99\tpickup p99\tfailed")
	for _, t := range c.Trials {
		res := "pass"
		if !t.Pass {
			res = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%.4f\t%s\t%s\t%v\n", fmtFloat(t.Rate), res, t.AchievedRate, t.Throughput,
			t.ErrorRate, fmtDur(t.SubmitP99), fmtDur(t.PickupP99), t.Failed)
	}
	tw.Flush()
	switch {
	case c.Rate == 0:
		fmt.Fprintf(w, "capacity: no trial rate held the thresholds (lowest failing: %s/s)\n", fmtFloat(c.High))
	case c.High == 0:
		fmt.Fprintf(w, "capacity: ≥ %s submits/s (the highest rate tried held the thresholds)\n", fmtFloat(c.Rate))
	default:
		fmt.Fprintf(w, "capacity: %s submits/s (highest rate whose thresholds held; %s/s failed)\n", fmtFloat(c.Rate), fmtFloat(c.High))
	}
}
