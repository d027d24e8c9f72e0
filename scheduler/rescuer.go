package scheduler

import (
	"context"
	"time"

	"github.com/jobq/jobq"
)

// rescuer returns RUNNING jobs whose lease expired on the database clock to
// WAITING (or FAILED / CANCELED). Every replica runs one; each row update is
// conditioned on status, attempt and an expired lease, so rescuers never
// fight and never overwrite a run that completed meanwhile.
type rescuer struct{ s *Scheduler }

func newRescuer(s *Scheduler) *rescuer { return &rescuer{s: s} }

func (r *rescuer) run(ctx context.Context) {
	s := r.s
	for {
		t := time.NewTimer(jittered(s.cfg.RescueInterval, s.cfg.RescueInterval/5))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		r.pass(ctx)
	}
}

// pass rescues up to RescueBatch expired runs and returns them.
func (r *rescuer) pass(ctx context.Context) []jobq.Fence {
	s := r.s
	var cands []jobq.Fence
	err := s.dbRetry(ctx, "rescue.candidates", 0, func() error {
		var e error
		cands, e = s.store.JobRescueCandidates(ctx, s.cfg.RescueBatch)
		return e
	})
	if err != nil {
		if ctx.Err() == nil {
			s.logDBFailure("rescue scan failed", err, "component", "rescuer")
		}
		return nil
	}
	var rescued []jobq.Fence
	for _, f := range cands {
		var ok bool
		err := s.dbRetry(ctx, "rescue", 0, func() error {
			var e error
			ok, e = s.store.JobRescueExpired(ctx, f)
			return e
		})
		if err != nil {
			if ctx.Err() == nil {
				s.logDBFailure("rescue failed", err, "component", "rescuer", "job_id", f.ID, "attempt", f.Attempt)
			}
			continue
		}
		if ok {
			rescued = append(rescued, f)
			s.log.Info("rescued expired lease", "component", "rescuer", "job_id", f.ID, "attempt", f.Attempt)
		}
	}
	s.stats.rescued.Add(int64(len(rescued)))
	if len(rescued) > 0 && s.cfg.Hooks.RescuedFunc != nil {
		s.cfg.Hooks.RescuedFunc(rescued)
	}
	return rescued
}

// RescueNow runs one rescue pass at once and returns the runs it rescued
// (tests, and `jobq` operators who do not want to wait RescueInterval).
func (s *Scheduler) RescueNow(ctx context.Context) []jobq.Fence { return newRescuer(s).pass(ctx) }
