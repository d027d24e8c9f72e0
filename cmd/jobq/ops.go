package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/service"
)

// OpsFlags configure a replica's operations services (`jobq serve`).
type OpsFlags struct {
	Periodic         []string      `help:"Periodic schedule 'name=cron;job_type[;params[;misfire[;overlap]]]', e.g. 'nightly=0 0 3 * * *;backup;{\"db\":\"main\"};once;skip' (repeatable; cron in UTC, seconds field optional; misfire skip|once, default skip; overlap allow|skip|queue_one|cancel_previous, default allow)." sep:"none" placeholder:"SPEC" group:"Operations"`
	PeriodicFile     string        `help:"File of periodic schedules, one SPEC per line (# comments)." type:"existingfile" placeholder:"FILE" group:"Operations"`
	Retention        string        `help:"Delete SUCCESS/FAILED/CANCELED jobs (and their executions) finished longer ago than this, e.g. 7d or 36h; empty keeps every job." placeholder:"AGE" group:"Operations"`
	CleanInterval    time.Duration `help:"How often the retention cleaner runs." default:"${clean_interval}" group:"Operations"`
	OpsRefresh       time.Duration `help:"How often limited job types and periodic schedules are re-read from the database." default:"${ops_refresh}" group:"Operations"`
	MisfireThreshold time.Duration `help:"How late a periodic instant may fire and still count as on time." default:"${misfire_threshold}" group:"Operations"`
}

// OpsConfig maps the flags to scheduler.OpsConfig.
func (f OpsFlags) OpsConfig() (scheduler.OpsConfig, error) {
	cfg := scheduler.OpsConfig{CleanInterval: f.CleanInterval, RefreshInterval: f.OpsRefresh, MisfireThreshold: f.MisfireThreshold}
	if f.Retention != "" {
		age, err := service.ParseAge(f.Retention)
		if err != nil || age <= 0 {
			return cfg, fmt.Errorf("--retention: must be a positive age such as 7d or 36h, got %q", f.Retention)
		}
		cfg.Retention = age
	}
	return cfg, nil
}

// PeriodicRequests parses --periodic and --periodic-file.
func (f OpsFlags) PeriodicRequests() ([]apitype.PeriodicRequest, error) {
	specs := append([]string(nil), f.Periodic...)
	if f.PeriodicFile != "" {
		file, err := os.Open(f.PeriodicFile)
		if err != nil {
			return nil, fmt.Errorf("--periodic-file: %w", err)
		}
		defer file.Close()
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
				specs = append(specs, line)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("--periodic-file: %w", err)
		}
	}
	out := make([]apitype.PeriodicRequest, 0, len(specs))
	for _, s := range specs {
		req, err := service.ParsePeriodicSpec(s)
		if err != nil {
			return nil, fmt.Errorf("--periodic: %w", err)
		}
		out = append(out, req)
	}
	return out, nil
}

// opsAPI is what the operations commands call: *client.Client (HTTP
// routes) or *client.GRPCClient (OpsService).
type opsAPI interface {
	SetPaused(ctx context.Context, jobType string, paused bool) (apitype.TypeControl, error)
	SetLimit(ctx context.Context, jobType string, maxRunning int) (apitype.TypeControl, error)
	SetRateLimit(ctx context.Context, jobType string, starts int, period string, perKey bool) (apitype.TypeControl, error)
	ClearRateLimit(ctx context.Context, jobType string) (apitype.TypeControl, error)
	Types(ctx context.Context) ([]apitype.TypeControl, error)
	PutPeriodic(ctx context.Context, req apitype.PeriodicRequest) (apitype.Periodic, bool, error)
	ListPeriodic(ctx context.Context) ([]apitype.Periodic, error)
	DeletePeriodic(ctx context.Context, name string) error
	RetryBulk(ctx context.Context, req apitype.RetryBulkRequest) (apitype.RetryBulkResult, error)
	Purge(ctx context.Context, olderThan string) (apitype.PurgeResult, error)
	Stats(ctx context.Context, window string) (apitype.QueueStats, error)
}

// opsClient returns the operations client of the chosen transport.
func (f ServerFlags) opsClient() (opsAPI, error) {
	if f.Transport == "grpc" {
		c := client.NewGRPC(f.Server)
		c.Token = f.Token
		return c, nil
	}
	c := client.New(f.Server)
	c.Token = f.Token
	return c, nil
}

// StatsCmd prints counts by status and type, the oldest waiting age and recent rates.
type StatsCmd struct {
	ServerFlags
	OutputFlags
	Window string `help:"Span of the recent counts and rates, 1s–1h." default:"1m"`
	JSON   bool   `help:"Same as -o json." hidden:""`
}

// Run prints the stats.
func (c *StatsCmd) Run(g *Globals) error {
	cl, err := c.opsClient()
	if err != nil {
		return err
	}
	st, err := cl.Stats(g.Ctx, c.Window)
	if err != nil {
		return err
	}
	if c.JSON {
		c.Output = "json"
	}
	if c.asJSON() {
		return printJSON(st)
	}
	fmt.Printf("database clock  %s\n", st.DBNow.Format(time.RFC3339Nano))
	statuses := make([]string, len(jobq.JobStates))
	for i, s := range jobq.JobStates {
		statuses[i] = string(s)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TYPE\t"+strings.Join(statuses, "\t")+"\t")
	byType := map[string]map[string]int64{}
	for _, c := range st.ByTypeStatus {
		if byType[c.JobType] == nil {
			byType[c.JobType] = map[string]int64{}
		}
		byType[c.JobType][string(c.Status)] = c.Count
	}
	types := make([]string, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	sort.Strings(types)
	row := func(name string, m map[string]int64) {
		fmt.Fprint(tw, name+"\t")
		for _, s := range statuses {
			fmt.Fprintf(tw, "%d\t", m[s])
		}
		fmt.Fprintln(tw)
	}
	for _, t := range types {
		row(t, byType[t])
	}
	row("(all)", st.ByStatus)
	tw.Flush()
	if st.OldestWaitingSeconds != nil {
		fmt.Printf("oldest waiting  %.3fs due\n", *st.OldestWaitingSeconds)
	} else {
		fmt.Println("oldest waiting  none due")
	}
	// Finished counts attempts (job_attempt rows) by outcome, not jobs: a
	// job that failed once and then succeeded is one FAILED and one SUCCESS
	// attempt beside one SUCCESS job in the table above.
	outcomes := make([]string, 0, len(st.Finished))
	for o := range st.Finished {
		outcomes = append(outcomes, o)
	}
	sort.Strings(outcomes)
	var parts []string
	for _, o := range outcomes {
		if n := st.Finished[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", o, n))
		}
	}
	fmt.Printf("last %s        jobs created %d (%.2f/s), attempts finished %d (%.2f/s) by outcome [%s]\n", time.Duration(st.WindowSeconds*float64(time.Second)),
		st.Created, st.CreatedPerSecond, sumCounts(st.Finished), st.FinishedPerSecond, strings.Join(parts, ", "))
	return nil
}

func sumCounts(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// PauseCmd pauses a job type.
type PauseCmd struct {
	ServerFlags
	OutputFlags
	Type string `arg:"" help:"Job type: no replica claims it until resumed; running jobs finish."`
}

// Run pauses the type.
func (c *PauseCmd) Run(g *Globals) error {
	return setPaused(g, c.ServerFlags, c.OutputFlags, c.Type, true)
}

// ResumeCmd resumes a job type.
type ResumeCmd struct {
	ServerFlags
	OutputFlags
	Type string `arg:"" help:"Job type to resume."`
}

// Run resumes the type.
func (c *ResumeCmd) Run(g *Globals) error {
	return setPaused(g, c.ServerFlags, c.OutputFlags, c.Type, false)
}

func setPaused(g *Globals, f ServerFlags, o OutputFlags, jobType string, paused bool) error {
	cl, err := f.opsClient()
	if err != nil {
		return err
	}
	tc, err := cl.SetPaused(g.Ctx, jobType, paused)
	if err != nil {
		return err
	}
	return o.show(tc, func(w io.Writer) { typesTable(w, []apitype.TypeControl{tc}) })
}

// LimitCmd sets a job type's cluster-wide concurrency limit.
type LimitCmd struct {
	ServerFlags
	OutputFlags
	Type       string `arg:"" help:"Job type."`
	MaxRunning int    `arg:"" help:"Most RUNNING jobs of the type across all replicas, 0–100000; 0 removes the limit."`
}

// Run sets the limit.
func (c *LimitCmd) Run(g *Globals) error {
	cl, err := c.opsClient()
	if err != nil {
		return err
	}
	tc, err := cl.SetLimit(g.Ctx, c.Type, c.MaxRunning)
	if err != nil {
		return err
	}
	return c.show(tc, func(w io.Writer) { typesTable(w, []apitype.TypeControl{tc}) })
}

// RateLimitCmd sets or clears a job type's cluster-wide rate limit.
type RateLimitCmd struct {
	ServerFlags
	OutputFlags
	Type   string `arg:"" help:"Job type."`
	Starts int    `help:"Most starts of the type in any window of --per, across all replicas, 1–1000000." default:"0"`
	Per    string `help:"The window's length, a duration from 1ms to 24h (1s, 500ms, 1m)." default:"1s"`
	PerKey bool   `help:"Apply the limit to each rate key of the type on its own (the jobs' rate_key, set with submit --rate-key); jobs without one share one window."`
	Clear  bool   `help:"Remove the type's rate limit instead."`
}

// Run sets or clears the rate limit.
func (c *RateLimitCmd) Run(g *Globals) error {
	cl, err := c.opsClient()
	if err != nil {
		return err
	}
	var tc apitype.TypeControl
	if c.Clear {
		tc, err = cl.ClearRateLimit(g.Ctx, c.Type)
	} else {
		tc, err = cl.SetRateLimit(g.Ctx, c.Type, c.Starts, c.Per, c.PerKey)
	}
	if err != nil {
		return err
	}
	return c.show(tc, func(w io.Writer) { typesTable(w, []apitype.TypeControl{tc}) })
}

// TypesCmd lists every job type ever paused or limited, and sets rate
// limits (limit-rate).
type TypesCmd struct {
	List      TypesListCmd `cmd:"" default:"withargs" hidden:"" help:"List every job type ever paused or limited."`
	LimitRate RateLimitCmd `cmd:"" name:"limit-rate" help:"Set a job type's cluster-wide rate limit: at most --starts starts in any window of --per, of the type or of each rate key (--per-key); --clear removes it."`
}

// TypesListCmd lists every job type ever paused or limited.
type TypesListCmd struct {
	ServerFlags
	OutputFlags
}

// Run lists the control rows.
func (c *TypesListCmd) Run(g *Globals) error {
	cl, err := c.opsClient()
	if err != nil {
		return err
	}
	ts, err := cl.Types(g.Ctx)
	if err != nil {
		return err
	}
	return c.show(ts, func(w io.Writer) { typesTable(w, ts) })
}

// PeriodicCmd manages periodic schedules.
type PeriodicCmd struct {
	Add  PeriodicAddCmd  `cmd:"" help:"Create or replace a schedule."`
	List PeriodicListCmd `cmd:"" help:"List schedules."`
	Rm   PeriodicRmCmd   `cmd:"" help:"Delete a schedule (its jobs stay)."`
	// History prints the schedule's fire ledger.
	History PeriodicHistoryCmd `cmd:"" help:"Show what became of a schedule's recent instants (fired, late, skipped), newest first."`
}

// PeriodicAddCmd creates or replaces a schedule.
type PeriodicAddCmd struct {
	ServerFlags
	OutputFlags
	Name      string `help:"Schedule name: 1–40 letters, digits, '_', '.', '-'; jobs are keyed <name>@<instant>." required:""`
	Cron      string `help:"Cron expression (UTC unless CRON_TZ=…): 5 fields, 6 with leading seconds, or @every 10s / @hourly." required:""`
	Type      string `help:"job_type of the jobs (required without --workflow-file)."`
	Params    string `help:"params of the jobs (a JSON object)." default:"{}"`
	Priority  *int   `help:"priority 0–1000 (default 0)."`
	MaxRetry  *int   `help:"max_retry 0–100 (default 3)."`
	TimeoutMs *int   `help:"timeout_ms per attempt, 0 = none."`
	Misfire   string `help:"Instants missed while every replica was down: skip (none runs) or once (one catch-up run)." enum:"skip,once" default:"skip"`
	Overlap   string `help:"What an instant does while the previous run is not finished: allow (it runs too), skip (it is skipped), queue_one (it waits for the previous run; one waits at most) or cancel_previous." enum:"allow,skip,queue_one,cancel_previous" default:"allow"`
	// WorkflowFile makes each instant start a workflow instead of a job.
	WorkflowFile string `help:"Start a workflow at each instant instead of one job: a JSON file {\"jobs\": [...]} with the jobs of POST /v1/workflows (docs/workflows.md); replaces --type and --params." type:"existingfile" name:"workflow-file"`
}

// Run creates or replaces the schedule.
func (c *PeriodicAddCmd) Run(g *Globals) error {
	cl, err := c.opsClient()
	if err != nil {
		return err
	}
	req := apitype.PeriodicRequest{Name: c.Name, Cron: c.Cron, JobType: c.Type,
		Params: json.RawMessage(c.Params), Priority: c.Priority, MaxRetry: c.MaxRetry, TimeoutMs: c.TimeoutMs, Misfire: c.Misfire,
		Overlap: c.Overlap}
	if c.WorkflowFile != "" {
		if c.Transport == "grpc" {
			return fmt.Errorf("--workflow-file: workflow schedules are put over HTTP/JSON (--transport http)")
		}
		b, err := os.ReadFile(c.WorkflowFile)
		if err != nil {
			return err
		}
		var wf apitype.PeriodicWorkflow
		if err := json.Unmarshal(b, &wf); err != nil {
			return fmt.Errorf("--workflow-file: %w", err)
		}
		req.Workflow, req.Params = &wf, nil
	} else if c.Type == "" {
		return fmt.Errorf("--type: required without --workflow-file")
	}
	p, created, err := cl.PutPeriodic(g.Ctx, req)
	if err != nil {
		return err
	}
	if !created {
		fmt.Fprintln(os.Stderr, "replaced the existing schedule")
	}
	return c.show(p, func(w io.Writer) { periodicTable(w, []apitype.Periodic{p}) })
}

// PeriodicListCmd lists schedules.
type PeriodicListCmd struct {
	ServerFlags
	OutputFlags
}

// Run lists the schedules.
func (c *PeriodicListCmd) Run(g *Globals) error {
	cl, err := c.opsClient()
	if err != nil {
		return err
	}
	ps, err := cl.ListPeriodic(g.Ctx)
	if err != nil {
		return err
	}
	return c.show(ps, func(w io.Writer) { periodicTable(w, ps) })
}

// PeriodicRmCmd deletes a schedule.
type PeriodicRmCmd struct {
	ServerFlags
	Name string `arg:"" help:"Schedule name."`
}

// Run deletes the schedule.
func (c *PeriodicRmCmd) Run(g *Globals) error {
	cl, err := c.opsClient()
	if err != nil {
		return err
	}
	if err := cl.DeletePeriodic(g.Ctx, c.Name); err != nil {
		return err
	}
	fmt.Printf("deleted %s\n", c.Name)
	return nil
}

// PurgeCmd deletes old terminal jobs.
type PurgeCmd struct {
	ServerFlags
	OutputFlags
	OlderThan string `help:"Delete SUCCESS/FAILED/CANCELED jobs finished longer ago than this (e.g. 7d, 36h; at least 1m), with their executions." required:""`
}

// Run purges.
func (c *PurgeCmd) Run(g *Globals) error {
	cl, err := c.opsClient()
	if err != nil {
		return err
	}
	res, err := cl.Purge(g.Ctx, c.OlderThan)
	if err != nil {
		return err
	}
	return c.show(res, func(w io.Writer) {
		fmt.Fprintf(w, "deleted %d jobs and %d executions in %d batches (finished before %s)\n", res.Jobs, res.Executions, res.Batches, fmtTime(&res.Cutoff))
	})
}

// retryBulk runs `jobq retry --status S [--type T]`.
func retryBulk(g *Globals, f ServerFlags, o OutputFlags, status, jobType string) error {
	cl, err := f.opsClient()
	if err != nil {
		return err
	}
	res, err := cl.RetryBulk(g.Ctx, apitype.RetryBulkRequest{Status: status, JobType: jobType})
	if err != nil {
		return err
	}
	return o.show(res, func(w io.Writer) { fmt.Fprintf(w, "re-queued %d %s jobs\n", res.Retried, status) })
}
