package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/chaos"
	"github.com/jobq/jobq/testbed/chaos/checker"
)

// CheckCmd is `jobq check HISTORY`: the chaos checker on any scheduler's
// history.
type CheckCmd struct {
	History        string        `arg:"" optional:"" help:"History file: NDJSON (docs/chaos.md, \"Checking another scheduler's history\") or, with --format csv, a plain start/end log per job. Omit it with --dsn." placeholder:"HISTORY"`
	Format         string        `help:"History format: ndjson, csv, or auto (csv for *.csv, else ndjson)." enum:"auto,ndjson,csv" default:"auto"`
	DSN            string        `help:"Read the history from a jobq database's own tables instead of a file (DSN naming the database)." placeholder:"DSN"`
	Lease          time.Duration `help:"The scheduler's lease (or run timeout) for csv and --dsn histories; NDJSON histories carry their own." default:"30s"`
	RescueInterval time.Duration `help:"The scheduler's rescue interval for csv and --dsn histories." default:"1s"`
	WriteNDJSON    string        `name:"write-ndjson" help:"Also write the judged history as NDJSON to this path (converts csv and --dsn histories)." placeholder:"PATH"`
	JSON           bool          `help:"Print the checker's result as JSON instead of the verdict table."`
}

// errViolations is returned (exit 1) when the history breaks a check.
var errViolations = errors.New("check: history is INVALID")

// Run loads the history, judges it, prints the verdict table (or JSON) and
// fails when any check is violated.
func (c *CheckCmd) Run(g *Globals) error {
	h, src, err := c.load(g.Ctx)
	if err != nil {
		return err
	}
	if c.WriteNDJSON != "" {
		if err := checker.WriteNDJSONFile(c.WriteNDJSON, h); err != nil {
			return fmt.Errorf("check: --write-ndjson: %w", err)
		}
	}
	r := checker.Check(h)
	if c.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		PrintCheckTable(os.Stdout, src, h, r)
	}
	if !r.Valid {
		var what []string
		for _, v := range r.Violations {
			what = append(what, fmt.Sprintf("%s=%d", v.Check, v.Count))
		}
		return fmt.Errorf("%w: %s", errViolations, strings.Join(what, ", "))
	}
	return nil
}

func (c *CheckCmd) load(ctx context.Context) (checker.History, string, error) {
	switch {
	case c.DSN != "" && c.History != "":
		return checker.History{}, "", fmt.Errorf("check: give HISTORY or --dsn, not both")
	case c.DSN != "":
		mc, err := store.NormalizeDSN(c.DSN)
		if err != nil {
			return checker.History{}, "", fmt.Errorf("check: --dsn: %w", err)
		}
		db, err := sql.Open("mysql", mc.FormatDSN())
		if err != nil {
			return checker.History{}, "", fmt.Errorf("check: --dsn: %w", err)
		}
		defer db.Close()
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		h, err := chaos.HistoryFromTables(lctx, db, c.Lease, c.RescueInterval)
		if err != nil {
			return h, "", fmt.Errorf("check: %w", err)
		}
		return h, "jobq tables", nil
	case c.History == "":
		return checker.History{}, "", fmt.Errorf("check: HISTORY is required (or --dsn)")
	}
	format := c.Format
	if format == "auto" {
		format = "ndjson"
		if strings.EqualFold(filepath.Ext(c.History), ".csv") {
			format = "csv"
		}
	}
	if format == "ndjson" {
		h, err := checker.ReadNDJSONFile(c.History)
		if err != nil {
			return h, "", fmt.Errorf("check: %w", err)
		}
		return h, c.History, nil
	}
	f, err := os.Open(c.History)
	if err != nil {
		return checker.History{}, "", fmt.Errorf("check: %w", err)
	}
	defer f.Close()
	h, err := checker.ReadCSV(f, c.Lease)
	if err != nil {
		return h, "", fmt.Errorf("check: %s: %w", c.History, err)
	}
	return h, c.History + " (csv)", nil
}

// PrintCheckTable prints the verdict table: one row per check with PASS or
// FAIL, its count and its first example, then the totals.
func PrintCheckTable(w io.Writer, src string, h checker.History, r *checker.Result) {
	verdict := "VALID"
	if !r.Valid {
		verdict = "INVALID"
	}
	c := r.Counts
	fmt.Fprintf(w, "history %s: %s — %d submitted, %d acknowledged, %d completed, %d executions, %d faults (lease %s)\n\n",
		src, verdict, c.Submitted, c.Acknowledged, c.Completed, c.Executions, len(h.Faults), h.Lease)
	viol := map[string]checker.Violation{}
	for _, v := range r.Violations {
		viol[v.Check] = v
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tverdict\tcount\tfirst example")
	for _, name := range checker.Checks() {
		v, bad := viol[name]
		if !bad {
			fmt.Fprintf(tw, "%s\tPASS\t0\t\n", name)
			continue
		}
		ex := ""
		if len(v.Examples) > 0 {
			ex = v.Examples[0]
		}
		fmt.Fprintf(tw, "%s\tFAIL\t%d\t%s\n", name, v.Count, ex)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nreported, not violations: stale completions refused %d, rescued %d, non-tx effects repeated on %d jobs (%d explained), pickup p99 %.0f ms\n",
		c.StaleCompletionsRefused, c.Rescued, r.NonTx.DuplicatedJobs, r.NonTx.Explained, r.Pickup.P99)
}
