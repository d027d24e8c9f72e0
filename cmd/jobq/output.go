package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/jobq/jobq/apitype"
)

// OutputFlags choose how a command prints what it read.
type OutputFlags struct {
	Output string `short:"o" help:"Output format: table or json. Defaults to table when stdout is a terminal, json otherwise." enum:"table,json," default:"" placeholder:"table|json"`
}

// isTerminal reports whether f is a terminal (not a pipe, file or log).
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// asJSON reports whether to print JSON: -o json, or no -o and stdout is
// not a terminal.
func (f OutputFlags) asJSON() bool {
	if f.Output == "" {
		return !isTerminal(os.Stdout)
	}
	return f.Output == "json"
}

// show prints v as indented JSON or, for a table, calls table with a
// tabwriter on stdout.
func (f OutputFlags) show(v any, table func(w io.Writer)) error {
	if f.asJSON() {
		return printJSON(v)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

const tableTime = "2006-01-02T15:04:05.000Z"

func fmtTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(tableTime)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table cell on one line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 80 {
		return string(r[:79]) + "…"
	}
	return orDash(s)
}

// jobTable prints one job as FIELD value lines.
func jobTable(w io.Writer, j apitype.Job) {
	fmt.Fprintf(w, "id\t%d\n", j.ID)
	fmt.Fprintf(w, "job_key\t%s\n", j.JobKey)
	fmt.Fprintf(w, "job_type\t%s\n", j.JobType)
	fmt.Fprintf(w, "params\t%s\n", oneLine(string(j.Params)))
	status := string(j.Status)
	if j.CancelRequested && !j.Terminal() {
		status += " (cancel requested)"
	}
	fmt.Fprintf(w, "status\t%s\n", status)
	fmt.Fprintf(w, "priority\t%d\n", j.Priority)
	fmt.Fprintf(w, "attempt\t%d\n", j.Attempt)
	fmt.Fprintf(w, "retries\t%d/%d\n", j.RetryTimes, j.MaxRetry)
	if j.TimeoutMs > 0 {
		fmt.Fprintf(w, "timeout\t%s\n", time.Duration(j.TimeoutMs)*time.Millisecond)
	}
	if j.ConcurrencyKey != "" {
		fmt.Fprintf(w, "concurrency_key\t%s\n", j.ConcurrencyKey)
	}
	if j.RateKey != "" {
		fmt.Fprintf(w, "rate_key\t%s\n", j.RateKey)
	}
	fmt.Fprintf(w, "run_at\t%s\n", fmtTime(&j.RunAt))
	fmt.Fprintf(w, "owner\t%s\n", orDash(j.Owner))
	fmt.Fprintf(w, "lease_until\t%s\n", fmtTime(j.LeaseUntil))
	fmt.Fprintf(w, "started_at\t%s\n", fmtTime(j.StartedAt))
	fmt.Fprintf(w, "finished_at\t%s\n", fmtTime(j.FinishedAt))
	fmt.Fprintf(w, "last_error\t%s\n", oneLine(j.LastError))
	if len(j.Output) > 0 {
		fmt.Fprintf(w, "output\t%s\n", oneLine(string(j.Output)))
	}
	fmt.Fprintf(w, "created\t%s\n", fmtTime(&j.CreateTime))
}

func jobsTable(w io.Writer, jobs []apitype.Job) {
	fmt.Fprintln(w, "ID\tKEY\tTYPE\tSTATUS\tATTEMPT\tRETRIES\tRUN_AT")
	for _, j := range jobs {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d/%d\t%s\n", j.ID, j.JobKey, j.JobType, j.Status, j.Attempt, j.RetryTimes, j.MaxRetry, fmtTime(&j.RunAt))
	}
}

func executionsTable(w io.Writer, ex []apitype.Execution) {
	fmt.Fprintln(w, "ATTEMPT\tOWNER\tSTARTED\tDURATION\tOUTCOME\tPROGRESS\tERROR\tOUTPUT")
	for _, e := range ex {
		d := "running"
		if e.FinishedAt != nil {
			d = e.FinishedAt.Sub(e.StartedAt).Round(time.Millisecond).String()
		}
		progress := "-"
		if e.Progress != nil {
			progress = fmt.Sprintf("%.0f%%", *e.Progress*100)
			if e.ProgressMessage != "" {
				progress += " " + e.ProgressMessage
			}
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Attempt, e.Owner, fmtTime(&e.StartedAt), d, orDash(string(e.Outcome)),
			oneLine(progress), oneLine(e.Error), oneLine(string(e.Output)))
	}
}

func typesTable(w io.Writer, ts []apitype.TypeControl) {
	fmt.Fprintln(w, "TYPE\tPAUSED\tMAX_RUNNING\tRATE_LIMIT\tUPDATED")
	for _, t := range ts {
		limit, rate := "none", "none"
		if t.MaxRunning > 0 {
			limit = fmt.Sprint(t.MaxRunning)
		}
		if t.RateLimit != nil {
			rate = fmt.Sprintf("%d/%s", t.RateLimit.Starts, t.RateLimit.Period)
			if t.RateLimit.PerKey {
				rate += " per key"
			}
		}
		fmt.Fprintf(w, "%s\t%t\t%s\t%s\t%s\n", t.JobType, t.Paused, limit, rate, fmtTime(&t.UpdateTime))
	}
}

func periodicTable(w io.Writer, ps []apitype.Periodic) {
	fmt.Fprintln(w, "NAME\tCRON\tTYPE\tMISFIRE\tOVERLAP\tNEXT_RUN\tLAST_RUN\tSOURCE")
	for _, p := range ps {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Cron, p.JobType, p.Misfire, cmp.Or(p.Overlap, "allow"),
			fmtTime(&p.NextRunAt), fmtTime(p.LastRunAt), p.Source)
	}
}
