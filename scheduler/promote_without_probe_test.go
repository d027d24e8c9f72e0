package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
)

// A job another replica scheduled (no local hint) is promoted within the
// promote interval on a replica whose scan sends no idle probe: the cas
// strategy, and a skiplocked replica whose scan is busy with a backlog
// (every worker held, so no empty claim and no probe).
func TestPromotedInTimeWithoutIdleProbe(t *testing.T) {
	for _, c := range []struct {
		name     string
		strategy string
		busy     bool
	}{{"cas", scheduler.StrategyCAS, false}, {"skiplocked-busy", scheduler.StrategySkipLocked, true}, {"cas-busy", scheduler.StrategyCAS, true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := testdb.Store(t)
			reg := scheduler.NewRegistry()
			release := make(chan struct{})
			reg.Register("block", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return nil
			}))
			reg.Register("rec", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
			cfg := fastConfig("a")
			cfg.Strategy = c.strategy
			cfg.Workers = 2
			cfg.PromoteInterval = 400 * time.Millisecond
			if c.busy {
				for i := range 10 {
					if _, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: fmt.Sprintf("b%d", i), JobType: "block", Params: "{}", RequestHash: "h", Priority: 10}); err != nil {
						t.Fatal(err)
					}
				}
			}
			startScheduler(t, st, reg, cfg)
			t.Cleanup(func() { close(release) }) // before the scheduler's Stop
			if c.busy {
				// The backlog is claimed: every worker is held.
				events(t).WaitFor(t, scheduler.EventClaimed, func(e scheduler.Event) bool { return len(e.Jobs) > 0 }, slowWait)
			}
			now, err := st.DBNow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			runAt := now.Add(200 * time.Millisecond)
			j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: "sched", JobType: "rec", Params: "{}", RequestHash: "h", RunAt: &runAt})
			if err != nil || j.Status != jobq.StateScheduled {
				t.Fatalf("submit: %v %s", err, j.Status)
			}
			// Promoted by the promoter's own passes (no local hint, no idle
			// probe feeds it); the workers may all be held, so wait for the
			// promotion, not the run.
			events(t).WaitFor(t, scheduler.EventPromoted, func(e scheduler.Event) bool { return e.N > 0 }, slowWait)
			if got, err := st.JobGet(ctx, j.ID); err != nil || got.Status == jobq.StateScheduled {
				t.Fatalf("after the promotion: %+v, %v; want the job no longer SCHEDULED", got.Status, err)
			}
		})
	}
}
