// Command jobq is the jobq CLI: serve a replica, migrate the schema, submit
// and inspect jobs, and run the demo. Flags map to app.Config and
// scheduler.Config; see `jobq --help`.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
)

// CLI is the command tree.
type CLI struct {
	LogLevel  string `help:"Log level: debug, info, warn, error." default:"info" enum:"debug,info,warn,error" env:"JOBQ_LOG_LEVEL"`
	LogFormat string `help:"Log format: text or json." default:"text" enum:"text,json" env:"JOBQ_LOG_FORMAT"`

	Serve      ServeCmd      `cmd:"" help:"Run a replica: HTTP API and scheduler in one process."`
	Migrate    MigrateCmd    `cmd:"" help:"Apply, revert or list schema migrations."`
	Submit     SubmitCmd     `cmd:"" help:"Submit a job."`
	Get        GetCmd        `cmd:"" help:"Show one job."`
	List       ListCmd       `cmd:"" help:"List jobs, newest first."`
	Cancel     CancelCmd     `cmd:"" help:"Cancel a job (WAITING at once; RUNNING via its handler's context)."`
	Retry      RetryCmd      `cmd:"" help:"Re-queue a FAILED or CANCELED job."`
	Executions ExecutionsCmd `cmd:"" help:"List a job's attempts."`
	Stats      StatsCmd      `cmd:"" help:"Counts by status and type, oldest waiting age, recent rates."`
	Pause      PauseCmd      `cmd:"" help:"Pause a job type (not claimed; running jobs finish)."`
	Resume     ResumeCmd     `cmd:"" help:"Resume a paused job type."`
	Limit      LimitCmd      `cmd:"" help:"Set a job type's cluster-wide limit of RUNNING jobs (0 removes it)."`
	Types      TypesCmd      `cmd:"" help:"List every job type ever paused or limited, with its state."`
	Periodic   PeriodicCmd   `cmd:"" help:"Manage periodic (cron) schedules."`
	Purge      PurgeCmd      `cmd:"" help:"Delete terminal jobs older than an age, with their executions."`
	Demo       DemoCmd       `cmd:"" help:"Start a database and 3 replicas, run 1,000 jobs, SIGKILL a replica, print a summary."`
	Loadtest   LoadtestCmd   `cmd:"" help:"Open-model submit load: CO-free latency percentiles, thresholds, capacity search."`
	Chaos      ChaosCmd      `cmd:"" help:"HA and exactly-once testbed: N replicas behind fault proxies, faults on a schedule, a checker; exits non-zero on any violation."`
	Bench      BenchCmd      `cmd:"" help:"Measure throughput and pickup latency against the raw SQL ceiling and the classic design; write a report."`
}

// Globals are handed to every command's Run.
type Globals struct {
	Log *slog.Logger
	Ctx context.Context
}

func main() {
	var cli CLI
	kctx := kong.Parse(&cli,
		kong.Name("jobq"),
		kong.Description("jobq — a highly available job scheduler whose queue is a MySQL/MariaDB table."),
		kong.UsageOnError(),
	)
	level := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}[cli.LogLevel]
	var h slog.Handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	if cli.LogFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	}
	logger := slog.New(h)
	slog.SetDefault(logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := kctx.Run(&Globals{Log: logger, Ctx: ctx})
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobq:", err)
		os.Exit(1)
	}
}
