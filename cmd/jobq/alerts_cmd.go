package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jobq/jobq/apitype"
)

// AlertsCmd manages alert rules (/v1/alerts, HTTP transport).
type AlertsCmd struct {
	Add        AlertsAddCmd        `cmd:"" help:"Create an alert rule: a job type or a schedule, a condition, a webhook."`
	List       AlertsListCmd       `cmd:"" help:"List alert rules."`
	Delete     AlertsDeleteCmd     `cmd:"" help:"Delete an alert rule (its deliveries stay)."`
	Deliveries AlertsDeliveriesCmd `cmd:"" help:"List the newest deliveries of a rule (or of every rule): status, attempts, last error."`
}

// AlertsAddCmd creates a rule.
type AlertsAddCmd struct {
	ServerFlags
	OutputFlags
	Name      string        `help:"Rule name: 1-64 letters, digits, '.', '_', '-' (unique)." required:""`
	Type      string        `help:"The job type it watches (conditions job_failed, job_running_longer)."`
	Schedule  string        `help:"The periodic schedule it watches (conditions schedule_missed, schedule_skipped)."`
	Condition string        `help:"job_failed, job_running_longer, schedule_missed or schedule_skipped." required:"" enum:"job_failed,job_running_longer,schedule_missed,schedule_skipped"`
	Longer    time.Duration `help:"job_running_longer: the running time, e.g. 10m."`
	URL       string        `help:"Webhook URL (loopback, link-local and cloud metadata addresses are refused)." required:""`
	Preset    string        `help:"Body shape: webhook (jobq's JSON), slack, dingtalk, wecom, feishu." default:"webhook"`
	Secret    string        `help:"Name of the signing secret in the replicas' --alert-secret-file." default:"alerts"`
}

// Run creates the rule.
func (c *AlertsAddCmd) Run(g *Globals) error {
	r, err := c.httpClient().CreateAlert(g.Ctx, apitype.AlertRuleRequest{Name: c.Name, JobType: c.Type, Schedule: c.Schedule,
		Condition: c.Condition, ThresholdMs: c.Longer.Milliseconds(), URL: c.URL, Preset: c.Preset, Secret: c.Secret})
	if err != nil {
		return err
	}
	return c.show(r, func(w io.Writer) { alertTable(w, []apitype.AlertRule{r}) })
}

// AlertsListCmd lists the rules.
type AlertsListCmd struct {
	ServerFlags
	OutputFlags
}

// Run lists the rules.
func (c *AlertsListCmd) Run(g *Globals) error {
	rs, err := c.httpClient().Alerts(g.Ctx)
	if err != nil {
		return err
	}
	return c.show(rs, func(w io.Writer) { alertTable(w, rs) })
}

func alertTable(w io.Writer, rs []apitype.AlertRule) {
	fmt.Fprintln(w, "ID\tNAME\tWATCHES\tCONDITION\tPRESET\tURL")
	for _, r := range rs {
		watch, cond := "type "+r.JobType, r.Condition
		if r.Schedule != "" {
			watch = "schedule " + r.Schedule
		}
		if r.ThresholdMs > 0 {
			cond += " " + (time.Duration(r.ThresholdMs) * time.Millisecond).String()
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Name, watch, cond, r.Preset, r.URL)
	}
}

// AlertsDeleteCmd deletes a rule.
type AlertsDeleteCmd struct {
	ServerFlags
	ID uint64 `arg:"" help:"Rule id (jobq alerts list)."`
}

// Run deletes the rule.
func (c *AlertsDeleteCmd) Run(g *Globals) error {
	if err := c.httpClient().DeleteAlert(g.Ctx, c.ID); err != nil {
		return err
	}
	fmt.Printf("deleted alert rule %d\n", c.ID)
	return nil
}

// AlertsDeliveriesCmd lists deliveries.
type AlertsDeliveriesCmd struct {
	ServerFlags
	OutputFlags
	ID    uint64 `arg:"" optional:"" help:"Rule id (0 or none: every rule)."`
	Limit int    `help:"Most deliveries shown (1-1000)." default:"100"`
}

// Run lists the deliveries.
func (c *AlertsDeliveriesCmd) Run(g *Globals) error {
	ds, err := c.httpClient().AlertDeliveries(g.Ctx, c.ID, c.Limit)
	if err != nil {
		return err
	}
	return c.show(ds, func(w io.Writer) {
		fmt.Fprintln(w, "ID\tRULE\tSTATUS\tATTEMPTS\tLAST\tDEDUPE KEY\tLAST ERROR")
		for _, d := range ds {
			fmt.Fprintf(w, "%d\t%d\t%s\t%d\t%s\t%s\t%s\n", d.ID, d.RuleID, d.Status, d.Attempts, strconv.Itoa(d.LastStatus), d.DedupeKey, d.LastError)
		}
	})
}
