package scheduler

import (
	"context"
	"log/slog"
	"time"

	"github.com/jobq/jobq"
)

// rescuerStore is what the rescuer needs from the store.
type rescuerStore interface {
	JobRescueCandidates(ctx context.Context, limit int) ([]jobq.Fence, error)
	JobRescueExpired(ctx context.Context, f jobq.Fence) (bool, error)
}

// rescuerParams configures the rescuer.
type rescuerParams struct {
	Store rescuerStore
	// Runs, if set, are this replica's runs: the rescuer leaves those whose
	// outcome is being written (runTable.writingOutcome) to the completer.
	Runs     *runTable
	Interval time.Duration // Config.RescueInterval (±20% jitter)
	Batch    int           // Config.RescueBatch
	Retry    dbRetrier
	Log      *slog.Logger
	Events   emitter // EventRescued
}

// rescuer returns RUNNING jobs whose lease expired on the database clock to
// WAITING (or FAILED / CANCELED). Every replica runs one; each row update is
// conditioned on status, attempt and an expired lease, so rescuers never
// fight and never overwrite a run that completed meanwhile.
type rescuer struct {
	loopService
	p rescuerParams
}

func newRescuer(p rescuerParams) *rescuer { return &rescuer{p: p} }

// Start runs a pass every Interval until ctx ends or Stop.
func (r *rescuer) Start(ctx context.Context) error { return r.start(ctx, r.run) }

func (r *rescuer) run(ctx context.Context) {
	runEvery(ctx, r.p.Interval, r.p.Interval/5, func(ctx context.Context) { r.pass(ctx) })
}

// pass rescues up to Batch expired runs and returns them.
func (r *rescuer) pass(ctx context.Context) []jobq.Fence {
	p := r.p
	cands, err := withRetryV(ctx, p.Retry, "rescue.candidates", retryUntilDone, func() ([]jobq.Fence, error) {
		return p.Store.JobRescueCandidates(ctx, p.Batch)
	})
	if err != nil {
		if ctx.Err() == nil {
			logDBFailure(p.Log, "rescue scan failed", err, "component", "rescuer")
		}
		return nil
	}
	var rescued []jobq.Fence
	skipped := 0
	for _, f := range cands {
		if p.Runs != nil && p.Runs.writingOutcome(f) {
			// This replica's own finished run: its lease expired only because
			// the database refused or lost writes, and its outcome write
			// (retried) wins or gives up first. Other replicas may still rescue.
			continue
		}
		ok, err := withRetryV(ctx, p.Retry, "rescue", retryUntilDone, func() (bool, error) {
			return p.Store.JobRescueExpired(ctx, f)
		})
		if err != nil {
			if ctx.Err() == nil {
				logDBFailure(p.Log, "rescue failed", err, "component", "rescuer", "job_id", f.ID, "attempt", f.Attempt)
			}
			continue
		}
		if ok {
			rescued = append(rescued, f)
			p.Log.Info("rescued expired lease", "component", "rescuer", "job_id", f.ID, "attempt", f.Attempt)
		} else {
			skipped++ // held by another transaction, or moved meanwhile
		}
	}
	p.Events.emit(Event{Kind: EventRescued, Fences: rescued, N: skipped})
	return rescued
}
