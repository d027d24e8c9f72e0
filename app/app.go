// Package app wires one jobq replica: store, migrations, scheduler and
// HTTP API in one process (`jobq serve`), either half optional.
package app

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"syscall"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/alert"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/auth"
	"github.com/jobq/jobq/callout"
	"github.com/jobq/jobq/console"
	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/metrics"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

// ListenDefault is where the API listens unless told otherwise: loopback only.
const ListenDefault = "127.0.0.1:8080"

// HTTP server timeouts, the defaults of Config's timeout fields.
const (
	ReadHeaderTimeoutDefault = 10 * time.Second  // a client must send its headers within this
	ReadTimeoutDefault       = 30 * time.Second  // … and its whole request (headers and body) within this
	WriteTimeoutDefault      = 30 * time.Second  // a response must be written within this of the request's headers
	IdleTimeoutDefault       = 120 * time.Second // an idle keep-alive connection is closed after this
)

// BulkWriteTimeoutDefault replaces WriteTimeout for the bulk operations
// (purge and bulk retry, over HTTP, Connect and gRPC): they walk the table
// in batches and take longer than WriteTimeout on a large one (900,000
// jobs purged in 41 s on 2 cores), and a response past its write deadline
// is dropped while the work goes on — the caller saw an empty reply.
const BulkWriteTimeoutDefault = 10 * time.Minute

// Config configures a replica.
type Config struct {
	// DSN is a go-sql-driver/mysql DSN naming the database. Required
	// unless DB is set.
	DSN string
	// DB, if set, is the open pool the replica uses instead of opening DSN
	// (PoolMaxOpen and the idle-transaction timeout are then the caller's):
	// the testbed's statement-counting pool. Stop closes it.
	DB *sql.DB
	// Listen is the API address. Defaults to ListenDefault.
	Listen string
	// NoAPI runs only the scheduler; NoScheduler runs only the API.
	NoAPI, NoScheduler bool
	// NoUI turns off the web console served at /ui/ on the API listener
	// (package console). Defaults to false: the console is on whenever the
	// API is, behind the same bearer tokens.
	NoUI bool
	// Migrate applies pending migrations at start.
	Migrate bool
	// PoolMaxOpen caps database connections. Defaults to Workers/2+10.
	PoolMaxOpen int
	// MaxBodyBytes limits API request bodies. Defaults to 1 MiB.
	MaxBodyBytes int64
	// AuthTokens, when non-empty, makes the API require
	// "Authorization: Bearer <token>" with one of them on every request but
	// /healthz and /readyz (see auth.LoadTokens). Defaults to none:
	// no authentication, so keep Listen on loopback.
	AuthTokens []string
	// AllowedHosts are names (or "*.domain", or "*" for any) that requests
	// may carry in their Host header beside the ones the replica always
	// answers: loopback names and addresses and the Listen host (see
	// httpapi.NewHostPolicy). Any other Host gets 403, on every route but
	// /healthz and /readyz, so a web page cannot reach a replica through a
	// name it points at the replica's address (DNS rebinding). Defaults to
	// none.
	AllowedHosts []string
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are the
	// API server's timeouts (net/http.Server). Default to
	// ReadHeaderTimeoutDefault (10s), ReadTimeoutDefault (30s),
	// WriteTimeoutDefault (30s) and IdleTimeoutDefault (120s).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// WorkerTokens are the remote workers' credentials, scoped to job types
	// (service.LoadWorkerTokens, docs/workers.md). Defaults to none.
	WorkerTokens []service.WorkerCredential
	// Scheduler configures the scheduling loop; Scheduler.RemoteTypes are
	// the job types run by remote workers.
	Scheduler scheduler.Config
	// Registry holds the handlers; nil registers the built-in job types.
	Registry *scheduler.Registry
	// RegisterFunc, if set, runs once the schema is checked and before the
	// scheduler starts, with Registry and the database handle: it registers
	// more job types and creates what they need. `jobq serve` sets it to
	// register the testbed's job types when its environment has
	// JOBQ_TESTBED=1.
	RegisterFunc func(ctx context.Context, reg *scheduler.Registry, db *sql.DB) error
	// WrapStoreFunc, if set, wraps the store the scheduler runs on in a
	// decorator of scheduler.Store (the service keeps the adapter itself).
	// Only the testbed build of `jobq serve` sets it.
	WrapStoreFunc func(st *store.Store) scheduler.Store
	// Periodic are schedules from configuration (`--periodic`,
	// `--periodic-file`), created or replaced at start with source "config";
	// an unchanged cron expression keeps its cursor across restarts.
	Periodic []apitype.PeriodicRequest
	// Metrics configures the replica's Prometheus metrics, served at
	// /metrics on the API listener (see package metrics).
	Metrics metrics.Options
	// Callout configures the HTTP call-out executor: job types bound to
	// endpoints (each must be in Scheduler.RemoteTypes), their signing
	// secrets and the destination allow-list. Bindings can be added and
	// removed later through the operations API (/v1/callouts).
	Callout callout.Config
	// Alerts configures alert notifications: the signing secrets, the
	// destination allow-list and the delivery timings (rules are in the
	// database, /v1/alerts). Owner defaults to the scheduler's.
	Alerts alert.Config
	// WrapHandlerFunc, when set, wraps the API's HTTP handler (all routes,
	// before metrics and gRPC) with db the replica's database. The testbed
	// build uses it for its HTTP decorators; the product never sets it.
	WrapHandlerFunc func(h http.Handler, db *sql.DB) http.Handler
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Replica is a running replica.
type Replica struct {
	Store     *store.Store
	Scheduler *scheduler.Scheduler // nil with NoScheduler
	Metrics   *metrics.Metrics     // this replica's registry, served at /metrics
	Service   *service.Service
	Addr      string // API address actually bound ("" with NoAPI)
	server    *http.Server
	serveErr  chan error
	log       *slog.Logger
	// Ops serves pause/resume, limits, periodic schedules, bulk retry, purge and stats.
	Ops *service.Ops
	// Workers serves the remote worker protocol.
	Workers *service.Workers
	// Callout is the HTTP call-out executor (nil without a scheduler or
	// remote job types).
	Callout *callout.Executor
	// Alerts serves the alert rules and, with a scheduler, detects and
	// delivers their incidents.
	Alerts *alert.Service
	// ready caches Store.Ready for /readyz, the gRPC health check and the
	// jobq_db_writable gauge (at most one check a second).
	ready *store.ReadyCache

	// cfg is the configuration with defaults filled (see start).
	cfg Config
	// ln is the API listener, bound first (see listen); hosts are the Host
	// names its requests may carry.
	ln    net.Listener
	hosts *httpapi.HostPolicy
	// cleanup holds what undoes each step that ran, in the order the steps
	// ran; Stop, or a failed Start, runs it last to first.
	cleanup []func(ctx context.Context) error
	// reaper is the idle-transaction reaper (buildReaper), nil when the
	// server ends idle transactions itself; reaping is set while it runs
	// (startReaper).
	reaper  *store.IdleTxReaper
	reaping bool
}

// Start binds the API listener first (a taken port fails before anything
// touches the database or claims a job), then opens the database, migrates
// if asked, and starts the scheduler and the API. It returns once both are
// running. Each step is a method of Replica run in order; each pushes what
// undoes it on one cleanup stack, which a failing step (and later Stop)
// runs last to first.
func Start(ctx context.Context, cfg Config) (_ *Replica, err error) {
	if cfg.DSN == "" && cfg.DB == nil {
		return nil, errors.New("dsn: required (flag --dsn or JOBQ_DSN)")
	}
	r := &Replica{cfg: withDefaults(cfg)}
	r.log = r.cfg.Logger.With("component", "app")
	defer func() {
		if err != nil {
			_ = r.Stop(context.Background())
		}
	}()
	steps := []func(context.Context) error{
		r.listen,         // bind the API port (a taken port fails first)
		r.openStore,      // open the database (or take cfg.DB), check the server
		r.migrate,        // apply migrations if asked, then check the schema
		r.startMetrics,   // the replica's registry, the scheduler's first observer
		r.buildAlerts,    // alert rules; the observer of periodic misfires
		r.buildReaper,    // without idle_transaction_timeout (MySQL): the rescues' observer
		r.reconcileLanes, // remote job types: move their jobs to the workers' lane
		r.register,       // RegisterFunc (the testbed's job types)
		r.startScheduler, // scanner, dispatcher, heartbeat, completer, rescuer, …
		r.startReaper,    // without idle_transaction_timeout (MySQL): end idle holders
		r.buildServices,  // the API's service, operations service and workers service
		r.startCallout,   // the HTTP call-out executor (with remote job types)
		r.startAlerts,    // alert detection and delivery (with a scheduler)
		r.putPeriodic,    // schedules from configuration
		r.serveAPI,       // HTTP, gRPC/Connect and the console on the listener
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// withDefaults fills cfg's defaults: the logger, the built-in job types,
// the scheduler's defaults (an owner drawn here stays for the run).
func withDefaults(cfg Config) Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = scheduler.NewRegistry()
		jobtypes.Register(cfg.Registry)
	}
	if cfg.Scheduler.Logger == nil {
		cfg.Scheduler.Logger = cfg.Logger
	}
	if cfg.Metrics.Logger == nil {
		cfg.Metrics.Logger = cfg.Logger
	}
	cfg.Scheduler = cfg.Scheduler.WithDefaults() // idempotent: keeps an owner drawn by the caller
	return cfg
}

// onStop pushes undo on the cleanup stack.
func (r *Replica) onStop(undo func(ctx context.Context) error) { r.cleanup = append(r.cleanup, undo) }

// listen binds the API address (not with NoAPI).
func (r *Replica) listen(context.Context) error {
	if r.cfg.NoAPI {
		return nil
	}
	listen := cmp.Or(r.cfg.Listen, ListenDefault)
	hosts, err := httpapi.NewHostPolicy(listen, r.cfg.AllowedHosts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return listenError(listen, err)
	}
	r.ln, r.hosts = ln, hosts
	r.onStop(func(context.Context) error {
		// The server closes it on Shutdown; this closes one never served.
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	})
	return nil
}

// openStore opens the database pool (or wraps cfg.DB) and detects the server.
func (r *Replica) openStore(ctx context.Context) error {
	var st *store.Store
	var err error
	if r.cfg.DB != nil {
		st, err = store.OpenDB(ctx, r.cfg.DB)
	} else {
		pool := r.cfg.PoolMaxOpen
		if pool <= 0 {
			pool = r.cfg.Scheduler.Workers/2 + 10
		}
		// A session idle inside a transaction for Lease/5 (the heartbeat's
		// safety margin) belongs to a frozen or lost process: the server ends
		// it, so its row locks cannot hold off the rescue of its jobs.
		st, err = store.Open(ctx, r.cfg.DSN, store.PoolConfig{MaxOpen: pool, IdleTxTimeout: r.cfg.Scheduler.Lease / 5})
	}
	if err != nil {
		return err
	}
	r.Store = st
	r.onStop(func(context.Context) error { return st.Close() })
	r.log.Info("connected", "server", st.Server.Description, "skip_locked", st.Server.SkipLocked,
		"idle_transaction_timeout", st.IdleTxTimeout)
	return nil
}

// migrate applies pending migrations (with Migrate) and checks the schema.
func (r *Replica) migrate(ctx context.Context) error {
	st := r.Store
	if r.cfg.Migrate {
		applied, err := st.MigrateUp(ctx)
		if err != nil {
			return err
		}
		if len(applied) > 0 {
			r.log.Info("migrations applied", "versions", applied)
		}
	}
	// Serve only the schema this binary was built for: an empty or older
	// schema would answer submits with 500s and leave jobs WAITING for ever
	// (unknown columns), a newer one may have changed what the queries mean.
	if err := st.SchemaCheck(ctx); err != nil {
		return err
	}
	r.ready = &store.ReadyCache{CheckFunc: st.Ready}
	return nil
}

// reconcileLanes tells the store the remote job types and moves jobs of
// those types submitted before they were declared remote to the workers'
// lane (and back for types no longer remote).
func (r *Replica) reconcileLanes(ctx context.Context) error {
	remoteTypes := r.cfg.Scheduler.RemoteTypes
	r.Store.SetRemoteTypes(remoteTypes)
	n, err := r.Store.JobLaneReconcile(ctx, remoteTypes)
	if err != nil {
		return err
	}
	if n > 0 {
		r.log.Info("jobs of remote types submitted before they were declared remote moved to the workers' lane", "jobs", n)
	}
	return nil
}

// register runs RegisterFunc (the testbed's job types).
func (r *Replica) register(ctx context.Context) error {
	if r.cfg.RegisterFunc != nil {
		return r.cfg.RegisterFunc(ctx, r.cfg.Registry, r.Store.DB())
	}
	return nil
}

// startMetrics builds the replica's metrics and makes them the scheduler's
// first observer, before the caller's.
func (r *Replica) startMetrics(context.Context) error {
	m := metrics.New(r.cfg.Metrics)
	r.Metrics = m
	r.onStop(func(context.Context) error { m.Close(); return nil })
	r.cfg.Scheduler.Observer = scheduler.Observers(m, r.cfg.Scheduler.Observer)
	m.ObserveDB(r.Store.DB())
	m.ObserveReady(r.ready.Writable)
	return nil
}

// buildAlerts builds the alerts service and, with a scheduler, makes it an
// observer of the periodic fires (schedule_missed, schedule_skipped).
func (r *Replica) buildAlerts(context.Context) error {
	ac := r.cfg.Alerts
	ac.Owner = cmp.Or(ac.Owner, "alerts@"+r.cfg.Scheduler.Owner)
	if ac.Logger == nil {
		ac.Logger = r.cfg.Logger
	}
	if own := ac.OutcomeFunc; own != nil {
		ac.OutcomeFunc = func(o string) { r.Metrics.AlertOutcome(o); own(o) }
	} else {
		ac.OutcomeFunc = r.Metrics.AlertOutcome
	}
	r.Alerts = alert.New(r.Store, ac)
	if !r.cfg.NoScheduler {
		r.cfg.Scheduler.Observer = scheduler.Observers(r.cfg.Scheduler.Observer, scheduler.ObserverFunc(r.Alerts.Observe))
	}
	return nil
}

// startAlerts runs alert detection and delivery (not with NoScheduler: an
// API-only replica serves the rules only).
func (r *Replica) startAlerts(ctx context.Context) error {
	if r.Scheduler == nil {
		return nil
	}
	r.Alerts.Start(context.WithoutCancel(ctx))
	r.onStop(func(context.Context) error { r.Alerts.Stop(); return nil })
	return nil
}

// startScheduler builds and starts the scheduling loop (not with
// NoScheduler). It runs until Stop, whatever ctx does.
func (r *Replica) startScheduler(ctx context.Context) error {
	if r.cfg.NoScheduler {
		return nil
	}
	var sst scheduler.Store = r.Store
	if r.cfg.WrapStoreFunc != nil {
		sst = r.cfg.WrapStoreFunc(r.Store)
	}
	s, err := scheduler.New(sst, r.cfg.Registry, r.cfg.Scheduler, r.Store.Server.SkipLocked)
	if err != nil {
		return err
	}
	if err := s.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	r.Scheduler = s
	r.onStop(func(context.Context) error { return s.Stop() })
	r.Metrics.ObserveScheduler(s)
	return nil
}

// buildReaper builds the idle-transaction reaper when the server has no
// idle_transaction_timeout (MySQL): it ends sessions idle in a transaction
// holding row locks for Lease/5, as MariaDB's variable would. It passes
// every Lease, and at once when a rescue pass could not return an expired
// run (its row may be held by a frozen transaction): the scheduler's
// observer pokes it.
func (r *Replica) buildReaper(context.Context) error {
	if r.cfg.NoScheduler || r.Store.IdleTxTimeout != 0 {
		return nil
	}
	reaper := &store.IdleTxReaper{Store: r.Store, IdleFor: r.cfg.Scheduler.Lease / 5, Interval: r.cfg.Scheduler.Lease,
		OnReapFunc: func(res store.ReapResult) {
			switch {
			case res.Err != nil:
				r.log.Warn("idle transaction reaper", "err", res.Err)
			case len(res.Refused) > 0:
				r.log.Warn("idle transaction reaper: the server refused KILL (grant CONNECTION_ADMIN or SUPER)", "sessions", res.Refused)
			case len(res.Killed) > 0:
				r.log.Warn("idle transaction reaper ended sessions idle in a transaction holding rows", "sessions", res.Killed)
			}
		}}
	r.reaper = reaper
	r.cfg.Scheduler.Observer = scheduler.Observers(r.cfg.Scheduler.Observer, scheduler.ObserverFunc(func(e scheduler.Event) {
		if e.Kind == scheduler.EventRescued && e.N > 0 {
			reaper.Poke()
		}
	}))
	return nil
}

// startReaper runs the reaper buildReaper built, if any.
func (r *Replica) startReaper(context.Context) error {
	reaper := r.reaper
	if reaper == nil {
		return nil
	}
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); reaper.Run(rctx) }()
	r.reaping = true
	r.onStop(func(context.Context) error { cancel(); <-done; r.reaping = false; return nil })
	r.log.Info("idle transaction reaper on", "idle_for", reaper.IdleFor, "interval", reaper.Interval)
	return nil
}

// buildServices builds the API's service and the operations service; with
// a scheduler, a submit wakes it and an ops change refreshes it.
func (r *Replica) buildServices(context.Context) error {
	reg := r.cfg.Registry
	remoteTypes := r.cfg.Scheduler.RemoteTypes
	isRemote := func(t string) bool { return slices.Contains(remoteTypes, t) }
	known := func(t string) bool { _, ok := reg.Lookup(t); return ok || isRemote(t) }
	sopts := service.Options{Store: r.Metrics.WrapServiceStore(r.Store), KnownTypeFunc: known, ValidateParamsFunc: reg.ValidateParams,
		RemoteTypeFunc: isRemote, Logs: r.Store}
	oopts := service.OpsOptions{Store: r.Store, KnownTypeFunc: known, ValidateParamsFunc: reg.ValidateParams}
	if s := r.Scheduler; s != nil {
		sopts.WakeFunc, sopts.WakeAtFunc, oopts.ChangedFunc = s.Wake, s.WakeAt, s.RefreshOps
	}
	r.Service = service.New(sopts)
	r.Service.SetWorkflowStore(r.Store)
	r.Ops = service.NewOps(oopts)
	if r.Scheduler != nil {
		svc := r.Service
		r.Scheduler.SetSpawnValidator(func(jobs []scheduler.SpawnJob) (*jobq.Spawn, error) {
			sp := &apitype.Spawn{Jobs: make([]apitype.WorkflowJob, len(jobs))}
			for i, j := range jobs {
				mr := j.MaxRetry
				pr := j.Priority
				wj := apitype.WorkflowJob{SubmitRequest: apitype.SubmitRequest{JobKey: j.JobKey, JobType: j.JobType, Params: j.Params, MaxRetry: &mr, Priority: &pr}}
				for _, d := range j.DependsOn {
					wj.DependsOn = append(wj.DependsOn, apitype.DependencyRef{JobKey: d})
				}
				sp.Jobs[i] = wj
			}
			return svc.ValidateSpawn(sp)
		})
	}
	var remote *scheduler.Remote
	if r.Scheduler != nil {
		remote = r.Scheduler.Remote()
	}
	r.Workers = service.NewWorkers(remote, r.Service)
	return nil
}

// startCallout starts the HTTP call-out executor on the scheduler's remote
// lane (only with remote job types).
func (r *Replica) startCallout(ctx context.Context) error {
	if r.Scheduler == nil || r.Scheduler.Remote() == nil {
		return nil
	}
	cc := r.cfg.Callout
	cc.WorkerID = cmp.Or(cc.WorkerID, "callout@"+r.cfg.Scheduler.Owner)
	cc.Logger = cmp.Or(cc.Logger, r.cfg.Logger)
	x, err := callout.New(ctx, r.Scheduler.Remote(), cc)
	if err != nil {
		return err
	}
	r.Callout = x
	x.Start(context.WithoutCancel(ctx))
	r.onStop(func(context.Context) error { x.Stop(); return nil })
	return nil
}

// putPeriodic creates or replaces the schedules from configuration.
func (r *Replica) putPeriodic(ctx context.Context) error {
	for _, p := range r.cfg.Periodic {
		if _, _, err := r.Ops.PutPeriodic(ctx, p, jobq.PeriodicSourceConfig); err != nil {
			return fmt.Errorf("periodic schedule %q: %w", p.Name, err)
		}
	}
	return nil
}

// serveAPI serves the HTTP API, the console, /metrics and the gRPC/Connect
// API on the listener (not with NoAPI).
func (r *Replica) serveAPI(context.Context) error {
	if r.cfg.NoAPI {
		return nil
	}
	cfg := r.cfg
	r.Addr = r.ln.Addr().String()
	hopts := httpapi.Options{MaxBodyBytes: cfg.MaxBodyBytes, ReadyFunc: r.ready.Check, Logger: cfg.Logger,
		AuthTokens: cfg.AuthTokens, Ops: r.Ops, Workers: r.Workers, WorkerTokens: cfg.WorkerTokens}
	if r.Callout != nil {
		hopts.Callouts = r.Callout
	}
	hopts.Alerts = r.Alerts
	h := httpapi.New(r.Service, hopts)
	if !cfg.NoUI {
		var err error
		if h, err = r.withConsole(h, cfg); err != nil {
			return err
		}
	}
	if cfg.WrapHandlerFunc != nil {
		h = cfg.WrapHandlerFunc(h, r.Store.DB())
	}
	h = r.Metrics.Handler(h) // GET /metrics, and API request metrics
	h, protocols, grpcShutdown := withGRPC(h, r.Service, r.Ops, r.Workers, r.ready.Check, cfg)
	h = httpapi.RequireHost(r.hosts, cfg.Logger, h) // every route, every protocol
	h = withBulkWriteDeadline(h, max(cmp.Or(cfg.WriteTimeout, WriteTimeoutDefault), BulkWriteTimeoutDefault))
	r.server = &http.Server{Handler: h, Protocols: protocols,
		ReadHeaderTimeout: cmp.Or(cfg.ReadHeaderTimeout, ReadHeaderTimeoutDefault),
		ReadTimeout:       cmp.Or(cfg.ReadTimeout, ReadTimeoutDefault),
		WriteTimeout:      cmp.Or(cfg.WriteTimeout, WriteTimeoutDefault),
		IdleTimeout:       cmp.Or(cfg.IdleTimeout, IdleTimeoutDefault),
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}
	r.server.RegisterOnShutdown(grpcShutdown)
	r.serveErr = make(chan error, 1)
	srv, ln := r.server, r.ln
	go func() { r.serveErr <- srv.Serve(ln) }()
	r.onStop(func(ctx context.Context) error {
		if r.Callout != nil {
			r.Callout.Stop() // before EndFetches: its fetches would answer at once, again and again
		}
		if r.Scheduler != nil {
			r.Scheduler.EndFetches() // long-polling fetches answer now, so the server's shutdown need not wait for them
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	r.log.Info("api listening", "addr", r.Addr, "auth", len(cfg.AuthTokens) > 0, "console", !cfg.NoUI)
	if len(cfg.AuthTokens) == 0 && !loopback(ln.Addr()) {
		r.log.Warn("the API listens beyond loopback without authentication; set --auth-token-file or "+auth.TokensEnv, "addr", r.Addr)
	}
	return nil
}

// withConsole serves the web console at /ui/ beside the API handler api.
func (r *Replica) withConsole(api http.Handler, cfg Config) (http.Handler, error) {
	owner := ""
	if r.Scheduler != nil {
		owner = r.Scheduler.Config().Owner
	}
	ui, err := console.New(console.Options{Service: r.Service, Ops: r.Ops, AuthTokens: cfg.AuthTokens,
		JobTypes: cfg.Registry.Types(), Owner: owner, Lease: cfg.Scheduler.Lease, Logger: cfg.Logger,
		Workers: r.Workers, RemoteTypes: cfg.Scheduler.RemoteTypes, Alerts: r.Alerts})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(console.Path, ui)
	mux.Handle("/ui", ui)
	mux.Handle("/", api)
	return mux, nil
}

// listenError says why binding listen failed and what to do: a port in
// use, a host that is neither an address nor a name that resolves ("0:8080"
// is looked up as a host name "0"), or anything else as it came.
func listenError(listen string, err error) error {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("listen %s: %w (another process uses the port? pick another with --listen)", listen, err)
	case errors.As(err, &dnsErr):
		host, _, _ := net.SplitHostPort(listen)
		return fmt.Errorf("listen %s: the host %q is not an address or a name that resolves: %w (--listen takes HOST:PORT, e.g. 0.0.0.0:8080 for every interface or 127.0.0.1:8080 for loopback)", listen, host, err)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("listen %s: %w (ports below 1024 need privileges; pick another with --listen)", listen, err)
	}
	return fmt.Errorf("listen %s: %w (check --listen: HOST:PORT, e.g. 127.0.0.1:8080)", listen, err)
}

func loopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// Err returns a channel that yields the API server's fatal error, if any.
func (r *Replica) Err() <-chan error { return r.serveErr }

// Stop stops the API (finishing open requests), then the scheduler
// gracefully (see scheduler.Stop), then the metrics, then closes the
// database: the cleanup stack of Start, last step first. A second Stop
// does nothing.
func (r *Replica) Stop(ctx context.Context) error {
	var errs []error
	for len(r.cleanup) > 0 {
		undo := r.cleanup[len(r.cleanup)-1]
		r.cleanup = r.cleanup[:len(r.cleanup)-1]
		errs = append(errs, undo(ctx))
	}
	return errors.Join(errs...)
}

// bulkPaths are the routes of the bulk operations, whose handlers may run
// longer than the server's WriteTimeout.
var bulkPaths = map[string]bool{
	"/v1/jobs/purge": true, "/v1/jobs/retry": true,
	"/jobq.v1.OpsService/PurgeJobs": true, "/jobq.v1.OpsService/RetryJobs": true, // the Connect and gRPC procedures
}

// withBulkWriteDeadline gives the bulk operations a write deadline d from
// the start of their handler instead of the server's WriteTimeout. It must
// wrap the handler the server calls, so the ResponseWriter is the server's.
func withBulkWriteDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && bulkPaths[r.URL.Path] {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
		}
		h.ServeHTTP(w, r)
	})
}
