package scheduler

import (
	"context"
	"time"

	"github.com/jobq/jobq"
)

// cleanLoop runs a retention pass every CleanInterval (±10%) while
// Retention is set. Every replica may run one: each batch re-checks and
// locks its rows in a short transaction, so concurrent cleaners only wait
// briefly for one another.
func (o *opsRunner) cleanLoop(ctx context.Context) {
	for {
		t := time.NewTimer(jittered(o.cfg.CleanInterval, o.cfg.CleanInterval/10))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		o.clean(ctx)
	}
}

// clean deletes up to CleanMaxPerPass terminal jobs finished more than
// Retention ago, CleanBatch per transaction.
func (o *opsRunner) clean(ctx context.Context) jobq.PurgeResult {
	s := o.s
	var res jobq.PurgeResult
	err := s.dbRetry(ctx, "clean", 0, func() error {
		var e error
		res, e = o.st.JobPurge(ctx, jobq.PurgeParams{OlderThan: o.cfg.Retention, Batch: o.cfg.CleanBatch, MaxJobs: o.cfg.CleanMaxPerPass})
		return e
	})
	if err != nil {
		if ctx.Err() == nil {
			s.logDBFailure("retention pass failed", err, "component", "cleaner", "deleted_jobs", res.Jobs)
		}
		return res
	}
	if res.Jobs > 0 {
		s.log.Info("retention pass", "component", "cleaner", "deleted_jobs", res.Jobs,
			"deleted_executions", res.Executions, "batches", res.Batches, "cutoff", res.Cutoff)
	}
	if o.cfg.CleanedFunc != nil {
		o.cfg.CleanedFunc(res)
	}
	return res
}

// CleanNow runs one retention pass at once with the configured Retention
// and returns what it deleted (tests and operators). It does nothing when
// Retention is 0 or the store lacks OpsStore.
func (s *Scheduler) CleanNow(ctx context.Context) jobq.PurgeResult {
	if s.ops == nil || s.ops.cfg.Retention <= 0 {
		return jobq.PurgeResult{}
	}
	return s.ops.clean(ctx)
}
