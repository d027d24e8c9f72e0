// Package loadtest is `jobq loadtest` / `make loadtest`: open-model
// (constant arrival rate, in stages) load of job submits through jobq's
// HTTP API, spread round-robin over the replicas, with latencies measured
// from each request's intended send time — no coordinated omission.
//
// The HTTP engine is vegeta's attacker, paced by this package's schedule
// (submit n is due at a fixed offset whatever happened before it). vegeta
// measures latency from the actual send (Result.Timestamp), which hides a
// stall once its workers are all blocked; so every latency here is taken
// from the schedule instead: submit = intended send → response read, where
// the intended send of the request with sequence number n is t0 +
// schedule.At(n) and t0 is read immediately before vegeta's own start.
//
// With a DSN the jobs are read back after the run: pickup = intended send
// → first claim (job_execution.started_at, attempt 1) and finish =
// intended send → job_queue.finished_at. Those times are on the database
// clock; ClockReport documents how they are mapped to the local clock.
//
// Every latency goes into an HdrHistogram (1 µs – 1 h, 3 significant
// digits). Thresholds in k6's spirit (pickup.p99<50ms, errors.rate<0.001)
// decide pass/fail; the capacity search looks for the highest rate that
// passes. Output: a percentile spectrum table, loadtest.json and
// loadtest.png (latency percentiles over time).
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// OutDirDefault is where Main writes loadtest.json and loadtest.png.
const OutDirDefault = "out/loadtest"

// ErrThresholds is returned by Main when a threshold failed.
var ErrThresholds = errors.New("loadtest: thresholds failed")

// Options configure Main: one staged run and, optionally, a capacity search.
type Options struct {
	// Config is the run. Without Targets, Main provisions a database and
	// Provision.Replicas `jobq serve` processes and fills Targets and DSN.
	Config
	// Provision configures self-provisioning (used when Targets is empty).
	Provision ProvisionConfig
	// Thresholds are expressions (see Threshold); a failure makes Main
	// return ErrThresholds.
	Thresholds []string
	// Capacity runs the capacity search after the staged run.
	Capacity bool
	// CapacityThresholds are what a capacity trial must hold. Defaults to
	// Thresholds.
	CapacityThresholds []string
	// CapacityConfig configures the search.
	CapacityConfig CapacityConfig
	// OutDir receives loadtest.json and loadtest.png. Defaults to OutDirDefault.
	OutDir string
	// Out receives the tables. Defaults to os.Stdout.
	Out io.Writer
	// Log receives live progress and notes. Defaults to os.Stderr.
	Log io.Writer
}

// Report is loadtest.json: the staged run and the capacity search.
type Report struct {
	Run      *Result   `json:"run"`
	Capacity *Capacity `json:"capacity,omitempty"`
}

// Main runs the load test end to end: provision (if needed), the staged
// run with live progress, the spectrum table, loadtest.json and
// loadtest.png, then the capacity search if asked. It returns
// ErrThresholds (wrapped) when any threshold of the staged run failed.
func Main(ctx context.Context, opts Options) error {
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	if opts.OutDir == "" {
		opts.OutDir = OutDirDefault
	}
	th, err := ParseThresholds(opts.Thresholds)
	if err != nil {
		return err
	}
	capTh := th
	if len(opts.CapacityThresholds) > 0 {
		if capTh, err = ParseThresholds(opts.CapacityThresholds); err != nil {
			return err
		}
	}
	if opts.Capacity && len(capTh) == 0 {
		return errors.New("--capacity: at least one --threshold (or --capacity-threshold) is required to decide what a rate must hold")
	}
	cfg := opts.Config
	if len(cfg.Targets) == 0 {
		if opts.Provision.Log == nil {
			opts.Provision.Log = opts.Log
		}
		cl, err := Provision(ctx, opts.Provision)
		if err != nil {
			return err
		}
		defer cl.Close()
		cfg.Targets, cfg.DSN = cl.Targets, cl.DSN
	}
	if cfg.Name == "" {
		cfg.Name = "stages " + stagesString(cfg.Stages)
	}
	if cfg.ProgressFunc == nil {
		cfg.ProgressFunc = NewProgressPrinter(opts.Log)
	}
	if cfg.DSN == "" {
		fmt.Fprintln(opts.Log, "no DSN: measuring submit latency only (give --dsn or JOBQ_DSN for pickup, finish and backlog)")
	}
	r, err := Run(ctx, cfg, th)
	if err != nil {
		return err
	}
	PrintSpectrum(opts.Out, r)
	rep := &Report{Run: r}
	jsonPath, pngPath := filepath.Join(opts.OutDir, "loadtest.json"), filepath.Join(opts.OutDir, "loadtest.png")
	if err := WriteJSON(jsonPath, rep); err != nil {
		return err
	}
	if err := WritePNG(pngPath, r); err != nil {
		return err
	}
	fmt.Fprintf(opts.Out, "\nwrote %s and %s\n", jsonPath, pngPath)
	if opts.Capacity {
		base := cfg
		base.KeyPrefix = ""
		c, err := SearchCapacity(ctx, base, capTh, opts.CapacityConfig)
		if c != nil {
			PrintCapacity(opts.Out, c)
			rep.Capacity = c
			if werr := WriteJSON(jsonPath, rep); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
	if !r.Pass {
		var failed []string
		for _, v := range r.Thresholds {
			if !v.Pass {
				failed = append(failed, v.Threshold+" (actual "+v.Actual+")")
			}
		}
		return fmt.Errorf("%w: %v", ErrThresholds, failed)
	}
	return nil
}

// NewProgressPrinter returns a ProgressFunc writing to w: a progress bar
// when w is a terminal, else one line every 5 s (and at each phase end).
func NewProgressPrinter(w io.Writer) func(Progress) {
	f, isFile := w.(*os.File)
	tty := isFile && term.IsTerminal(int(f.Fd()))
	var bar *progressbar.ProgressBar
	var lastLine time.Time
	var name string
	return func(p Progress) {
		if p.Name != name {
			if bar != nil {
				_ = bar.Finish()
			}
			name, bar, lastLine = p.Name, nil, time.Time{}
		}
		desc := fmt.Sprintf("%s %-5s rate %6.1f/s (target %.0f/s)  errors %d  backlog %s", p.Name, p.Phase, p.Rate, p.Target,
			p.Errors, backlogString(p.Backlog))
		if p.Phase == "drain" {
			desc = fmt.Sprintf("%s drain: waiting for jobs to finish  errors %d  backlog %s", p.Name, p.Errors, backlogString(p.Backlog))
		}
		if tty {
			if bar == nil {
				bar = progressbar.NewOptions64(int64(p.Total), progressbar.OptionSetWriter(w), progressbar.OptionShowCount(),
					progressbar.OptionSetWidth(20), progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
			}
			bar.Describe(desc)
			_ = bar.Set64(int64(p.Done))
			if p.Phase == "drain" && p.Backlog == 0 {
				_ = bar.Finish()
			}
			return
		}
		if time.Since(lastLine) >= 5*time.Second {
			lastLine = time.Now()
			fmt.Fprintf(w, "[%5.1fs] %s  done %d/%d\n", p.Elapsed.Seconds(), desc, p.Done, p.Total)
		}
	}
}

func backlogString(n int64) string {
	if n < 0 {
		return "n/a"
	}
	return fmt.Sprint(n)
}
