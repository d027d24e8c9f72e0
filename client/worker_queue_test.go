package client

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jobq/jobq/apitype"
)

// The run queue offers as many places as the slots are expected to start
// within runQueueHorizon: the handlers that returned lately, capped by
// slots × horizon / their mean run time.
func TestRecentRunsPlaces(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cases := []struct {
		name  string
		runs  int
		ran   time.Duration
		slots int
		at    time.Duration // when places is asked, after the runs
		want  int
	}{
		{"no run yet", 0, 0, 4, 0, 0},
		{"50 runs of 1ms on 4 slots", 50, time.Millisecond, 4, 0, 50},
		{"500 runs of 1ms on 4 slots: 4 × 100ms / 1ms", 500, time.Millisecond, 4, 0, 400},
		{"4 runs of 3s on 4 slots", 4, 3 * time.Second, 4, 0, 0},
		{"50 runs, one horizon later: the previous bucket", 50, time.Millisecond, 4, runQueueHorizon, 50},
		{"50 runs, two horizons later: forgotten", 50, time.Millisecond, 4, 2 * runQueueHorizon, 0},
	}
	for _, c := range cases {
		var r recentRuns
		for range c.runs {
			r.add(t0, c.ran)
		}
		if got := r.places(t0.Add(c.at), c.slots); got != c.want {
			t.Errorf("%s: places %d, want %d", c.name, got, c.want)
		}
	}
}

// Queued jobs wait for a slot in fetch order; when no queued job started
// for RunQueueWait, every queued job is given back (a release completion,
// the job no longer queued) and none is started.
func TestRunQueueGivesBackWhenItStandsStill(t *testing.T) {
	w, err := NewWorker(WorkerConfig{Server: "http://127.0.0.1:1", Concurrency: 1, RunQueueWait: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.running = 1 // the one slot is busy
	ctx := context.Background()
	for i, tok := range []string{"jqt1.1.1.a", "jqt1.2.1.b"} {
		w.start(ctx, apitype.FetchedJob{ID: uint64(i + 1), JobType: "t", Attempt: 1, TaskToken: tok, LeaseMs: 30000, HeartbeatMs: 10000})
	}
	if len(w.queue) != 2 || w.queue[0].job.ID != 1 {
		t.Fatalf("queue %d jobs, want 2 in fetch order", len(w.queue))
	}
	moved := w.moved
	w.sweep(moved.Add(150 * time.Millisecond))
	if len(w.queue) != 2 || len(w.outbox) != 0 {
		t.Fatalf("after 150ms: queue %d, outbox %d; want the queue kept", len(w.queue), len(w.outbox))
	}
	w.sweep(moved.Add(250 * time.Millisecond))
	if len(w.queue) != 0 || len(w.outbox) != 2 || w.pending != 2 || w.running != 1 {
		t.Fatalf("after 250ms: queue %d, outbox %d, pending %d, running %d; want both given back", len(w.queue), len(w.outbox), w.pending, w.running)
	}
	for i, c := range w.outbox {
		if c.body.Outcome != outcomeRelease || c.hj.job.ID != uint64(i+1) || c.hj.inQueue {
			t.Errorf("completion %d: %+v, want a release of job %d", i, c.body, i+1)
		}
	}
}
