package main

import (
	"time"

	"github.com/jobq/jobq/metrics"
)

// MetricsFlags configure the replica's /metrics.
type MetricsFlags struct {
	MetricsBacklogInterval   time.Duration `help:"How often /metrics' backlog sampler counts SCHEDULED, WAITING and RUNNING jobs with one statement (negative: never)." default:"15s" env:"JOBQ_METRICS_BACKLOG_INTERVAL" group:"API"`
	MetricsBacklogCountLimit int           `help:"Most jobs of one status a backlog sample reads; the counts stop there, so an idle replica's cost does not grow with parked jobs." default:"1000" env:"JOBQ_METRICS_BACKLOG_COUNT_LIMIT" group:"API"`
}

// MetricsOptions maps the flags to metrics.Options.
func (f MetricsFlags) MetricsOptions() metrics.Options {
	return metrics.Options{BacklogInterval: f.MetricsBacklogInterval, BacklogCountLimit: f.MetricsBacklogCountLimit}
}
