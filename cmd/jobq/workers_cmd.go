package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
)

// LogsCmd prints a job's attempt log.
type LogsCmd struct {
	ServerFlags
	ID      uint64        `arg:"" help:"Job id."`
	Attempt int           `help:"Attempt whose log to print (0: the latest attempt with a log)." default:"0"`
	Follow  bool          `short:"f" help:"Keep printing new lines until the job is finished (SUCCESS, FAILED or CANCELED)."`
	Poll    time.Duration `help:"How often --follow asks for new lines." default:"1s"`
}

// Run prints the log lines (with --follow, until the job is terminal).
func (c *LogsCmd) Run(g *Globals) error {
	cl := client.New(c.Server)
	cl.Token = c.Token
	attempt, after := c.Attempt, 0
	for {
		page, err := cl.JobLogs(g.Ctx, c.ID, attempt, after)
		if err != nil {
			return err
		}
		if attempt == 0 && page.Attempt > 0 {
			attempt = page.Attempt // follow the attempt the first page found
		}
		for _, l := range page.Lines {
			fmt.Printf("%s  %s\n", l.Time.UTC().Format(tableTime), l.Line)
		}
		after = page.NextAfter
		if len(page.Lines) > 0 {
			continue // there may be more pages
		}
		if !c.Follow {
			return nil
		}
		job, err := cl.Get(g.Ctx, c.ID)
		if err != nil {
			return err
		}
		if job.Terminal() {
			// One more page: lines appended before the outcome.
			page, err := cl.JobLogs(g.Ctx, c.ID, attempt, after)
			if err != nil {
				return err
			}
			for _, l := range page.Lines {
				fmt.Printf("%s  %s\n", l.Time.UTC().Format(tableTime), l.Line)
			}
			return nil
		}
		if attempt > 0 && job.Attempt > attempt && c.Attempt == 0 {
			fmt.Fprintf(os.Stderr, "jobq logs: attempt %d started\n", job.Attempt)
			attempt, after = job.Attempt, 0
		}
		select {
		case <-g.Ctx.Done():
			return nil
		case <-time.After(c.Poll):
		}
	}
}

// WorkersCmd lists the live remote workers.
type WorkersCmd struct {
	ServerFlags
	OutputFlags
}

// Run prints the workers.
func (c *WorkersCmd) Run(g *Globals) error {
	cl := client.New(c.Server)
	cl.Token = c.Token
	list, err := cl.ListWorkers(g.Ctx)
	if err != nil {
		return err
	}
	return c.show(list, func(w io.Writer) { workersTable(w, list.Workers) })
}

func workersTable(w io.Writer, ws []apitype.Worker) {
	fmt.Fprintln(w, "WORKER\tTYPES\tRUNS\tLAST_FETCH\tLAST_HEARTBEAT\tVERSION\tLABELS")
	for _, x := range ws {
		labels := make([]string, 0, len(x.Labels))
		for k, v := range x.Labels {
			labels = append(labels, k+"="+v)
		}
		sort.Strings(labels)
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", x.WorkerID, orDash(strings.Join(x.JobTypes, ",")), x.RunsInFlight,
			fmtTime(x.LastFetch), fmtTime(x.LastHeartbeat), orDash(x.Version), orDash(strings.Join(labels, ",")))
	}
}
