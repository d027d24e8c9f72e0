package main

import (
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jobq/jobq/testbed/loadtest"
)

// LoadtestCmd is `jobq loadtest`: open-model submit load with
// coordinated-omission-free percentiles, thresholds and a capacity search.
type LoadtestCmd struct {
	Target       []string      `help:"Replica API base URL (repeatable or comma-separated). None: provision a database and --replicas jobq serve processes." sep:","`
	DSN          string        `help:"With --target: the jobq database's DSN, for pickup/finish latencies and the backlog (default $JOBQ_DSN). Without --target: a server-level DSN to provision on, e.g. root@tcp(127.0.0.1:3306)/; without it: $JOBQ_DSN, else a Docker engine (mysql:8.4 through testcontainers), else a throwaway local mariadbd/mysqld." placeholder:"DSN"`
	Replicas     int           `help:"jobq serve processes to start when self-provisioning." default:"3"`
	ServeArg     []string      `help:"Extra flag for every provisioned jobq serve (repeatable), e.g. --serve-arg=--workers=100." name:"serve-arg" sep:"none"`
	Rate         float64       `help:"Constant arrival rate, submits/s (with --duration; ignored when --stages is set)." default:"100"`
	Duration     time.Duration `help:"How long --rate holds." default:"10s"`
	Stages       string        `help:"Stages RATE:DURATION,… run back to back, e.g. 50:10s,100:10s,200:10s (a ramp)."`
	JobType      string        `help:"job_type to submit." default:"noop"`
	Params       string        `help:"params JSON object to submit." default:"{}"`
	Threshold    []string      `help:"Pass/fail criterion METRIC.STAT OP VALUE (repeatable), e.g. 'pickup.p99<50ms', 'errors.rate<0.001'. Any failure exits non-zero." sep:"none"`
	MaxWorkers   uint64        `help:"Most submits in flight at once (late sends are still charged from their intended time)." default:"1000"`
	Timeout      time.Duration `help:"Per-request HTTP timeout." default:"10s"`
	Drain        time.Duration `help:"How long to wait after the last submit for every job to finish." default:"60s"`
	Capacity     bool          `help:"After the run, search for the highest constant rate whose thresholds hold."`
	CapThreshold []string      `help:"Capacity search: what a trial rate must hold (repeatable). Defaults to --threshold." name:"capacity-threshold" sep:"none"`
	CapStart     float64       `help:"Capacity search: first trial rate, submits/s." default:"50" name:"capacity-start"`
	CapMax       float64       `help:"Capacity search: highest rate tried, submits/s." default:"5000" name:"capacity-max"`
	CapTrial     time.Duration `help:"Capacity search: length of each trial." default:"10s" name:"capacity-trial"`
	CapTrials    int           `help:"Capacity search: most trials." default:"10" name:"capacity-trials"`
	CapRes       float64       `help:"Capacity search: stop when (fail-pass)/pass ≤ this." default:"0.1" name:"capacity-resolution"`
	Out          string        `help:"Output directory for loadtest.json and loadtest.png." default:"out/loadtest" type:"path"`
	Keep         bool          `help:"Keep the provisioned database (and print its DSN)."`
	NoProgress   bool          `help:"No progress bar: a status line every 5 s instead (the bar is drawn only when stderr is a terminal)."`
}

// Run runs the load test; it fails when any threshold fails.
func (c *LoadtestCmd) Run(g *Globals) error {
	stages := []loadtest.Stage{{Rate: c.Rate, Duration: c.Duration}}
	if c.Stages != "" {
		var err error
		if stages, err = loadtest.ParseStages(c.Stages); err != nil {
			return err
		}
	}
	var targets []string
	for _, t := range c.Target {
		if t = strings.TrimSpace(t); t != "" {
			targets = append(targets, t)
		}
	}
	dsn, provisionDSN := c.DSN, c.DSN
	if len(targets) == 0 {
		dsn = "" // the provisioned database is used
	} else if dsn == "" {
		dsn = os.Getenv("JOBQ_DSN")
	}
	cfg := loadtest.Config{Targets: targets, DSN: dsn, Stages: stages, JobType: c.JobType,
		Params: json.RawMessage(c.Params), MaxWorkers: c.MaxWorkers, Timeout: c.Timeout, DrainTimeout: c.Drain}
	if c.NoProgress {
		cfg.ProgressFunc = loadtest.NewProgressPrinter(struct{ io.Writer }{os.Stderr}) // not a terminal: lines
	}
	return loadtest.Main(g.Ctx, loadtest.Options{
		Config:             cfg,
		Provision:          loadtest.ProvisionConfig{Replicas: c.Replicas, ServeArgs: c.ServeArg, Keep: c.Keep, DSN: provisionDSN},
		Thresholds:         c.Threshold,
		Capacity:           c.Capacity,
		CapacityThresholds: c.CapThreshold,
		CapacityConfig: loadtest.CapacityConfig{StartRate: c.CapStart, MaxRate: c.CapMax, TrialDuration: c.CapTrial,
			Resolution: c.CapRes, MaxTrials: c.CapTrials},
		OutDir: c.Out,
	})
}
