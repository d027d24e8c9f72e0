package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
)

// PeriodicHistoryCmd prints one page of a schedule's fire ledger
// (GET /v1/periodic/{name}/history).
type PeriodicHistoryCmd struct {
	ServerFlags
	OutputFlags
	Name  string `arg:"" help:"Schedule name."`
	Limit int    `help:"Instants to show, 1–1000." default:"50"`
}

// Run prints the history.
func (c *PeriodicHistoryCmd) Run(g *Globals) error {
	if c.Transport == "grpc" {
		return fmt.Errorf("periodic history is served over HTTP/JSON (--transport http)")
	}
	cl := client.New(c.Server)
	cl.Token = c.Token
	h, err := cl.PeriodicHistory(g.Ctx, c.Name, c.Limit, time.Time{})
	if err != nil {
		return err
	}
	return c.show(h.History, func(w io.Writer) { fireTable(w, h.History) })
}

// fireTable prints ledger rows: RUN is the job id, or wf:<id> for a
// workflow; COVERS only when a row stands for more than one instant.
func fireTable(w io.Writer, es []apitype.FireEntry) {
	fmt.Fprintln(w, "INSTANT\tFATE\tREASON\tRUN\tLATE_MS\tCOVERS")
	for _, e := range es {
		run := "-"
		switch {
		case e.JobID != 0:
			run = strconv.FormatUint(e.JobID, 10)
		case e.WorkflowID != 0:
			run = "wf:" + strconv.FormatUint(e.WorkflowID, 10)
		}
		reason := e.Reason
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\n", fmtTime(&e.Instant), e.Fate, reason, run, e.LateMs, e.Covers)
	}
}
