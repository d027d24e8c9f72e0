package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/jobq/jobq/alert"
	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/auth"
	"github.com/jobq/jobq/callout"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
	testbedtypes "github.com/jobq/jobq/testbed/jobtypes"
)

// DBFlags name the database.
type DBFlags struct {
	DSN string `help:"go-sql-driver/mysql DSN of the jobq database, e.g. 'user:pass@tcp(127.0.0.1:3306)/jobq'. Never logged with its password." env:"JOBQ_DSN" required:"" group:"Database"`
}

// ServeCmd runs a replica.
type ServeCmd struct {
	DBFlags
	Migrate              bool          `help:"Apply pending migrations at start." default:"true" negatable:"" group:"Database"`
	PoolMaxOpen          int           `help:"Max open database connections (default workers/2+10)." default:"0" group:"Database"`
	NoScheduler          bool          `help:"Run only the HTTP API (no claiming)." name:"no-scheduler" group:"Scheduler"`
	Owner                string        `help:"Replica id written to job_queue.owner (default <hostname>-<pid>-<random>)." env:"JOBQ_OWNER" group:"Scheduler"`
	Strategy             string        `help:"Claim strategy: skiplocked or cas (default skiplocked where the server supports it)." enum:"skiplocked,cas," default:"" group:"Scheduler"`
	Workers              int           `help:"Worker pool size." default:"${workers}" group:"Scheduler"`
	BatchLimit           int           `help:"Most jobs one claim takes." default:"${batch_limit}" group:"Scheduler"`
	RunQueue             int           `help:"Claimed jobs a replica may hold beyond its busy workers, queued locally (leases renewed; released at shutdown without spending a retry), so claims are sized by the backlog; adaptive: at most as many as the replica is expected to start within 100ms (0 = default ${run_queue}; negative disables)." default:"${run_queue}" group:"Scheduler"`
	RunQueueWait         time.Duration `help:"A queued job that waited longer than this for a worker is given back (WAITING, no retry spent) for any replica to claim (0 = poll-interval/4; negative: never)." default:"0s" group:"Scheduler"`
	PollInterval         time.Duration `help:"Idle scan interval." default:"${poll_interval}" group:"Scheduler"`
	PollJitter           time.Duration `help:"Uniform ± jitter on each scan interval (0 = poll-interval/5, i.e. ${poll_jitter} for ${poll_interval})." default:"0s" group:"Scheduler"`
	NoJitter             bool          `help:"Scan exactly every poll-interval (no jitter; for baselines)." group:"Scheduler"`
	ClaimsInFlight       int           `help:"Claims a replica keeps running at once while a long queue drains (its last claim filled its batch), each into its own reservation of slots; one claim per scan otherwise; the cas strategy always claims one at a time." default:"${claims_in_flight}" group:"Scheduler"`
	ClaimSlots           int           `help:"The claim gate: at most this many claims run at once across all replicas of the database (a row lock each on claim_gate; each Galera node has its own); a claim that finds every slot taken waits up to 1s for one; give every replica the same value (0 = default ${claim_slots}; negative: no gate; at most 64)." default:"${claim_slots}" group:"Scheduler"`
	DrainWait            time.Duration `help:"While a long queue drains, how long a scan waits for as many free worker slots as the last claim took before claiming fewer (0 = default ${drain_wait}; negative disables)." default:"${drain_wait}" group:"Scheduler"`
	CompleteLinger       time.Duration `help:"How long the completer waits for running handlers to join a completion batch (0 = default ${complete_linger}; negative disables; a lone job is never held)." default:"${complete_linger}" group:"Scheduler"`
	Lease                time.Duration `help:"Lease length on the database clock." default:"${lease}" group:"Scheduler"`
	RescueInterval       time.Duration `help:"How often expired leases are rescued." default:"${rescue_interval}" group:"Scheduler"`
	PromoteInterval      time.Duration `help:"Longest wait between two reads of the earliest SCHEDULED run_at; the promoter also wakes at that run_at and on a local submit or retry due sooner (0 = 5 × poll-interval)." default:"0s" group:"Scheduler"`
	ShutdownTimeout      time.Duration `help:"How long SIGTERM waits for in-flight handlers." default:"${shutdown_timeout}" group:"Scheduler"`
	RetryBackoff         time.Duration `help:"Backoff before the first retry (doubles per retry, ±25% jitter)." default:"${retry_backoff}" group:"Scheduler"`
	Listen               string        `help:"API listen address (loopback by default)." default:"127.0.0.1:8080" env:"JOBQ_LISTEN" group:"API"`
	NoAPI                bool          `help:"Run only the scheduler (no HTTP API)." name:"no-api" group:"API"`
	NoUI                 bool          `help:"Do not serve the web console at /ui/ on the API listener (it is on by default, behind the same bearer tokens)." name:"no-ui" group:"API"`
	MaxBodyBytes         int64         `help:"API request body limit in bytes (the largest params, 1,000,000 bytes, fits the default)." default:"1048576" group:"API"`
	AllowedHost          []string      `help:"A name clients may use in the Host header besides loopback names and addresses and the --listen address (repeatable; *.example.com for the names under example.com; * for any). Requests for any other Host get 403, so a web page cannot reach the replica through a name it points at it (DNS rebinding)." name:"allowed-host" env:"JOBQ_ALLOWED_HOSTS" sep:"," group:"API"`
	RemoteType           []string      `help:"Job type run by remote workers (repeatable; the same on every replica): its jobs wait for a worker's fetch and never run in this replica's handlers (docs/workers.md)." name:"remote-type" env:"JOBQ_REMOTE_TYPES" sep:"," group:"Workers"`
	WorkerTokenFile      string        `help:"File of worker tokens, one entry per line: <token> <job types comma-separated, or *> [submit|read|submit,read] (docs/workers.md); entries in JOBQ_WORKER_TOKENS (separated by ';') are accepted too." type:"existingfile" env:"JOBQ_WORKER_TOKEN_FILE" group:"Workers"`
	AuthTokenFile        string        `help:"File of API bearer tokens, one per line (# comments); tokens in JOBQ_AUTH_TOKENS (comma-separated) are accepted too. Without either the API has no authentication." type:"existingfile" env:"JOBQ_AUTH_TOKEN_FILE" group:"API"`
	Callout              []string      `help:"Bind a job type to an HTTP endpoint, TYPE=URL (repeatable; the type becomes remote): jobq POSTs each job to URL, signed with the secret named TYPE in --callout-secret-file (docs/workers.md, HTTP call-out)." name:"callout" group:"Workers"`
	CalloutSecretFile    string        `help:"File of call-out signing secrets, one 'NAME SECRET' per line (≥ 16 bytes); entries in JOBQ_CALLOUT_SECRETS (NAME=SECRET;…) are accepted too." type:"existingfile" env:"JOBQ_CALLOUT_SECRET_FILE" group:"Workers"`
	CalloutAllowLoopback bool          `help:"Let call-out bindings reach loopback addresses (refused by default, as are link-local and cloud metadata addresses)." name:"callout-allow-loopback" group:"Workers"`
	CalloutTimeout       time.Duration `help:"How long a call-out may take, connection to answer; later is a failed attempt." default:"10s" group:"Workers"`
	AlertSecretFile      string        `help:"File of alert signing secrets, one 'NAME SECRET' per line (≥ 16 bytes; rules name one, default 'alerts'); entries in JOBQ_ALERT_SECRETS (NAME=SECRET;…) are accepted too." type:"existingfile" env:"JOBQ_ALERT_SECRET_FILE" group:"Operations"`
	AlertAllowLoopback   bool          `help:"Let alert webhooks reach loopback addresses (refused by default, as are link-local and cloud metadata addresses)." name:"alert-allow-loopback" group:"Operations"`
	MetricsFlags
	OpsFlags
	TestbedFlags
}

// SchedulerConfig maps flags to scheduler.Config.
func (c *ServeCmd) SchedulerConfig() (scheduler.Config, error) {
	cfg := scheduler.Config{
		Owner: c.Owner, Strategy: c.Strategy, Workers: c.Workers, BatchLimit: c.BatchLimit, RunQueue: c.RunQueue, RunQueueWait: c.RunQueueWait,
		PollInterval: c.PollInterval, PollJitter: c.PollJitter, NoJitter: c.NoJitter, Lease: c.Lease,
		RescueInterval: c.RescueInterval, PromoteInterval: c.PromoteInterval, ShutdownTimeout: c.ShutdownTimeout, RetryBackoffBase: c.RetryBackoff,
		DrainWait: c.DrainWait, CompleteLinger: c.CompleteLinger, ClaimsInFlight: c.ClaimsInFlight,
		ClaimSlots:  c.ClaimSlots,
		RemoteTypes: remoteTypes(append(slices.Clone(c.RemoteType), c.calloutTypes()...)),
	}
	ops, err := c.OpsConfig()
	if err != nil {
		return cfg, err
	}
	cfg.Ops = ops
	if cfg.Owner == "" {
		cfg.Owner = scheduler.DefaultOwner() // the one owner id draw: app and scheduler keep it
	}
	return cfg, cfg.WithDefaults().Validate()
}

// calloutTypes are the job types of --callout TYPE=URL.
func (c *ServeCmd) calloutTypes() []string {
	var out []string
	for _, s := range c.Callout {
		if b, err := callout.ParseBinding(s); err == nil {
			out = append(out, b.JobType)
		}
	}
	return out
}

// calloutConfig maps the --callout flags to callout.Config.
func (c *ServeCmd) calloutConfig() (callout.Config, error) {
	cfg := callout.Config{AllowLoopback: c.CalloutAllowLoopback, Timeout: c.CalloutTimeout}
	for _, s := range c.Callout {
		b, err := callout.ParseBinding(s)
		if err != nil {
			return cfg, err
		}
		cfg.Bindings = append(cfg.Bindings, b)
	}
	secrets, err := callout.LoadSecrets(c.CalloutSecretFile, os.Getenv(callout.SecretsEnv))
	cfg.Secrets = secrets
	return cfg, err
}

// remoteTypes trims and de-duplicates the --remote-type values.
func remoteTypes(vs []string) []string {
	var out []string
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// Run starts the replica and blocks until SIGINT/SIGTERM, then shuts down gracefully.
func (c *ServeCmd) Run(g *Globals) error {
	if c.NoAPI && c.NoScheduler {
		return fmt.Errorf("--no-api and --no-scheduler: at least one half must run")
	}
	sc, err := c.SchedulerConfig()
	if err != nil {
		return err
	}
	tokens, err := auth.LoadTokens(c.AuthTokenFile, os.Getenv(auth.TokensEnv))
	if err != nil {
		return err
	}
	periodic, err := c.PeriodicRequests()
	if err != nil {
		return err
	}
	workerTokens, err := service.LoadWorkerTokens(c.WorkerTokenFile, os.Getenv(service.WorkerTokensEnv))
	if err != nil {
		return err
	}
	co, err := c.calloutConfig()
	if err != nil {
		return err
	}
	alertSecrets, err := alert.LoadSecrets(c.AlertSecretFile, os.Getenv(alert.SecretsEnv))
	if err != nil {
		return err
	}
	cfg := app.Config{Callout: co, Alerts: alert.Config{Secrets: alertSecrets, AllowLoopback: c.AlertAllowLoopback},
		DSN: c.DSN, Listen: c.Listen, NoAPI: c.NoAPI, NoScheduler: c.NoScheduler, NoUI: c.NoUI, Migrate: c.Migrate,
		PoolMaxOpen: c.PoolMaxOpen, MaxBodyBytes: c.MaxBodyBytes, AuthTokens: tokens, WorkerTokens: workerTokens, AllowedHosts: c.AllowedHost, Scheduler: sc, Logger: g.Log,
		Metrics: c.MetricsOptions(), Periodic: periodic,
	}
	if os.Getenv(testbedtypes.TestbedEnv) == "1" {
		// The testbed's job types (effect, poison), for the replicas the
		// chaos harness and the demo start.
		cfg.RegisterFunc = testbedtypes.RegisterTestbed
	}
	if err := c.applyServe(&cfg, g.Log); err != nil {
		return err
	}
	r, err := app.Start(g.Ctx, cfg)
	if err != nil {
		return err
	}
	// Tell a supervising harness where the API listens.
	if r.Addr != "" {
		fmt.Printf("jobq: listening on http://%s\n", r.Addr)
		if !c.NoUI {
			fmt.Printf("jobq: console on http://%s/ui/\n", r.Addr)
		}
	}
	select {
	case <-g.Ctx.Done():
		g.Log.Info("shutting down")
	case err := <-r.Err():
		g.Log.Error("api server failed", "err", err)
	}
	return r.Stop(context.Background())
}

// MigrateCmd applies, reverts or lists migrations.
type MigrateCmd struct {
	Up     MigrateUpCmd     `cmd:"" default:"1" help:"Apply pending migrations."`
	Down   MigrateDownCmd   `cmd:"" help:"Revert applied migrations."`
	Status MigrateStatusCmd `cmd:"" help:"List migrations and whether they are applied."`
}

// MigrateUpCmd applies pending migrations.
type MigrateUpCmd struct{ DBFlags }

// Run applies pending migrations.
func (c *MigrateUpCmd) Run(g *Globals) error {
	st, err := store.Open(g.Ctx, c.DSN, store.PoolConfig{MaxOpen: 2})
	if err != nil {
		return err
	}
	defer st.Close()
	done, err := st.MigrateUp(g.Ctx)
	if err != nil {
		return err
	}
	if len(done) == 0 {
		fmt.Println("schema is up to date")
	}
	for _, v := range done {
		fmt.Printf("applied %03d\n", v)
	}
	return nil
}

// MigrateDownCmd reverts migrations.
type MigrateDownCmd struct {
	DBFlags
	Steps int  `help:"How many migrations to revert." default:"1"`
	All   bool `help:"Revert every migration (drops jobq's tables)."`
}

// Run reverts migrations.
func (c *MigrateDownCmd) Run(g *Globals) error {
	st, err := store.Open(g.Ctx, c.DSN, store.PoolConfig{MaxOpen: 2})
	if err != nil {
		return err
	}
	defer st.Close()
	steps := c.Steps
	if c.All {
		steps = 0
	}
	done, err := st.MigrateDown(g.Ctx, steps)
	if err != nil {
		return err
	}
	for _, v := range done {
		fmt.Printf("reverted %03d\n", v)
	}
	return nil
}

// MigrateStatusCmd lists migrations.
type MigrateStatusCmd struct{ DBFlags }

// Run lists migrations.
func (c *MigrateStatusCmd) Run(g *Globals) error {
	st, err := store.Open(g.Ctx, c.DSN, store.PoolConfig{MaxOpen: 2})
	if err != nil {
		return err
	}
	defer st.Close()
	all, err := st.MigrateStatus(g.Ctx)
	if err != nil {
		return err
	}
	for _, m := range all {
		state := "pending"
		if m.Applied {
			state = "applied " + m.AppliedAt.Format("2006-01-02T15:04:05Z")
		}
		fmt.Printf("%03d_%s\t%s\n", m.Version, m.Name, state)
	}
	return nil
}

// defaultVars are the scheduler's defaults as the flags spell them
// (default:"${workers}" …), so each default is written once: in the
// scheduler's XxxDefault constants.
func defaultVars() kong.Vars {
	return kong.Vars{
		"workers":           strconv.Itoa(scheduler.WorkersDefault),
		"batch_limit":       strconv.Itoa(scheduler.BatchLimitDefault),
		"run_queue":         strconv.Itoa(scheduler.RunQueueDefault),
		"poll_interval":     scheduler.PollIntervalDefault.String(),
		"poll_jitter":       scheduler.PollJitterDefault.String(),
		"drain_wait":        scheduler.DrainWaitDefault.String(),
		"claims_in_flight":  strconv.Itoa(scheduler.ClaimsInFlightDefault),
		"claim_slots":       strconv.Itoa(scheduler.ClaimSlotsDefault),
		"complete_linger":   scheduler.CompleteLingerDefault.String(),
		"lease":             scheduler.LeaseDefault.String(),
		"rescue_interval":   scheduler.RescueIntervalDefault.String(),
		"shutdown_timeout":  scheduler.ShutdownTimeoutDefault.String(),
		"retry_backoff":     scheduler.RetryBackoffBaseDefault.String(),
		"clean_interval":    scheduler.CleanIntervalDefault.String(),
		"ops_refresh":       scheduler.OpsRefreshIntervalDefault.String(),
		"misfire_threshold": scheduler.MisfireThresholdDefault.String(),
	}
}
