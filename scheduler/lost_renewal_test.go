package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
)

// A replica whose run was taken over elsewhere (rescued and re-claimed by
// owner b with lease L) learns it at its next heartbeat: its renewal, fenced
// by owner, matches nothing, so b's lease_until stays L, and its handler is
// cancelled with ErrLeaseLost. How many heartbeats that took is logged.
func TestLostRunIsNotRenewedAndItsHandlerCancelled(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	started := make(chan struct{}, 1)
	cause := make(chan error, 1)
	reg := scheduler.NewRegistry()
	reg.Register("hold", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		started <- struct{}{}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return context.Cause(ctx)
	}))
	cfg := fastConfig("a")
	cfg.Lease = 3 * time.Second // heartbeat every second
	s := startScheduler(t, st, reg, cfg)
	job := submit(t, st, "taken-over", "hold", `{}`, 3)
	recv(t, started, slowWait, "a's handler started")

	// b's takeover, as the rescue and b's claim leave the row: attempt+1,
	// owner b, a lease an hour out.
	if _, err := st.DB().Exec(`UPDATE job_queue SET attempt = attempt + 1, owner = 'b',
		lease_until = NOW(6) + INTERVAL 1 HOUR WHERE id = ? AND status = 'RUNNING' AND owner = 'a'`, job.ID); err != nil {
		t.Fatal(err)
	}
	takenAt := time.Now()
	byB := getJob(t, st, job.ID)
	if byB.Owner != "b" || byB.Attempt != 2 || byB.LeaseUntil == nil {
		t.Fatalf("takeover: owner %q attempt %d lease %v", byB.Owner, byB.Attempt, byB.LeaseUntil)
	}
	if got := recv(t, cause, slowWait, "a's handler cancelled"); got != scheduler.ErrLeaseLost {
		t.Fatalf("a's handler context cause = %v, want ErrLeaseLost", got)
	}
	t.Logf("a's handler cancelled %s after the takeover (heartbeat every %s)", time.Since(takenAt), s.Config().HeartbeatInterval)
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	final := getJob(t, st, job.ID)
	if final.Owner != "b" || final.Attempt != 2 || final.Status != jobq.StateRunning || !final.LeaseUntil.Equal(*byB.LeaseUntil) {
		t.Fatalf("after a's heartbeats: owner %q attempt %d status %s lease_until %v; want b's row untouched (b, 2, RUNNING, %v)",
			final.Owner, final.Attempt, final.Status, final.LeaseUntil, byB.LeaseUntil)
	}
	if st := s.Stats(); st.LeaseLost != 1 {
		t.Fatalf("a's lease_lost = %d, want 1", st.LeaseLost)
	}
}
