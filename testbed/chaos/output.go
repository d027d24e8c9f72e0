package chaos

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/jobq/jobq/testbed/chaos/checker"
)

// SchemaVersion is result.json's schema version; it changes only when a
// field is removed or changes meaning.
const SchemaVersion = 1

// ResultFile is result.json:
//
//	schema_version  int      this schema's version (1)
//	name            string   scenario name
//	valid           bool     true when the checker found no violation
//	config          object   the run's Config (durations in ns)
//	environment     object   go version, os/arch, cpus, database server
//	started_at      RFC 3339 workload start, database clock (UTC)
//	workload_s      float    seconds from the first submit to the last ack
//	drain_s         float    seconds from the end of Duration until every job was terminal (or the drain timeout)
//	fault_errors    []string faults the harness failed to inject or lift
//	result          object   chaos/checker.Result: counts, violations, executions_per_job,
//	                         pickup_latency and end_to_end_latency (ms percentiles), non_tx_effects,
//	                         faults (with unavailability_s, orphans, re_pick_*_s, backlog_*), timeline
//	topology        object   galera3 / primary-replica only: kind, replication, servers, cert_failures,
//	                         bf_aborts, rejoins, failovers (acked_missing, success_lost, rerun, …)
type ResultFile struct {
	SchemaVersion int             `json:"schema_version"`
	Name          string          `json:"name"`
	Valid         bool            `json:"valid"`
	Config        ConfigJSON      `json:"config"`
	Environment   Environment     `json:"environment"`
	StartedAt     time.Time       `json:"started_at"`
	WorkloadS     float64         `json:"workload_s"`
	DrainS        float64         `json:"drain_s"`
	FaultErrors   []string        `json:"fault_errors"`
	Result        *checker.Result `json:"result"`
	// Topology is the galera3 or primary-replica topology's own figures
	// (conflict counts, rejoins, what a failover lost); absent for single.
	Topology *TopologyReport `json:"topology,omitempty"`
	// OutDir is where the run's files are (not serialised).
	OutDir string `json:"-"`
}

// ConfigJSON is the serialisable part of Config.
type ConfigJSON struct {
	Replicas        int      `json:"replicas"`
	Jobs            int      `json:"jobs"`
	DurationS       float64  `json:"duration_s"`
	Rate            float64  `json:"rate_per_s"`
	Runtime         string   `json:"runtime"`
	FlakyFraction   float64  `json:"flaky_fraction"`
	FlakyFailures   int      `json:"flaky_failures"`
	FutureFraction  float64  `json:"future_fraction,omitempty"`
	Workflows       bool     `json:"workflows,omitempty"` // the jobs were submitted as random workflows
	Periodic        string   `json:"periodic,omitempty"`  // a periodic schedule ran beside the workload
	PeriodicOverlap string   `json:"periodic_overlap,omitempty"`
	RateLimited     float64  `json:"rate_limited,omitempty"`     // share of jobs of the rate-limited type
	RateLimit       string   `json:"rate_limit,omitempty"`       // its limit, "N/period"
	ConcurrencyKeys int      `json:"concurrency_keys,omitempty"` // the jobs were spread over this many concurrency keys
	MaxRetry        int      `json:"max_retry"`
	Faults          []string `json:"faults"`
	Rounds          int      `json:"rounds"`
	Schedule        string   `json:"schedule,omitempty"`
	FaultCmds       []string `json:"fault_cmds,omitempty"`
	Seed            uint64   `json:"seed"`
	Strategy        string   `json:"strategy"`
	Sabotage        []string `json:"sabotage"`
	LeaseS          float64  `json:"lease_s"`
	RescueS         float64  `json:"rescue_interval_s"`
	Workers         int      `json:"workers"`
	PauseForS       float64  `json:"pause_for_s"`
	KillRestartS    float64  `json:"kill_restart_delay_s"`
	DBDownS         float64  `json:"db_down_s"`
	PartitionS      float64  `json:"partition_s"`
	LatencyMs       float64  `json:"latency_ms"`
	ResetMs         float64  `json:"reset_ms"`
	ClockSkewS      float64  `json:"clock_skew_s"`
	DrainTimeoutS   float64  `json:"drain_timeout_s"`
	ServeArguments  []string `json:"serve_arguments"`
	Topology        string   `json:"topology"`
	Replication     string   `json:"replication,omitempty"`
	FailoverCutS    float64  `json:"failover_cut_s,omitempty"`
	NodeDownS       float64  `json:"node_down_s,omitempty"`
	IsolateS        float64  `json:"isolate_s,omitempty"`
}

func configJSON(c Config) ConfigJSON {
	cj := ConfigJSON{
		Replicas: c.Replicas, Jobs: c.Jobs, DurationS: c.Duration.Seconds(), Rate: c.Rate, Runtime: c.Runtime,
		FlakyFraction: c.FlakyFraction, FlakyFailures: c.FlakyFailures, FutureFraction: c.FutureFraction, Workflows: c.Workflows, ConcurrencyKeys: c.ConcurrencyKeys,
		Periodic: c.Periodic, PeriodicOverlap: c.PeriodicOverlap, RateLimited: c.RateLimited, RateLimit: rateLimitString(c),
		MaxRetry: c.MaxRetry, Faults: nonNil(c.Faults), Rounds: c.Rounds, Schedule: c.Schedule,
		Seed: c.Seed, Strategy: c.Strategy, Sabotage: nonNil(c.Sabotage), LeaseS: c.Lease.Seconds(), RescueS: c.RescueInterval.Seconds(),
		Workers: c.Workers, PauseForS: c.PauseFor.Seconds(), KillRestartS: c.KillRestartDelay.Seconds(), DBDownS: c.DBDownFor.Seconds(),
		PartitionS: c.PartitionFor.Seconds(), LatencyMs: float64(c.Latency.Milliseconds()), ResetMs: float64(c.ResetFor.Milliseconds()), ClockSkewS: c.ClockSkew.Seconds(),
		DrainTimeoutS: c.DrainTimeout.Seconds(), ServeArguments: c.serveArgs(), Topology: c.Topology, Replication: c.Replication,
	}
	for _, fc := range c.FaultCmds {
		cj.FaultCmds = append(cj.FaultCmds, fmt.Sprintf("name=%s,kind=%s,start=%s,stop=%s,at=%s,for=%s", fc.Name, fc.Kind, fc.Start, fc.Stop, fc.At, fc.For))
	}
	switch c.Topology {
	case TopologyPrimaryReplica:
		cj.FailoverCutS = c.FailoverCut.Seconds()
	case TopologyGalera3:
		cj.NodeDownS, cj.IsolateS = c.NodeDownFor.Seconds(), c.IsolateFor.Seconds()
	}
	return cj
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Environment describes where the run happened.
type Environment struct {
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	CPUs      int    `json:"cpus"`
	Server    string `json:"server"`
	Database  string `json:"database"` // provider description
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func ms(v float64) string { return fmt.Sprintf("%.0f ms", v) }

func secs(v float64) string {
	if v < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2f s", v)
}

// WriteReport writes the Markdown report of rf.
func WriteReport(w io.Writer, rf *ResultFile) {
	r := rf.Result
	c := r.Counts
	verdict := "**VALID** — no violation"
	if !rf.Valid {
		verdict = "**INVALID** — see the violations below"
	}
	fmt.Fprintf(w, "# jobq chaos run `%s` (seed %d)\n\n%s\n\n", rf.Name, rf.Config.Seed, verdict)
	fmt.Fprintf(w, "%d replicas · %d jobs at %.0f/s (%s) · faults %s · lease %.1fs · rescue %.1fs · strategy %s · sabotage %s\n\n",
		rf.Config.Replicas, rf.Config.Jobs, rf.Config.Rate, rf.Config.Runtime, orNone(rf.Config.Faults), rf.Config.LeaseS,
		rf.Config.RescueS, orDefault(rf.Config.Strategy), orNone(rf.Config.Sabotage))
	fmt.Fprintf(w, "Server: %s · %s · %d CPUs · %s\n\n", rf.Environment.Server, rf.Environment.OS, rf.Environment.CPUs, rf.Environment.GoVersion)
	fmt.Fprintln(w, "## Checks")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| check | value | must be |")
	fmt.Fprintln(w, "|---|---:|---|")
	row := func(name string, v int, must string) { fmt.Fprintf(w, "| %s | %d | %s |\n", name, v, must) }
	row("acknowledged", c.Acknowledged, "")
	row("completed (SUCCESS/FAILED/CANCELED)", c.Completed, "= acknowledged")
	row("lost (acknowledged, never terminal)", c.Lost, "0")
	row("acknowledged submits missing (acknowledged, not in job_queue afterwards)", c.AckedMissing, "0")
	row("stuck (RUNNING past lease + rescue interval)", c.Stuck, "0")
	row("duplicated transactional effects", c.TxEffectDuplicates, "0")
	row("overlapping leases", c.OverlappingLeases, "0")
	row("stale completions accepted", c.StaleCompletionsAccepted, "0")
	row("phantom jobs", c.Phantom, "0")
	row("claimed before due", c.ClaimedBeforeDue, "0")
	row("work after lease lost (end marker > loss + lease/2)", c.WorkAfterLeaseLost, "0")
	row("unexplained rescues (no fault on the replica or database)", c.UnexplainedRescues, "0")
	row("unexplained releases (no shutdown or fault on the replica or database)", c.UnexplainedReleases, "0")
	row("jobs without exactly one execution row per started attempt", c.MissingExecutions, "0")
	row("job status contradicts its last execution", c.StatusVsLastExecution, "0")
	row("re-run after an attempt finished its work (no fault explains it)", c.RerunAfterSuccess, "0")
	row("FAILED after an attempt finished its work (no fault explains it)", c.FailedAfterSuccess, "0")
	if c.RescuesAfterSlowRenewal > 0 {
		row("rescues after a renewal the database did not answer in time (machine load)", c.RescuesAfterSlowRenewal, "")
	}
	if c.RescuesAfterStall > 0 {
		row("rescues after a replica stall (its heartbeat was not run in time: machine load)", c.RescuesAfterStall, "")
	}
	if c.ReleasesAfterSlowRenewal > 0 {
		row("releases after a renewal the database did not answer in time (machine load)", c.ReleasesAfterSlowRenewal, "")
	}
	if c.ReleasesAfterStall > 0 {
		row("releases after a replica stall (its heartbeat was not run in time: machine load)", c.ReleasesAfterStall, "")
	}
	if c.PoisonJobs > 0 {
		row(fmt.Sprintf("poison jobs FAILED after max_retry+1 claims (of %d)", c.PoisonJobs), c.PoisonFailed, fmt.Sprintf("= %d", c.PoisonJobs))
	}
	row("stale completions refused (fence worked)", c.StaleCompletionsRefused, "")
	row("leases rescued (LEASE_EXPIRED + STALE)", c.Rescued, "")
	row("released at shutdown", c.Released, "")
	row("unacknowledged submits (stored anyway)", c.Unacknowledged, fmt.Sprintf("%d stored", c.UnackedStored))
	fmt.Fprintf(w, "| repeated non-transactional effects (at-least-once cost) | %d jobs, %d extra rows | explained by %d interrupted runs / %d interrupting faults; %d of %d explained |\n",
		r.NonTx.DuplicatedJobs, r.NonTx.ExtraEffects, r.NonTx.InterruptedRuns, r.NonTx.InterruptingFaults, r.NonTx.Explained, r.NonTx.DuplicatedJobs)
	if len(r.Violations) > 0 {
		fmt.Fprintln(w, "\n## Violations")
		for _, v := range r.Violations {
			fmt.Fprintf(w, "\n### %s: %d\n\n", v.Check, v.Count)
			for _, e := range v.Examples {
				fmt.Fprintf(w, "- %s\n", e)
			}
		}
	}
	if len(r.Schedules) > 0 {
		writeSchedules(w, r.Schedules)
	}
	if t := rf.Topology; t != nil {
		writeTopology(w, t)
	}
	if len(rf.FaultErrors) > 0 {
		fmt.Fprintln(w, "\n## Fault injection errors")
		for _, e := range rf.FaultErrors {
			fmt.Fprintf(w, "- %s\n", e)
		}
	}
	fmt.Fprintln(w, "\n## Latency and executions")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| | p50 | p90 | p99 | p99.9 | max |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, p := range []struct {
		n string
		p checker.Percentiles
	}{{"pickup latency (first claim − create)", r.Pickup}, {"end-to-end (finish − create)", r.EndToEnd}} {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", p.n, ms(p.p.P50), ms(p.p.P90), ms(p.p.P99), ms(p.p.P999), ms(p.p.Max))
	}
	keys := make([]int, 0, len(r.ExecutionsPerJob))
	for k := range r.ExecutionsPerJob {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d×: %d", k, r.ExecutionsPerJob[k]))
	}
	fmt.Fprintf(w, "\nExecutions per job: %s. Workload %.1f s, drain %.1f s.\n", strings.Join(parts, ", "), rf.WorkloadS, rf.DrainS)
	if len(r.Faults) > 0 {
		fmt.Fprintln(w, "\n## Faults")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| # | fault | target | at | lasted | running at start | unavailability | orphans (re-picked) | re-pick p50 / max | backlog at start | back to it after |")
		fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		for i, f := range r.Faults {
			target := f.Target
			if target == "" {
				target = "database"
			} else {
				target += " (" + f.Owner + ")"
			}
			fmt.Fprintf(w, "| %d | %s | %s | %.1f s | %.1f s | %d | %s | %d (%d) | %s / %s | %d | %s |\n", i+1, f.Kind, target,
				f.Start.Sub(rf.StartedAt).Seconds(), f.End.Sub(f.Start).Seconds(), f.RunningAtStart, secs(f.Unavailability),
				f.Orphans, f.RePicked, secs(f.RePickP50), secs(f.RePickMax), f.BacklogAtStart, secs(f.BacklogRecovery))
		}
		fmt.Fprintln(w, "\nUnavailability: the longest interval after the fault began with no attempt finishing while jobs were pending. Orphans: runs the target held when it began that did not finish on their own; re-pick: when the next attempt was claimed, after the fault began.")
	}
	fmt.Fprintln(w, "\n![timeline](timeline.png)")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

// WriteTimeline draws throughput (attempts finished SUCCESS per second) and
// backlog (submitted, not terminal) over time, fault windows shaded, as a
// PNG.
func WriteTimeline(path string, rf *ResultFile) error {
	r := rf.Result
	thr := make(plotter.XYs, len(r.Timeline))
	bl := make(plotter.XYs, len(r.Timeline))
	var maxThr, maxBl float64 = 1, 1
	for i, p := range r.Timeline {
		thr[i] = plotter.XY{X: p.T, Y: p.Throughput}
		bl[i] = plotter.XY{X: p.T, Y: float64(p.Backlog)}
		maxThr, maxBl = max(maxThr, p.Throughput), max(maxBl, float64(p.Backlog))
	}
	mk := func(title, ylabel string, xy plotter.XYs, ymax float64, c color.Color) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "seconds since the first submit"
		p.Y.Label.Text = ylabel
		p.Y.Min, p.Y.Max = 0, ymax*1.1
		for _, f := range r.Faults {
			s, e := f.Start.Sub(rf.StartedAt).Seconds(), f.End.Sub(rf.StartedAt).Seconds()
			if e-s < 0.2 {
				e = s + 0.2
			}
			poly, err := plotter.NewPolygon(plotter.XYs{{X: s, Y: 0}, {X: e, Y: 0}, {X: e, Y: ymax * 1.1}, {X: s, Y: ymax * 1.1}})
			if err != nil {
				return nil, err
			}
			poly.Color = faultColor(f.Kind)
			poly.LineStyle.Width = 0
			p.Add(poly)
			lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: s, Y: ymax * 1.03}}, Labels: []string{f.Kind}})
			if err != nil {
				return nil, err
			}
			p.Add(lbl)
		}
		line, err := plotter.NewLine(xy)
		if err != nil {
			return nil, err
		}
		line.Color = c
		line.Width = vg.Points(1.2)
		p.Add(line)
		return p, nil
	}
	if len(thr) == 0 {
		thr, bl = plotter.XYs{{}}, plotter.XYs{{}}
	}
	p1, err := mk(fmt.Sprintf("jobq chaos %s (seed %d): throughput", rf.Name, rf.Config.Seed), "attempts succeeded / s", thr, maxThr, color.RGBA{R: 20, G: 90, B: 200, A: 255})
	if err != nil {
		return err
	}
	p2, err := mk("backlog", "jobs submitted, not terminal", bl, maxBl, color.RGBA{R: 200, G: 60, B: 20, A: 255})
	if err != nil {
		return err
	}
	img := vgimg.New(vg.Points(900), vg.Points(600))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter * 2, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	cs := plot.Align([][]*plot.Plot{{p1}, {p2}}, tiles, dc)
	p1.Draw(cs[0][0])
	p2.Draw(cs[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func faultColor(kind string) color.Color {
	// Non-premultiplied: color.RGBA with R,G,B > A is not a valid colour.
	switch kind {
	case FaultKill, FaultTerm, "crash":
		return color.NRGBA{R: 230, G: 60, B: 60, A: 60}
	case FaultPause:
		return color.NRGBA{R: 240, G: 170, B: 30, A: 70}
	case FaultDBRestart, FaultReadOnly:
		return color.NRGBA{R: 120, G: 60, B: 200, A: 60}
	case FaultPartition, FaultLatency, FaultReset:
		return color.NRGBA{R: 30, G: 160, B: 160, A: 60}
	}
	return color.NRGBA{R: 128, G: 128, B: 128, A: 60}
}

// writeTopology writes the report's topology section.
func writeTopology(w io.Writer, t *TopologyReport) {
	fmt.Fprintf(w, "\n## Topology: %s", t.Kind)
	if t.Replication != "" {
		fmt.Fprintf(w, " (%s replication)", t.Replication)
	}
	fmt.Fprint(w, "\n\n")
	for _, s := range t.Servers {
		fmt.Fprintf(w, "- %s\n", s)
	}
	if t.Kind == TopologyGalera3 {
		fmt.Fprintf(w, "\nCertification conflicts: %d cert failures, %d brute-force aborts (wsrep_local_cert_failures, wsrep_local_bf_aborts summed over nodes and incarnations); jobq retried %d deadlock/conflict errors (jobq_db_transient_errors_total{cause=\"deadlock\"}, replicas' last incarnations).\n",
			t.CertFailures, t.BFAborts, t.RetriedConflicts)
		for _, r := range t.Rejoins {
			fmt.Fprintf(w, "- rejoin: %s\n", r)
		}
	}
	for _, f := range t.Failovers {
		fmt.Fprintf(w, "\nFailover after %.1f s of cut replication: %d acknowledged submits missing, %d jobs on the demoted primary only, %d successes lost, %d jobs re-run after a success.\n",
			f.ReplicationCutS, f.AckedMissing, f.OnOldPrimaryOnly, f.SuccessLost, f.Rerun)
		for _, e := range f.Examples {
			fmt.Fprintf(w, "- %s\n", e)
		}
	}
}

// writeSchedules is the report's fire ledger section: each schedule's
// instants over its checked window and their fates.
func writeSchedules(w io.Writer, ss []checker.ScheduleResult) {
	fmt.Fprintln(w, "\n## Periodic schedules (fire ledger)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| schedule | cron | overlap | window | instants | fired | late | skipped | missing | doubled |")
	fmt.Fprintln(w, "|---|---|---|---|---:|---:|---:|---|---:|---:|")
	for _, s := range ss {
		var skipped []string
		for _, reason := range slices.Sorted(maps.Keys(s.Skipped)) {
			skipped = append(skipped, fmt.Sprintf("%d %s", s.Skipped[reason], reason))
		}
		fmt.Fprintf(w, "| %s | `%s` | %s | %s – %s | %d | %d | %d | %s | %d | %d |\n", s.Name, s.Cron, orDefault(s.Overlap),
			s.From.Format(time.RFC3339), s.To.Format(time.RFC3339), s.Instants, s.Fired, s.Late, orNone(skipped), s.Missing, s.Doubled)
	}
}

// rateLimitString is the run's rate limit as "N/period" (with "per key"
// and the keys' number for a per-key limit), "" without rate-limited jobs.
func rateLimitString(c Config) string {
	if c.RateLimited <= 0 {
		return ""
	}
	if c.RateKeys > 0 {
		return fmt.Sprintf("%d/%s per key (%d keys)", c.RateStarts, c.RatePeriod, c.RateKeys)
	}
	return fmt.Sprintf("%d/%s", c.RateStarts, c.RatePeriod)
}
