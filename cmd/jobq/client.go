package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
)

// ServerFlags name the API to talk to.
type ServerFlags struct {
	Server    string `help:"Base URL of a replica's API." default:"http://127.0.0.1:8080" env:"JOBQ_SERVER" group:"Connection"`
	Token     string `help:"Bearer token, if the API requires one." env:"JOBQ_TOKEN" group:"Connection"`
	Transport string `help:"http: the HTTP/JSON API; grpc: JobService and OpsService over gRPC (h2c) on the same address." default:"http" enum:"http,grpc" env:"JOBQ_TRANSPORT" group:"Connection"`
}

// jobAPI is what the client commands call: *client.Client (HTTP) or
// *client.GRPCClient (gRPC).
type jobAPI interface {
	Submit(ctx context.Context, req apitype.SubmitRequest) (apitype.Job, bool, error)
	Get(ctx context.Context, id uint64) (apitype.Job, error)
	List(ctx context.Context, status, jobType string, limit int, cursor string) (apitype.ListPage, error)
	Cancel(ctx context.Context, id uint64) (apitype.Job, error)
	Retry(ctx context.Context, id uint64) (apitype.Job, error)
	Executions(ctx context.Context, id uint64) ([]apitype.Execution, error)
}

func (f ServerFlags) client() jobAPI {
	if f.Transport == "grpc" {
		c := client.NewGRPC(f.Server)
		c.Token = f.Token
		return c
	}
	c := client.New(f.Server)
	c.Token = f.Token
	return c
}

// SubmitCmd submits a job, or with --file every job of an NDJSON file.
type SubmitCmd struct {
	ServerFlags
	OutputFlags
	Key       string  `help:"job_key: 1–64 characters, unique; resubmitting the same request returns the same job. Required without --file."`
	Type      string  `help:"job_type: a registered type (built-in: noop, sleep, flaky; effect and poison only on replicas run with JOBQ_TESTBED=1). Required without --file."`
	Params    string  `help:"params: a JSON object." default:"{}"`
	Priority  *int    `help:"priority 0–1000, higher runs first (default 0)."`
	MaxRetry  *int    `help:"max_retry 0–100 (default 3)."`
	RunAt     *string `help:"run_at: RFC 3339 time with offset; the job does not start before it."`
	TimeoutMs *int    `help:"timeout_ms: per-attempt timeout, 0 = none."`
	// UniqueFor and UniqueWhile are the key's uniqueness window.
	UniqueFor        *time.Duration `help:"The key names this job only this long (unique_for_ms, 1ms–365 days, database clock); a submit of the key after that creates a new job. Default: for good." name:"unique-for"`
	UniqueWhile      string         `help:"active: the key names this job only until it is terminal (unique_while)." name:"unique-while" enum:"active," default:""`
	ConcurrencyKey   string         `help:"concurrency_key: at most --concurrency-limit jobs with this key run at once, across replicas; the others wait PARKED (1–128 characters)."`
	ConcurrencyLimit *int           `help:"concurrency_limit 1–1000 for --concurrency-key (default 1; the newest submit's limit is the key's)."`
	RateKey          string         `help:"rate_key: under a per-key rate limit of the type (types limit-rate --per-key), the jobs with this key share one window of the limit (1–128 characters)."`
	SubmitFileFlags
}

// Run submits the job and prints it (or the file: see SubmitFileFlags).
func (c *SubmitCmd) Run(g *Globals) error {
	if c.File != "" {
		if c.Key != "" || c.Type != "" || c.Params != "{}" || c.Priority != nil || c.MaxRetry != nil || c.RunAt != nil || c.TimeoutMs != nil ||
			c.UniqueFor != nil || c.UniqueWhile != "" ||
			c.ConcurrencyKey != "" || c.ConcurrencyLimit != nil || c.RateKey != "" {
			return errors.New("--file: the jobs come from the file; drop --key, --type and the other job flags")
		}
		return c.SubmitFileFlags.run(g, c.ServerFlags)
	}
	if c.Key == "" || c.Type == "" {
		return errors.New("--key and --type are required (or --file jobs.ndjson)")
	}
	if !json.Valid([]byte(c.Params)) {
		return fmt.Errorf("--params: must be a JSON object, e.g. '{\"ms\": 100}'; got %q", c.Params)
	}
	req := apitype.SubmitRequest{
		JobKey: c.Key, JobType: c.Type, Params: json.RawMessage(c.Params), Priority: c.Priority,
		MaxRetry: c.MaxRetry, RunAt: c.RunAt, TimeoutMs: c.TimeoutMs, UniqueWhile: c.UniqueWhile,
		ConcurrencyKey: c.ConcurrencyKey, ConcurrencyLimit: c.ConcurrencyLimit, RateKey: c.RateKey,
	}
	if c.UniqueFor != nil {
		ms := c.UniqueFor.Milliseconds()
		req.UniqueForMs = &ms
	}
	job, created, err := c.client().Submit(g.Ctx, req)
	if err != nil {
		return err
	}
	if !created {
		fmt.Fprintln(os.Stderr, "job_key already existed with the same request; returning that job")
	}
	return c.show(job, func(w io.Writer) { jobTable(w, job) })
}

// GetCmd shows a job.
type GetCmd struct {
	ServerFlags
	OutputFlags
	ID uint64 `arg:"" help:"Job id."`
}

// Run prints the job.
func (c *GetCmd) Run(g *Globals) error {
	job, err := c.client().Get(g.Ctx, c.ID)
	if err != nil {
		return err
	}
	return c.show(job, func(w io.Writer) { jobTable(w, job) })
}

// ListCmd lists jobs.
type ListCmd struct {
	ServerFlags
	OutputFlags
	Status string `help:"Only this status (BLOCKED, PARKED, SCHEDULED, WAITING, HELD, RUNNING, SUCCESS, FAILED, CANCELED)."`
	Type   string `help:"Only this job_type."`
	Limit  int    `help:"Page size 1–1000." default:"50"`
	Cursor string `help:"next_cursor of the previous page."`
	JSON   bool   `help:"Same as -o json." hidden:""`
}

// Run prints one page.
func (c *ListCmd) Run(g *Globals) error {
	if c.Limit < 1 || c.Limit > 1000 {
		return fmt.Errorf("--limit: must be in [1, 1000], got %d", c.Limit)
	}
	page, err := c.client().List(g.Ctx, c.Status, c.Type, c.Limit, c.Cursor)
	if err != nil {
		return err
	}
	if c.JSON {
		c.Output = "json"
	}
	return c.show(page, func(w io.Writer) {
		jobsTable(w, page.Jobs)
		if page.NextCursor != "" {
			fmt.Fprintf(w, "next page: --cursor %s\n", page.NextCursor)
		}
	})
}

// CancelCmd cancels a job.
type CancelCmd struct {
	ServerFlags
	OutputFlags
	ID uint64 `arg:"" help:"Job id."`
}

// Run cancels the job.
func (c *CancelCmd) Run(g *Globals) error {
	job, err := c.client().Cancel(g.Ctx, c.ID)
	if err != nil {
		return err
	}
	return c.show(job, func(w io.Writer) { jobTable(w, job) })
}

// RetryCmd re-queues one job, or in bulk every job with --status (and --type).
type RetryCmd struct {
	ServerFlags
	OutputFlags
	ID     *uint64 `arg:"" optional:"" help:"Job id (omit with --status for a bulk retry)."`
	Status string  `help:"Bulk: re-queue every job in this status." enum:"FAILED,CANCELED," default:""`
	Type   string  `help:"Bulk: only jobs of this job_type."`
}

// Run re-queues the job, or the selected jobs.
func (c *RetryCmd) Run(g *Globals) error {
	switch {
	case c.ID == nil && c.Status == "":
		return errors.New("retry: give a job id, or --status FAILED|CANCELED [--type T] for a bulk retry")
	case c.ID != nil && (c.Status != "" || c.Type != ""):
		return errors.New("retry: give either a job id or --status/--type, not both")
	case c.ID == nil:
		return retryBulk(g, c.ServerFlags, c.OutputFlags, c.Status, c.Type)
	}
	job, err := c.client().Retry(g.Ctx, *c.ID)
	if err != nil {
		return err
	}
	return c.show(job, func(w io.Writer) { jobTable(w, job) })
}

// ExecutionsCmd lists attempts.
type ExecutionsCmd struct {
	ServerFlags
	OutputFlags
	ID uint64 `arg:"" help:"Job id."`
}

// Run prints the attempts.
func (c *ExecutionsCmd) Run(g *Globals) error {
	ex, err := c.client().Executions(g.Ctx, c.ID)
	if err != nil {
		return err
	}
	// The same shape as GET /v1/jobs/{id}/executions, as list prints {"jobs":[…]}.
	return c.show(apitype.ExecutionList{Executions: ex}, func(w io.Writer) { executionsTable(w, ex) })
}
