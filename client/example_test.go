package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
)

// Submitting to a running replica (`jobq serve`). Compiled by go vet and go
// test, not run: it needs a replica on 127.0.0.1:8080 (app's
// Example_ownJobType runs the same calls against one it starts).
func ExampleClient_Submit() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080") // c.Token = "…" when the API wants a bearer token
	job, created, err := c.Submit(ctx, apitype.SubmitRequest{
		JobKey: "hello-1", JobType: "sleep", Params: json.RawMessage(`{"ms":3000}`)})
	if err != nil {
		log.Fatal(err) // *client.APIError for a 4xx/5xx: Status and Detail (code, field, message)
	}
	fmt.Println(job.ID, created, job.Status) // created false: the same job_key and body was submitted before
}

// A batch: up to apitype.MaxBatchJobs jobs in one request, one result per
// job in request order.
func ExampleClient_SubmitBatch() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080")
	resp, err := c.SubmitBatch(ctx, []apitype.SubmitRequest{
		{JobKey: "batch-1", JobType: "noop"},
		{JobKey: "batch-2", JobType: "sleep", Params: json.RawMessage(`{"ms":100}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range resp.Results { // r.Status: created, existing, conflict (409) or invalid (400)
		if r.Error != nil {
			fmt.Println(i, r.Status, r.Error.Field, r.Error.Message)
			continue
		}
		fmt.Println(i, r.Status, r.ID)
	}
}

// A worker for the remote job type "resize" (replicas run with `jobq serve
// --remote-type resize`): up to 8 jobs at once, a graceful shutdown on
// SIGTERM or Ctrl-C. Compiled by go vet and go test, not run: it needs a
// replica on 127.0.0.1:8080 (the conformance suite in sdk/conformance runs
// a worker like it against one it starts).
func ExampleWorker() {
	w, err := client.NewWorker(client.WorkerConfig{
		Server:      "http://127.0.0.1:8080",
		Token:       os.Getenv("JOBQ_WORKER_TOKEN"), // a worker token scoped to resize; "" when the replica has none
		Concurrency: 8,
	})
	if err != nil {
		log.Fatal(err)
	}
	w.Register("resize", func(ctx context.Context, job *client.WorkerJob) (any, error) {
		var p struct {
			VM   string `json:"vm"`
			CPUs int    `json:"cpus"`
		}
		if err := job.Decode(&p); err != nil {
			return nil, client.NoRetry(err) // bad params: fail the job now, no retry
		}
		_ = job.Log(ctx, "resizing "+p.VM)
		select {
		case <-ctx.Done(): // cancel requested, lease lost, timeout or shutdown
			return nil, context.Cause(ctx) // e.g. client.ErrCancelRequested: the job ends CANCELED
		case <-time.After(2 * time.Second): // the work
		}
		_ = job.Progress(ctx, 1, "done")
		return map[string]any{"vm": p.VM, "cpus": p.CPUs}, nil // the job's output
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil { // returns after the graceful shutdown
		log.Fatal(err)
	}
}
