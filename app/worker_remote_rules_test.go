package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jobq/jobq/client"
)

// A concurrency limit on a remote type binds workers' fetches: with
// max_running 1 set over HTTP, a fetch of 10 takes one job and the next
// fetch none until it completes; a worker with concurrency 4 then runs the
// type's jobs one at a time (no two execution intervals overlap).
func TestWorkerFetchHonoursConcurrencyLimit(t *testing.T) {
	w := startWorkerReplica(t, nil)
	code, body := w.call(adminToken, "PUT", "/v1/types/resize/limit", map[string]any{"max_running": 1})
	if code != http.StatusOK {
		t.Fatalf("PUT limit: %d %s, want 200", code, body)
	}
	const n = 6
	for i := range n {
		w.submit(fmt.Sprintf("limited-%d", i), "resize")
	}
	first := w.fetch(resizeToken, "limited-a", []string{"resize"}, 10, 0)
	if len(first) != 1 {
		t.Fatalf("first fetch took %d jobs, want the 1 max_running allows", len(first))
	}
	if got := w.fetch(resizeToken, "limited-b", []string{"resize"}, 10, 0); len(got) != 0 {
		t.Fatalf("second fetch with one job RUNNING took %d jobs, want 0", len(got))
	}
	if code, body := w.call(resizeToken, "POST", "/v1/workers/complete", map[string]any{"task_token": first[0].TaskToken, "outcome": "success"}); code != http.StatusOK {
		t.Fatalf("complete: %d %s", code, body)
	}

	wk, err := client.NewWorker(client.WorkerConfig{Server: w.base, Token: resizeToken, WorkerID: "limited-w", Concurrency: 4,
		PollWait: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	wk.Register("resize", func(ctx context.Context, job *client.WorkerJob) (any, error) {
		time.Sleep(100 * time.Millisecond)
		return nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wk.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for w.count("SELECT COUNT(*) FROM job_queue WHERE job_type = 'resize' AND status = 'SUCCESS'") < n {
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not finish the %d limited jobs within 30s", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}
	// Overlapping attempts: pairs whose intervals intersect.
	overlaps := w.count(`SELECT COUNT(*) FROM job_execution a JOIN job_execution b
		ON a.job_id < b.job_id AND a.started_at < b.finished_at AND b.started_at < a.finished_at
		JOIN job_queue q ON q.id = a.job_id WHERE q.job_type = 'resize'`)
	if overlaps != 0 {
		t.Fatalf("%d pairs of resize attempts overlapped, want 0 under max_running 1", overlaps)
	}
	if got := w.count("SELECT COUNT(*) FROM job_execution e JOIN job_queue q ON q.id = e.job_id WHERE q.job_type = 'resize'"); got != n {
		t.Fatalf("%d resize attempts, want %d", got, n)
	}
}
