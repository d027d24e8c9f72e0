package robustness

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/testbed/faultstore"
)

// TestLeaseRenewalFailingCancelsBeforeExpiry makes every lease renewal fail
// — at once with an error, or by hanging like an unreachable database —
// and checks that the running handler's context is cancelled with
// ErrLeaseLost while its lease is still valid on the database clock, so no
// work continues after the lease is lost.
func TestLeaseRenewalFailingCancelsBeforeExpiry(t *testing.T) {
	faults := map[string]faultstore.Hook{
		"renewal errors": func(ctx context.Context) error { return errors.New("renewal refused (injected)") },
		"renewal hangs": func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		},
	}
	for name, hook := range faults {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			fs := faultstore.Wrap(st)
			fs.On(faultstore.LeaseRenewBefore, hook)
			type cancelled struct {
				cause      error
				leaseValid bool
				msLeft     float64
			}
			got := make(chan cancelled, 1)
			reg := scheduler.NewRegistry()
			reg.Register("hold", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
				<-ctx.Done()
				var c cancelled
				c.cause = context.Cause(ctx)
				// The real store, not the faulty one: what does the database say now?
				err := st.DB().QueryRow("SELECT lease_until > NOW(6), TIMESTAMPDIFF(MICROSECOND, NOW(6), lease_until) / 1000 FROM job_queue WHERE id = ?",
					job.ID).Scan(&c.leaseValid, &c.msLeft)
				if err != nil {
					c.cause = fmt.Errorf("read lease: %w", err)
				}
				got <- c
				return context.Cause(ctx)
			}))
			cfg := scheduler.Config{Owner: "renew-" + name, PollInterval: 50 * time.Millisecond, PollJitter: 10 * time.Millisecond,
				Lease: 1500 * time.Millisecond, RescueInterval: time.Hour, Workers: 2, Logger: quiet(), ShutdownTimeout: 5 * time.Second}
			s, err := scheduler.New(fs, reg, cfg, st.Server.SkipLocked)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			mr := 0
			if _, _, err := service.New(service.Options{Store: st, WakeFunc: s.Wake}).Submit(context.Background(),
				apitype.SubmitRequest{JobKey: "hold-1", JobType: "hold", MaxRetry: &mr}); err != nil {
				t.Fatal(err)
			}
			select {
			case c := <-got:
				if !errors.Is(c.cause, scheduler.ErrLeaseLost) {
					t.Fatalf("handler context cause = %v, want ErrLeaseLost", c.cause)
				}
				if !c.leaseValid {
					t.Fatalf("handler cancelled %.0f ms after its lease expired on the database clock", -c.msLeft)
				}
				// Cancelled with time to spare (the guard aims at Lease/5 =
				// 300 ms), not by luck in the last milliseconds.
				if c.msLeft < 100 {
					t.Fatalf("handler cancelled only %.0f ms before its lease expired; want ≥ 100 ms", c.msLeft)
				}
				t.Logf("handler cancelled with %.0f ms of lease left", c.msLeft)
			case <-time.After(20 * time.Second):
				t.Fatal("handler was never cancelled although no renewal succeeded")
			}
			if n := s.Stats().LeaseLost; n != 1 {
				t.Errorf("LeaseLost = %d, want 1", n)
			}
		})
	}
}
