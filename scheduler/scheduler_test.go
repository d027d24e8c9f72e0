package scheduler_test

import (
	"context"
	"testing"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
)

// Two replicas, both strategies: every job runs exactly once and succeeds.
func TestTwoReplicasRunEachJobOnce(t *testing.T) {
	for _, strategy := range []string{scheduler.StrategySkipLocked, scheduler.StrategyCAS} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			reg := scheduler.NewRegistry()
			jobtypes.Register(reg)
			const n = 300
			for i := range n {
				submit(t, st, key("job", i), "noop", `{}`, 3)
			}
			for _, owner := range []string{"a", "b"} {
				cfg := fastConfig(owner)
				cfg.Strategy = strategy
				startScheduler(t, st, reg, cfg)
			}
			waitSucceeded(t, n)
			if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_attempt"); got != n {
				t.Fatalf("executions = %d, want %d", got, n)
			}
			if got := scalar(t, st.DB(), "SELECT COUNT(*) FROM job_attempt WHERE outcome='SUCCESS' AND attempt=1"); got != n {
				t.Fatalf("successful first attempts = %d, want %d", got, n)
			}
			if got := scalar(t, st.DB(), "SELECT COUNT(DISTINCT owner) FROM job_attempt"); got < 1 {
				t.Fatalf("owners = %d", got)
			}
			_ = context.Background()
		})
	}
}
