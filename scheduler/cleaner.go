package scheduler

import (
	"context"
	"log/slog"
	"time"

	"github.com/jobq/jobq"
)

// cleanerStore is what the cleaner needs from the store.
type cleanerStore interface {
	JobPurge(ctx context.Context, p jobq.PurgeParams) (jobq.PurgeResult, error)
}

// cleanerParams configures the cleaner (OpsConfig's retention settings).
type cleanerParams struct {
	Store      cleanerStore
	Retention  time.Duration // > 0
	Interval   time.Duration // ±10% jitter
	Batch      int
	MaxPerPass int
	Events     emitter // EventCleaned
	Retry      dbRetrier
	Log        *slog.Logger
}

// cleaner runs a retention pass every Interval (±10%). Every replica may run
// one: each batch re-checks and locks its rows in a short transaction, so
// concurrent cleaners only wait briefly for one another.
type cleaner struct {
	loopService
	p cleanerParams
}

func newCleaner(p cleanerParams) *cleaner { return &cleaner{p: p} }

// Start runs a pass every Interval until ctx ends or Stop.
func (c *cleaner) Start(ctx context.Context) error { return c.start(ctx, c.run) }

func (c *cleaner) run(ctx context.Context) {
	runEvery(ctx, c.p.Interval, c.p.Interval/10, func(ctx context.Context) { c.pass(ctx) })
}

// pass deletes up to MaxPerPass terminal jobs finished more than Retention
// ago, Batch per transaction.
func (c *cleaner) pass(ctx context.Context) jobq.PurgeResult {
	p := c.p
	res, err := withRetryV(ctx, p.Retry, "clean", retryUntilDone, func() (jobq.PurgeResult, error) {
		return p.Store.JobPurge(ctx, jobq.PurgeParams{OlderThan: p.Retention, Batch: p.Batch, MaxJobs: p.MaxPerPass})
	})
	if err != nil {
		if ctx.Err() == nil {
			logDBFailure(p.Log, "retention pass failed", err, "component", "cleaner", "deleted_jobs", res.Jobs)
		}
		return res
	}
	if res.Jobs > 0 {
		p.Log.Info("retention pass", "component", "cleaner", "deleted_jobs", res.Jobs,
			"deleted_executions", res.Executions, "batches", res.Batches, "cutoff", res.Cutoff)
	}
	p.Events.emit(Event{Kind: EventCleaned, Purged: res})
	return res
}
