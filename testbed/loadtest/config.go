package loadtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults of Config.
const (
	// JobTypeDefault is the job type submitted: the built-in no-op, so the
	// numbers measure the scheduler, not a handler.
	JobTypeDefault = "noop"
	// WorkersDefault is how many vegeta workers start the attack.
	WorkersDefault = 10
	// MaxWorkersDefault caps concurrent in-flight submits (vegeta workers).
	// When every worker is busy the schedule still advances: the late
	// requests are charged from their intended send time.
	MaxWorkersDefault = 1000
	// TimeoutDefault is the per-request HTTP timeout.
	TimeoutDefault = 10 * time.Second
	// DrainTimeoutDefault is how long Run waits after the last submit for
	// every acknowledged job to finish.
	DrainTimeoutDefault = 60 * time.Second
	// BucketDefault is the width of one point of the over-time series.
	BucketDefault = time.Second
)

// Stage is one step of the open-model schedule: Rate submits per second,
// evenly spaced, for Duration. Stages run back to back; a ramp is a list of
// increasing stages.
type Stage struct {
	Rate     float64       `json:"rate"`     // submits per second (> 0)
	Duration time.Duration `json:"duration"` // how long the rate holds (> 0)
}

func (s Stage) String() string {
	return strconv.FormatFloat(s.Rate, 'f', -1, 64) + ":" + s.Duration.String()
}

// ParseStages parses "RATE:DURATION[,RATE:DURATION…]", e.g.
// "50:10s,100:10s,200:10s" (rate in submits per second).
func ParseStages(s string) ([]Stage, error) {
	var out []Stage
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		r, d, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("stage %q: want RATE:DURATION, e.g. 100:10s", part)
		}
		rate, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(r), "/s"), 64)
		if err != nil || rate <= 0 {
			return nil, fmt.Errorf("stage %q: rate must be a positive number of submits per second", part)
		}
		dur, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || dur <= 0 {
			return nil, fmt.Errorf("stage %q: duration must be a positive Go duration such as 10s", part)
		}
		out = append(out, Stage{Rate: rate, Duration: dur})
	}
	if len(out) == 0 {
		return nil, errors.New("stages: at least one RATE:DURATION is required")
	}
	return out, nil
}

// Config configures one load run (Run).
type Config struct {
	// Targets are the replicas' API base URLs (http://host:port); submits
	// go round-robin across them. Required.
	Targets []string
	// DSN names the jobq database, for reading back started_at/finished_at
	// (pickup and finish latencies), the backlog and the clock offset.
	// Empty measures submit latency only.
	DSN string
	// Stages is the arrival schedule. Required.
	Stages []Stage
	// JobType is the submitted job_type. Defaults to JobTypeDefault.
	JobType string
	// Params is the submitted params object. Defaults to {}.
	Params json.RawMessage
	// Workers is vegeta's initial worker count. Defaults to WorkersDefault.
	Workers uint64
	// MaxWorkers caps in-flight submits. Defaults to MaxWorkersDefault.
	MaxWorkers uint64
	// Timeout is the per-request HTTP timeout. Defaults to TimeoutDefault.
	Timeout time.Duration
	// DrainTimeout bounds the wait for acknowledged jobs to finish after
	// the last submit. Defaults to DrainTimeoutDefault.
	DrainTimeout time.Duration
	// Bucket is the width of one over-time point. Defaults to BucketDefault.
	Bucket time.Duration
	// KeyPrefix starts every job_key of this run. Defaults to
	// "lt-<unix-nanos>-"; it must be unique per run.
	KeyPrefix string
	// Name labels the run in reports (e.g. "ramp", "trial 200/s").
	Name string
	// ProgressFunc, when set, is called about once a second with live
	// numbers, and once more with Final set.
	ProgressFunc func(Progress)
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.JobType == "" {
		c.JobType = JobTypeDefault
	}
	if len(c.Params) == 0 {
		c.Params = json.RawMessage(`{}`)
	}
	if c.Workers == 0 {
		c.Workers = WorkersDefault
	}
	if c.MaxWorkers == 0 {
		c.MaxWorkers = MaxWorkersDefault
	}
	if c.Timeout <= 0 {
		c.Timeout = TimeoutDefault
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DrainTimeoutDefault
	}
	if c.Bucket <= 0 {
		c.Bucket = BucketDefault
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = fmt.Sprintf("lt-%d-", time.Now().UnixNano())
	}
	return c
}

// Validate reports what is wrong with user input.
func (c Config) Validate() error {
	if len(c.Targets) == 0 {
		return errors.New("targets: at least one replica URL is required")
	}
	for _, t := range c.Targets {
		if !strings.HasPrefix(t, "http://") && !strings.HasPrefix(t, "https://") {
			return fmt.Errorf("target %q: must start with http:// or https://", t)
		}
	}
	if len(c.Stages) == 0 {
		return errors.New("stages: at least one stage is required")
	}
	if !json.Valid(c.Params) || !strings.HasPrefix(strings.TrimSpace(string(c.Params)), "{") {
		return fmt.Errorf("params: must be a JSON object, got %s", c.Params)
	}
	if len(c.KeyPrefix) > 40 {
		return fmt.Errorf("key prefix: at most 40 characters (job_key is at most 64), got %d", len(c.KeyPrefix))
	}
	return nil
}
