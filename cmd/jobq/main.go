// Command jobq is the jobq CLI: serve a replica, migrate the schema, submit
// and inspect jobs, and run the demo. Flags map to app.Config and
// scheduler.Config; see `jobq --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"
)

// CLI is the command tree.
type CLI struct {
	Version   kong.VersionFlag `help:"Print the version (module version and VCS revision) and exit."`
	LogLevel  string           `help:"Log level: debug, info, warn, error." default:"info" enum:"debug,info,warn,error" env:"JOBQ_LOG_LEVEL"`
	LogFormat string           `help:"Log format: text or json." default:"text" enum:"text,json" env:"JOBQ_LOG_FORMAT"`

	Serve       ServeCmd       `cmd:"" help:"Run a replica: HTTP API and scheduler in one process."`
	Migrate     MigrateCmd     `cmd:"" help:"Apply, revert or list schema migrations."`
	Submit      SubmitCmd      `cmd:"" help:"Submit a job."`
	Get         GetCmd         `cmd:"" help:"Show one job."`
	List        ListCmd        `cmd:"" help:"List jobs, newest first."`
	Cancel      CancelCmd      `cmd:"" help:"Cancel a job (WAITING or SCHEDULED at once; RUNNING via its handler's context)."`
	Retry       RetryCmd       `cmd:"" help:"Re-queue a FAILED or CANCELED job."`
	Executions  ExecutionsCmd  `cmd:"" help:"List a job's attempts."`
	Logs        LogsCmd        `cmd:"" help:"Print a job's attempt log (--follow: until the job is finished)."`
	Workers     WorkersCmd     `cmd:"" help:"List the live remote workers: id, types, runs in flight, last fetch."`
	Workflow    WorkflowCmd    `cmd:"" help:"Submit, show, list, cancel and retry workflows: jobs that wait for other jobs."`
	Stats       StatsCmd       `cmd:"" help:"Counts by status and type, oldest waiting age, recent rates."`
	Pause       PauseCmd       `cmd:"" help:"Pause a job type (not claimed; running jobs finish)."`
	Resume      ResumeCmd      `cmd:"" help:"Resume a paused job type."`
	Limit       LimitCmd       `cmd:"" help:"Set a job type's cluster-wide limit of RUNNING jobs (0 removes it)."`
	Types       TypesCmd       `cmd:"" help:"List every job type ever paused or limited, with its state."`
	Periodic    PeriodicCmd    `cmd:"" help:"Manage periodic (cron) schedules."`
	Alerts      AlertsCmd      `cmd:"" help:"Manage alert rules: webhooks (Slack, DingTalk, WeCom, Feishu presets) for failed, long-running jobs and missed schedules."`
	Purge       PurgeCmd       `cmd:"" help:"Delete terminal jobs older than an age, with their executions."`
	Work        WorkCmd        `cmd:"" help:"Run a command for each job of remote job types: a worker with no library (params on stdin, stdout as output)."`
	Demo        DemoCmd        `cmd:"" help:"Start a database and 3 replicas, run 1,000 jobs, SIGKILL a replica, print a summary."`
	Loadtest    LoadtestCmd    `cmd:"" help:"Open-model submit load: CO-free latency percentiles, thresholds, capacity search."`
	Chaos       ChaosCmd       `cmd:"" help:"HA and exactly-once testbed: N replicas behind fault proxies, faults on a schedule, a checker; exits non-zero on any violation."`
	ChaosWorker ChaosWorkerCmd `cmd:"" name:"chaos-worker" hidden:"" help:"The chaos testbed's Go worker (started by jobq chaos --executor remote)."`
	Bench       BenchCmd       `cmd:"" help:"Measure throughput and pickup latency against the raw SQL ceiling and the classic design; write a report."`
	Check       CheckCmd       `cmd:"" help:"Judge a job history (NDJSON, a start/end CSV, or a jobq database) with the chaos checker; exits non-zero on any violation."`
	Help        HelpCmd        `cmd:"" help:"Show help for jobq or one command: jobq help [command …]."`
}

// Globals are handed to every command's Run.
type Globals struct {
	Log *slog.Logger
	Ctx context.Context
}

// HelpCmd is `jobq help [command …]`: the same text as `jobq [command …] --help`.
type HelpCmd struct {
	Command []string `arg:"" optional:"" help:"Command (and sub-command) to explain."`
}

// Run prints the help of the named command, or of jobq.
func (c *HelpCmd) Run(k *kong.Kong) error {
	_, err := k.Parse(append(append([]string(nil), c.Command...), "--help"))
	return err
}

// version is "jobq <module version> (<revision>[, modified], <commit time>)"
// from the build information the Go toolchain embeds.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "jobq (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	if rev == "" {
		return fmt.Sprintf("jobq %s (no VCS revision; %s)", v, bi.GoVersion)
	}
	return fmt.Sprintf("jobq %s (%s%s, %s; %s)", v, rev, dirty, at, bi.GoVersion)
}

// usageError prints err with the failing command's one-line usage — not the
// whole help — and exits 2.
func usageError(err error) {
	fmt.Fprintln(os.Stderr, "jobq: error:", err)
	var pe *kong.ParseError
	if errors.As(err, &pe) && pe.Context != nil {
		for _, h := range envHints(err, pe.Context.Flags()) {
			fmt.Fprintln(os.Stderr, "jobq: hint:", h)
		}
		if n := pe.Context.Selected(); n != nil {
			fmt.Fprintf(os.Stderr, "usage: jobq %s\nRun 'jobq help %s' for every flag.\n", n.Summary(), n.Path())
			os.Exit(2)
		}
	}
	fmt.Fprintln(os.Stderr, "Run 'jobq help' for the commands.")
	os.Exit(2)
}

// negativeNumber is a flag value kong would take for a short flag: a
// negative number or duration (-1, -0.5, -1ms).
var negativeNumber = regexp.MustCompile(`^-[0-9.]`)

// negativeValues lets a long flag take a negative number as its next
// argument (`--max-retry -1`, `--drain-wait -1ms`) by joining the two as
// `--max-retry=-1`, the only form kong accepts: it reads "-1" as a short
// flag. No jobq short flag is a digit. Arguments after "--" are left alone.
func negativeValues(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if strings.HasPrefix(a, "--") && !strings.Contains(a, "=") && i+1 < len(args) && negativeNumber.MatchString(args[i+1]) {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

func main() {
	var cli CLI
	parser, err := kong.New(&cli,
		kong.Name("jobq"),
		kong.Description("jobq — a highly available job scheduler whose queue is a MySQL/MariaDB table."),
		kong.Vars{"version": version()}, defaultVars(),
	)
	if err != nil {
		panic(err)
	}
	if len(os.Args) == 1 {
		_, _ = parser.Parse([]string{"--help"})
	}
	kctx, err := parser.Parse(negativeValues(os.Args[1:]))
	if err != nil {
		usageError(err)
	}
	level := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}[cli.LogLevel]
	var h slog.Handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	if cli.LogFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	}
	logger := slog.New(h)
	slog.SetDefault(logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = kctx.Run(&Globals{Log: logger, Ctx: ctx}, parser)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobq:", err)
		if h := serverHint(err, kctx); h != "" {
			fmt.Fprintln(os.Stderr, "jobq: hint:", h)
		}
		os.Exit(1)
	}
}
