package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
)

// WorkflowCmd groups the workflow commands (docs/workflows.md).
type WorkflowCmd struct {
	Submit WorkflowSubmitCmd `cmd:"" help:"Submit a workflow from a JSON file (a POST /v1/workflows body): all its jobs or none."`
	Get    WorkflowGetCmd    `cmd:"" help:"Show a workflow: its jobs, their states, parents and timings."`
	List   WorkflowListCmd   `cmd:"" help:"List workflows, newest first."`
	Cancel WorkflowCancelCmd `cmd:"" help:"Cancel every unfinished job of a workflow."`
	Retry  WorkflowRetryCmd  `cmd:"" help:"Re-run a workflow's FAILED and CANCELED jobs, re-arming their descendants."`
}

func (f ServerFlags) httpClient() *client.Client {
	c := client.New(f.Server)
	c.Token = f.Token
	return c
}

// WorkflowSubmitCmd submits a workflow file.
type WorkflowSubmitCmd struct {
	ServerFlags
	OutputFlags
	File string        `help:"The workflow: a JSON object {\"workflow_key\", \"jobs\": [{job fields…, \"depends_on\": [job_key…]}]} ('-' for stdin)." required:"" placeholder:"workflow.json"`
	Wait time.Duration `help:"Wait up to this long for the workflow to finish; exit 1 unless it ends SUCCESS. 0: do not wait." default:"0"`
}

// Run submits the file and prints the workflow.
func (c *WorkflowSubmitCmd) Run(g *Globals) error {
	var body []byte
	var err error
	if c.File == "-" {
		body, err = io.ReadAll(os.Stdin)
	} else {
		body, err = os.ReadFile(c.File)
	}
	if err != nil {
		return err
	}
	if !json.Valid(body) {
		return fmt.Errorf("%s: not valid JSON", c.File)
	}
	cl := c.httpClient()
	wf, created, err := cl.SubmitWorkflowRaw(g.Ctx, body)
	if err != nil {
		return err
	}
	if !created {
		fmt.Fprintf(os.Stderr, "workflow %s already exists with this request: not submitted again\n", wf.WorkflowKey)
	}
	if c.Wait > 0 {
		deadline := time.Now().Add(c.Wait)
		for wf.Status == "RUNNING" && time.Now().Before(deadline) {
			select {
			case <-g.Ctx.Done():
				return g.Ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
			if wf, err = cl.GetWorkflow(g.Ctx, wf.WorkflowKey); err != nil {
				return err
			}
		}
	}
	if err := c.show(wf, func(w io.Writer) { workflowTable(w, wf) }); err != nil {
		return err
	}
	if c.Wait > 0 && wf.Status != "SUCCESS" {
		return fmt.Errorf("workflow %s is %s", wf.WorkflowKey, wf.Status)
	}
	return nil
}

// WorkflowGetCmd shows one workflow.
type WorkflowGetCmd struct {
	ServerFlags
	OutputFlags
	Key string `arg:"" help:"workflow_key."`
}

// Run prints the workflow.
func (c *WorkflowGetCmd) Run(g *Globals) error {
	wf, err := c.httpClient().GetWorkflow(g.Ctx, c.Key)
	if err != nil {
		return err
	}
	return c.show(wf, func(w io.Writer) { workflowTable(w, wf) })
}

// WorkflowListCmd lists workflows.
type WorkflowListCmd struct {
	ServerFlags
	OutputFlags
	Limit  int    `help:"Page size 1–1000." default:"50"`
	Cursor string `help:"next_cursor of the previous page."`
}

// Run prints one page.
func (c *WorkflowListCmd) Run(g *Globals) error {
	page, err := c.httpClient().ListWorkflows(g.Ctx, c.Limit, c.Cursor)
	if err != nil {
		return err
	}
	return c.show(page, func(w io.Writer) {
		fmt.Fprintln(w, "KEY\tSTATUS\tJOBS\tSUCCEEDED\tRUNNING\tFAILED\tCANCELED\tCREATED")
		for _, s := range page.Workflows {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", s.WorkflowKey, s.Status, s.Jobs, s.Succeeded, s.Running, s.Failed, s.Canceled, fmtTime(&s.CreateTime))
		}
		if page.NextCursor != "" {
			fmt.Fprintf(w, "next: --cursor %s\n", page.NextCursor)
		}
	})
}

// WorkflowCancelCmd cancels a workflow.
type WorkflowCancelCmd struct {
	ServerFlags
	OutputFlags
	Key string `arg:"" help:"workflow_key."`
}

// Run cancels and prints the workflow.
func (c *WorkflowCancelCmd) Run(g *Globals) error {
	wf, err := c.httpClient().CancelWorkflow(g.Ctx, c.Key)
	if err != nil {
		return err
	}
	return c.show(wf, func(w io.Writer) { workflowTable(w, wf) })
}

// WorkflowRetryCmd retries a workflow.
type WorkflowRetryCmd struct {
	ServerFlags
	OutputFlags
	Key string `arg:"" help:"workflow_key."`
}

// Run retries and prints the workflow.
func (c *WorkflowRetryCmd) Run(g *Globals) error {
	res, err := c.httpClient().RetryWorkflow(g.Ctx, c.Key)
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == 409 {
		return fmt.Errorf("%s", ae.Detail.Message)
	}
	if err != nil {
		return err
	}
	return c.show(res, func(w io.Writer) {
		fmt.Fprintf(w, "re-armed %d jobs\n", res.Rearmed)
		workflowTable(w, res.Workflow)
	})
}

func workflowTable(w io.Writer, wf apitype.Workflow) {
	fmt.Fprintf(w, "workflow %s\t%s\tjobs %d\tcreated %s\tstarted %s\tfinished %s\n", wf.WorkflowKey, wf.Status, len(wf.Jobs),
		fmtTime(&wf.CreateTime), fmtTime(wf.StartedAt), fmtTime(wf.FinishedAt))
	fmt.Fprintln(w, "ID\tKEY\tTYPE\tSTATUS\tATTEMPT\tDEPENDS ON\tSTARTED\tFINISHED")
	for _, j := range wf.Jobs {
		deps := strings.Join(j.DependsOn, ",")
		if deps == "" {
			deps = "-"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", j.ID, j.JobKey, j.JobType, j.Status, j.Attempt, deps, fmtTime(j.StartedAt), fmtTime(j.FinishedAt))
	}
}
