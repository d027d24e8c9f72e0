package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
)

// A remote success with spawn for a job outside a workflow is refused with
// a 400 naming spawn, single and in a batch, and changes nothing: the job
// stays RUNNING with its lease and attempt, no execution is recorded, and the same success without spawn is then applied.
func TestWorkerSpawnOutsideAWorkflowIsRefused(t *testing.T) {
	w := startWorkerReplica(t, nil)
	id := w.submit("lonely", "resize")
	jobs := w.fetch(submitToken, "spawner", []string{"resize"}, 1, 0)
	if len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("fetch: %+v, want job %d", jobs, id)
	}
	tok := jobs[0].TaskToken
	before, exBefore := w.row(id), w.executions(id)
	spawn := map[string]any{"jobs": []map[string]any{{"job_key": "lonely-child", "job_type": "resize"}}}
	success := map[string]any{"task_token": tok, "outcome": "success", "output": map[string]any{"n": 1}, "spawn": spawn}
	for try := 1; try <= 2; try++ {
		code, body := w.call(submitToken, "POST", "/v1/workers/complete", success)
		if e := errorOf(t, body); code != http.StatusBadRequest || e.Field != "spawn" || e.Code != "invalid_argument" {
			t.Fatalf("success with spawn, try %d: %d %s, want 400 invalid_argument naming spawn", try, code, body)
		}
		if got := w.row(id); got != before || got.Status != "RUNNING" || got.LeaseUntil == "" {
			t.Fatalf("job after the refused spawn (try %d): %+v, want it unchanged and RUNNING with its lease: %+v", try, got, before)
		}
		if got := w.executions(id); fmt.Sprint(got) != fmt.Sprint(exBefore) {
			t.Fatalf("executions after the refused spawn (try %d): %v, want them unchanged: %v", try, got, exBefore)
		}
	}
	code, body := w.call(submitToken, "POST", "/v1/workers/complete:batch", map[string]any{"completions": []any{success}})
	var batch apitype.CompleteBatchResponse
	if err := json.Unmarshal(body, &batch); err != nil || code != http.StatusOK || len(batch.Results) != 1 ||
		batch.Results[0].Result != apitype.CompleteInvalid || batch.Results[0].Error == nil || batch.Results[0].Error.Field != "spawn" {
		t.Fatalf("batch success with spawn: %d %s, want one result invalid naming spawn", code, body)
	}
	if got := w.row(id); got != before {
		t.Fatalf("job after the refused batch spawn: %+v, want unchanged %+v", got, before)
	}
	if n := w.count("SELECT COUNT(*) FROM job_queue WHERE job_key = 'lonely-child'"); n != 0 {
		t.Fatalf("%d spawned jobs written, want none", n)
	}
	delete(success, "spawn")
	code, body = w.call(submitToken, "POST", "/v1/workers/complete", success)
	if code != http.StatusOK {
		t.Fatalf("success without spawn: %d %s, want 200", code, body)
	}
	var resp apitype.CompleteResponse
	if err := json.Unmarshal(body, &resp); err != nil || resp.Result != apitype.CompleteApplied || resp.Status != "SUCCESS" {
		t.Fatalf("success without spawn: %s, want applied SUCCESS", body)
	}
	if got := w.executions(id); len(got) != 1 || got[0] != "1:SUCCESS" {
		t.Fatalf("executions %v, want 1:SUCCESS", got)
	}
}

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
	overlaps := w.count(`SELECT COUNT(*) FROM job_attempt a JOIN job_attempt b
		ON a.job_id < b.job_id AND a.started_at < b.finished_at AND b.started_at < a.finished_at
		JOIN job_queue q ON q.id = a.job_id WHERE q.job_type = 'resize'`)
	if overlaps != 0 {
		t.Fatalf("%d pairs of resize attempts overlapped, want 0 under max_running 1", overlaps)
	}
	if got := w.count("SELECT COUNT(*) FROM job_attempt e JOIN job_queue q ON q.id = e.job_id WHERE q.job_type = 'resize'"); got != n {
		t.Fatalf("%d resize attempts, want %d", got, n)
	}
}

// A run of a type with a concurrency limit that ends wakes the fetches
// waiting on this replica, as a submit does: with no scan of their own
// for an hour and a 20 s long poll, a worker with concurrency 4 still
// takes the next job of a type limited to 1 as soon as the last one ends.
func TestWorkerFetchOfALimitedTypeWokenByCompletion(t *testing.T) {
	w := startWorkerReplica(t, func(c *Config) { c.Scheduler.RemoteScanInterval = time.Hour })
	if code, body := w.call(adminToken, "PUT", "/v1/types/resize/limit", map[string]any{"max_running": 1}); code != http.StatusOK {
		t.Fatalf("PUT limit: %d %s, want 200", code, body)
	}
	// The PUT refreshes this replica's view of the limits; wait until it
	// has (it is what the completion's wake-up reads).
	for deadline := time.Now().Add(10 * time.Second); w.r.Scheduler.LimitedTypes()["resize"] != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("the replica's limited types %v never showed resize: 1", w.r.Scheduler.LimitedTypes())
		}
		time.Sleep(10 * time.Millisecond)
	}
	const n = 4
	for i := range n {
		w.submit(fmt.Sprintf("woken-%d", i), "resize")
	}
	wk, err := client.NewWorker(client.WorkerConfig{Server: w.base, Token: resizeToken, WorkerID: "woken-w", Concurrency: 4,
		PollWait: 20 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	wk.Register("resize", func(ctx context.Context, job *client.WorkerJob) (any, error) { return nil, nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- wk.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	// Without the wake-up each job after the first waits for a long poll
	// to end (20 s); with it the 4 take well under one.
	deadline := time.Now().Add(15 * time.Second)
	for w.count("SELECT COUNT(*) FROM job_queue WHERE job_type = 'resize' AND status = 'SUCCESS'") < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d limited jobs done within 15s: a run's end did not wake the waiting fetch",
				w.count("SELECT COUNT(*) FROM job_queue WHERE job_type = 'resize' AND status = 'SUCCESS'"), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
