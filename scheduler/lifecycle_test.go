package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
	"github.com/jobq/jobq/service"
)

// Cancelling a RUNNING job cancels its handler's context within one
// heartbeat, and the job ends CANCELED whatever the handler returns.
func TestCancelRunningJob(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		result func(ctx context.Context) error
	}{
		{"handler returns nil", func(context.Context) error { return nil }},
		{"handler returns the cause", func(ctx context.Context) error { return context.Cause(ctx) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			started := make(chan struct{}, 1)
			cancelled := make(chan error, 1)
			reg := scheduler.NewRegistry()
			reg.Register("wait", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
				started <- struct{}{}
				<-ctx.Done()
				cancelled <- context.Cause(ctx)
				return c.result(ctx)
			}))
			job := submit(t, st, "cancel-me", "wait", `{}`, 3)
			cfg := fastConfig("a")
			cfg.Lease = 3 * time.Second
			cfg.HeartbeatInterval = 500 * time.Millisecond
			hook, done := completions()
			cfg.Observer = hook
			s := startScheduler(t, st, reg, cfg)
			recv(t, started, slowWait, "handler started")

			svc := service.New(service.Options{Store: st})
			asked := time.Now()
			j, err := svc.Cancel(context.Background(), job.ID)
			if err != nil {
				t.Fatalf("cancel: %v", err)
			}
			if j.Status != jobq.StateRunning || !j.CancelRequested {
				t.Fatalf("cancel returned status=%s cancel_requested=%v, want RUNNING true", j.Status, j.CancelRequested)
			}
			cause := recv(t, cancelled, slowWait, "handler context cancelled")
			// The heartbeat delivered it (cause ErrCancelRequested, checked
			// below), not the lease guard; how soon (one heartbeat interval on
			// an idle machine) is logged, not asserted.
			t.Logf("handler cancelled %s after the request (heartbeat every %s)", time.Since(asked), cfg.HeartbeatInterval)
			if cause != scheduler.ErrCancelRequested {
				t.Fatalf("context cause = %v, want ErrCancelRequested", cause)
			}
			comp := recv(t, done, slowWait, "completion")
			if err := s.Stop(); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if !comp.Applied || comp.Outcome != jobq.OutcomeCanceled || comp.Retry {
				t.Fatalf("completion = %+v, want an applied CANCELED without retry", comp)
			}
			f := getJob(t, st, job.ID)
			if f.Status != jobq.StateCanceled || f.RetryTimes != 0 || f.Attempt != 1 || f.FinishedAt == nil || f.LeaseUntil != nil {
				t.Fatalf("job status=%s retry_times=%d attempt=%d finished_at=%v lease_until=%v, want CANCELED 0 1 set nil",
					f.Status, f.RetryTimes, f.Attempt, f.FinishedAt, f.LeaseUntil)
			}
			want := []string{"1:a:CANCELED"}
			if got := execSummary(executions(t, st, job.ID)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("executions = %v, want %v", got, want)
			}
		})
	}
}

// Stop lets a running handler finish while the heartbeat keeps renewing its
// lease, then the job completes SUCCESS; nothing new is claimed meanwhile.
func TestStopWaitsForRunningHandler(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	g := newGate(t)
	started := make(chan struct{}, 1)
	reg := scheduler.NewRegistry()
	reg.Register("wait", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		started <- struct{}{}
		select {
		case <-g.Wait():
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}))
	job := submit(t, st, "graceful", "wait", `{}`, 3)
	cfg := fastConfig("a")
	cfg.Lease = time.Second // heartbeat every 333 ms
	cfg.ShutdownTimeout = 30 * time.Second
	s := startScheduler(t, st, reg, cfg)
	recv(t, started, slowWait, "handler started")

	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop() }()
	first := getJob(t, st, job.ID).LeaseUntil
	mark := events(t).Mark() // after the read: the next beat's renewal commits later
	events(t).WaitAfter(t, mark, scheduler.EventRenewed, schedulertest.NonEmpty, slowWait)
	renewed := getJob(t, st, job.ID)
	if renewed.LeaseUntil == nil || !renewed.LeaseUntil.After(*first) {
		t.Fatalf("lease_until %v after a renewal during shutdown, want after %v", renewed.LeaseUntil, first)
	}
	later := submit(t, st, "after-stop", "wait", `{}`, 3)
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while the handler was still running", err)
	default:
	}
	if renewed.Status != jobq.StateRunning || renewed.Owner != "a" {
		t.Fatalf("during shutdown status=%s owner=%q, want RUNNING \"a\"", renewed.Status, renewed.Owner)
	}

	g.Open()
	if err := recv(t, stopped, slowWait, "Stop to return"); err != nil {
		t.Fatalf("stop: %v", err)
	}
	f := getJob(t, st, job.ID)
	if f.Status != jobq.StateSuccess || f.Attempt != 1 || f.RetryTimes != 0 {
		t.Fatalf("job status=%s attempt=%d retry_times=%d, want SUCCESS 1 0", f.Status, f.Attempt, f.RetryTimes)
	}
	if l := getJob(t, st, later.ID); l.Status != jobq.StateWaiting || l.Attempt != 0 {
		t.Fatalf("job submitted during shutdown status=%s attempt=%d, want WAITING 0 (not claimed)", l.Status, l.Attempt)
	}
	want := []string{"1:a:SUCCESS"}
	if got := execSummary(executions(t, st, job.ID)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("executions = %v, want %v", got, want)
	}
}

// When ShutdownTimeout runs out, a handler that honours its context is
// cancelled and its job released to WAITING without spending a retry.
func TestStopTimeoutReleasesJob(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	reg := scheduler.NewRegistry()
	reg.Register("wait", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}))
	job := submit(t, st, "released", "wait", `{}`, 3)
	cfg := fastConfig("a")
	cfg.ShutdownTimeout = 200 * time.Millisecond
	s := startScheduler(t, st, reg, cfg)
	recv(t, started, slowWait, "handler started")
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if cause := recv(t, causes, time.Second, "handler cancelled"); cause != scheduler.ErrShutdown {
		t.Fatalf("context cause = %v, want ErrShutdown", cause)
	}
	f := getJob(t, st, job.ID)
	if f.Status != jobq.StateWaiting || f.RetryTimes != 0 || f.Attempt != 1 || f.LeaseUntil != nil || f.FinishedAt != nil {
		t.Fatalf("job status=%s retry_times=%d attempt=%d lease_until=%v finished_at=%v, want WAITING 0 1 nil nil",
			f.Status, f.RetryTimes, f.Attempt, f.LeaseUntil, f.FinishedAt)
	}
	want := []string{"1:a:RELEASED"}
	if got := execSummary(executions(t, st, job.ID)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("executions = %v, want %v", got, want)
	}
	if got := s.Stats(); got.Released != 1 || got.Failed != 0 {
		t.Fatalf("stats released=%d failed=%d, want 1 and 0", got.Released, got.Failed)
	}
}
