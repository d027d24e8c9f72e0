package schedulertest_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
	"github.com/jobq/jobq/store"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// TestRecorderObservesAScheduler waits on a real scheduler's events: a
// job's successful completion, then five more scans. docs/testing.md
// quotes its middle lines.
func TestRecorderObservesAScheduler(t *testing.T) {
	st := testdb.Store(t)
	reg := scheduler.NewRegistry()
	reg.Register("noop", scheduler.HandlerFunc(func(context.Context, *scheduler.Job) error { return nil }))
	cfg := scheduler.Config{Owner: "rec", PollInterval: 50 * time.Millisecond, PollJitter: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

	rec := schedulertest.NewRecorder()
	cfg.Observer = rec // before scheduler.New
	s := startScheduler(t, st, reg, cfg)
	job := submit(t, st, "k")
	rec.WaitFor(t, scheduler.EventCompleted, schedulertest.Finished(job.ID, jobq.OutcomeSuccess), time.Minute)
	rec.WaitAfterN(t, rec.Mark(), scheduler.EventScanned, nil, 5, time.Minute) // five more scans

	if got, err := st.JobGet(context.Background(), job.ID); err != nil || got.Status != jobq.StateSuccess {
		t.Fatalf("after the completed event: %s, %v; want SUCCESS", got.Status, err)
	}
	if n := s.Stats().Succeeded; n != 1 {
		t.Fatalf("Stats().Succeeded = %d, want 1 (counted before the observer saw the event)", n)
	}
}

func startScheduler(t *testing.T, st *store.Store, reg *scheduler.Registry, cfg scheduler.Config) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(st, reg, cfg, st.Server.SkipLocked)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func submit(t *testing.T, st *store.Store, key string) jobq.Job {
	t.Helper()
	j, _, err := st.JobSubmit(context.Background(), jobq.SubmitParams{JobKey: key, JobType: "noop", Params: "{}", RequestHash: "h"})
	if err != nil {
		t.Fatal(err)
	}
	return j
}
