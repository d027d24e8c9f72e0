package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/chaos/checker"
	"github.com/jobq/jobq/testbed/dbprovider"
	"github.com/jobq/jobq/testbed/jobtypes"
)

// ErrInvalid is returned (wrapped) by Run when the checker found a
// violation or a fault could not be injected; the run's files are written
// all the same.
var ErrInvalid = errors.New("chaos run invalid")

// Run runs one chaos experiment and writes result.json, history.ndjson,
// report.md, timeline.png and logs/ into cfg.OutDir. It returns the result
// and an error wrapping ErrInvalid when the run is not valid, or another
// error when the experiment itself could not run (no database, a replica
// that would not start).
func Run(ctx context.Context, cfg Config) (*ResultFile, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Binary == "" {
		b, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Binary = b
	}
	log := cfg.Log.With("component", "chaos", "run", cfg.Name)
	logDir := filepath.Join(cfg.OutDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	cl := &cluster{cfg: cfg, logDir: logDir, args: cfg.serveArgs()}

	// The database: a topology the harness starts, the provider's, or our
	// own mariadbd we may kill.
	cl.toxi = newToxiServer()
	topo, err := startTopology(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("start %s topology: %w", cfg.Topology, err)
	}
	if topo != nil {
		defer topo.close()
		cl.topo = topo
		cl.server = &dbprovider.Server{Kind: cfg.Topology, DSN: topo.serverDSN(), Description: topo.describe()}
	} else if cfg.OwnDB {
		local, err := dbprovider.StartLocal(ctx, dbprovider.LocalOptions{})
		if err != nil {
			return nil, fmt.Errorf("start own database (db-restart needs one): %w", err)
		}
		defer local.Stop()
		cl.local = local
		cl.server = &dbprovider.Server{Kind: dbprovider.KindLocal, DSN: local.DSN(), Local: local,
			Description: fmt.Sprintf("throwaway local %s on 127.0.0.1:%d (the run's own: db-restart kills it; --dsn and JOBQ_DSN are not used)", filepath.Base(local.Binary), local.Port)}
		fmt.Fprintf(os.Stderr, "database provider: %s\n", cl.server.Description)
	} else {
		srv, err := dbprovider.Provide(ctx, dbprovider.Options{DSN: cfg.DSN})
		if err != nil {
			return nil, err
		}
		defer srv.Close()
		cl.server = srv
	}
	dsn, drop, err := cl.server.CreateDatabase(ctx, "jobq_chaos")
	if err != nil {
		return nil, err
	}
	cl.dsn = dsn
	if cfg.Keep {
		log.Info("database kept", "dsn", redact.DSN(dsn))
	} else {
		defer func() {
			if err := drop(); err != nil {
				log.Warn("drop database", "err", err)
			}
		}()
	}
	st, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 4})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if _, err := st.MigrateUp(ctx); err != nil {
		return nil, err
	}
	db := st.DB()
	if cfg.RateLimited > 0 {
		// Before the replicas start: each reads its limited types at start.
		if _, err := st.TypeSetRateLimit(ctx, jobtypes.EffectLimited, jobq.RateLimit{Starts: cfg.RateStarts, Period: cfg.RatePeriod, PerKey: cfg.RateKeys > 0}); err != nil {
			return nil, fmt.Errorf("set the rate limit: %w", err)
		}
	}
	offset, err := dbClockOffset(ctx, db)
	if err != nil {
		return nil, err
	}
	toDB := func(t time.Time) time.Time { return t.Add(offset).UTC().Round(time.Microsecond) }

	// Links and replicas. On the run's own server the replicas connect as
	// a user without SUPER (or READ_ONLY ADMIN), as production replicas do,
	// so that read_only refuses their writes as it would a demoted primary's.
	// With user-supplied faults (a read_only flip on their server) too.
	replicaDSN := dsn
	if cl.local != nil || len(cfg.FaultCmds) > 0 {
		if replicaDSN, err = createReplicaUser(ctx, db, dsn); err != nil {
			return nil, err
		}
	}
	mc, err := mysql.ParseDSN(replicaDSN)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= cfg.Replicas; i++ {
		name := fmt.Sprintf("replica-%d", i)
		upstream := mc.Addr
		if cl.topo != nil {
			upstream = cl.topo.upstream(i - 1)
		}
		l, err := newLink(cl.toxi, name, upstream)
		if err != nil {
			cl.stopAll(time.Second)
			return nil, err
		}
		pdsn, err := proxiedDSN(replicaDSN, l.Addr())
		if err != nil {
			l.stop()
			cl.stopAll(time.Second)
			return nil, err
		}
		cl.nodes = append(cl.nodes, &node{name: name, link: l, dsn: pdsn})
	}
	defer cl.stopAll(cfg.ShutdownTimeout + 10*time.Second)
	for _, n := range cl.nodes {
		if _, err := cl.startIncarnation(ctx, n); err != nil {
			return nil, err
		}
	}
	if cfg.Executor != ExecutorLocal {
		if cl.remote, err = cl.startRemote(ctx, db, toDB); err != nil {
			return nil, fmt.Errorf("start remote workers: %w", err)
		}
		defer cl.remote.stop(5 * time.Second)
	}
	log.Info("cluster ready", "replicas", cfg.Replicas, "executor", cfg.Executor, "workers", strings.Join(cfg.RemoteWorkers, ","),
		"server", st.Server.Description, "out", cfg.OutDir)

	// The periodic schedule, if any, fires beside the workload.
	var periodicFrom time.Time
	if cfg.Periodic != "" {
		if periodicFrom, err = cl.startPeriodic(ctx); err != nil {
			return nil, err
		}
		log.Info("periodic schedule added", "name", PeriodicName, "cron", cfg.Periodic, "overlap", cfg.PeriodicOverlap, "first", periodicFrom)
	}

	// Workload and faults, concurrently.
	runID := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	start := time.Now()
	var submits []checker.Submit
	var faults []checker.Fault
	var submitted atomic.Int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); submits = cl.workload(ctx, start, runID, toDB, &submitted) }()
	go func() {
		defer wg.Done()
		in := &injector{cl: cl, db: db, toDB: toDB}
		faults = in.run(ctx, start, cfg.plan())
	}()
	stopProgress := progress(ctx, log, db, &submitted, cfg.Jobs)
	stopSupervisor := make(chan struct{})
	crashes := cl.supervise(ctx, stopSupervisor, toDB)
	workerCrashes := func() []checker.Fault { return nil }
	if cl.remote != nil {
		workerCrashes = cl.remote.supervise(ctx, stopSupervisor)
	}
	wg.Wait()
	workloadDur := time.Since(start)
	sleepCtx(ctx, time.Until(start.Add(cfg.Duration)))
	// Let the last fault play out before draining: a zombie woken by
	// SIGCONT must get the chance to try its late completions.
	if len(faults) > 0 {
		sleepCtx(ctx, 2*cfg.Lease+cfg.RescueInterval)
	}
	var schedules []checker.Schedule
	if cfg.Periodic != "" {
		schedules = append(schedules, cl.endPeriodic(ctx, db, periodicFrom))
	}

	// Drain: every acknowledged job terminal, or the drain timeout.
	acked := 0
	for _, s := range submits {
		if s.Acked() {
			acked++
		}
	}
	drainStart := time.Now()
	drainDeadline := drainStart.Add(cfg.DrainTimeout)
	for ctx.Err() == nil && time.Now().Before(drainDeadline) {
		var terminal, open int
		err := db.QueryRowContext(ctx, `SELECT COALESCE(SUM(status IN ('SUCCESS','FAILED','CANCELED')),0),
			COALESCE(SUM(status NOT IN ('SUCCESS','FAILED','CANCELED')),0) FROM job_queue`).Scan(&terminal, &open)
		// A failover may lose acknowledged jobs for good: on a topology,
		// no open job left after a lease and a rescue is drained too.
		settled := cl.topo != nil && time.Since(drainStart) > 2*cfg.Lease+cfg.RescueInterval
		if err == nil && open == 0 && (terminal >= acked || settled) {
			break
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	drainDur := time.Since(drainStart)
	stopProgress()
	close(stopSupervisor)
	faults = append(faults, crashes()...)
	faults = append(faults, workerCrashes()...)
	var acks []checker.Ack
	var renewals []checker.Renewal
	if cl.remote != nil {
		cl.remote.stop(5 * time.Second)
		acks, renewals = cl.remote.Acks(), cl.remote.Renewals()
	}
	var retried int64
	if cl.topo != nil {
		retried = cl.retriedConflicts(ctx)
	}
	slices.SortFunc(faults, func(a, b checker.Fault) int { return a.Start.Compare(b.Start) })
	stopped := time.Now()
	cl.stopAll(cfg.ShutdownTimeout + 10*time.Second)

	// Judge the database's record.
	h := checker.History{Submits: submits, Faults: faults, Acks: acks, Renewals: renewals, Lease: cfg.Lease, RescueInterval: cfg.RescueInterval, Start: toDB(start),
		Stopped: toDB(stopped), Schedules: schedules}
	lctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := LoadHistory(lctx, db, &h); err != nil {
		return nil, err
	}
	if h.SlowRenewals, h.Stalls, err = ReplicaLogEvidence(logDir, toDB); err != nil {
		return nil, err
	}
	// The checker has one input path: the run's NDJSON history, written
	// first and read back, is what it judges (`jobq check` reads the same).
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, err
	}
	histPath := filepath.Join(cfg.OutDir, "history.ndjson")
	if err := checker.WriteNDJSONFile(histPath, h); err != nil {
		return nil, fmt.Errorf("write history: %w", err)
	}
	judged, err := checker.ReadNDJSONFile(histPath)
	if err != nil {
		return nil, fmt.Errorf("read history back: %w", err)
	}
	res := checker.Check(judged)
	rf := &ResultFile{
		SchemaVersion: SchemaVersion, Name: cfg.Name, Config: configJSON(cfg), StartedAt: h.Start,
		Environment: Environment{GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(),
			Server: st.Server.Description, Database: cl.server.Description},
		WorkloadS: workloadDur.Seconds(), DrainS: drainDur.Seconds(), FaultErrors: []string{}, Result: res, OutDir: cfg.OutDir,
	}
	if cl.topo != nil {
		cl.topo.report(lctx, rf, &h)
		rf.Topology.RetriedConflicts = retried
	}
	for _, f := range faults {
		if f.Err != "" {
			rf.FaultErrors = append(rf.FaultErrors, fmt.Sprintf("%s on %s: %s", f.Kind, f.Target, f.Err))
		}
	}
	rf.Valid = res.Valid && len(rf.FaultErrors) == 0
	if err := writeOutputs(cfg.OutDir, rf, &h); err != nil {
		return rf, err
	}
	log.Info("chaos run done", "valid", rf.Valid, "acknowledged", res.Counts.Acknowledged, "lost", res.Counts.Lost,
		"stuck", res.Counts.Stuck, "tx_duplicates", res.Counts.TxEffectDuplicates, "overlaps", res.Counts.OverlappingLeases,
		"stale_accepted", res.Counts.StaleCompletionsAccepted, "report", filepath.Join(cfg.OutDir, "report.md"))
	if !rf.Valid {
		var what []string
		for _, v := range res.Violations {
			what = append(what, fmt.Sprintf("%s=%d", v.Check, v.Count))
		}
		what = append(what, rf.FaultErrors...)
		return rf, fmt.Errorf("%w: %s (see %s)", ErrInvalid, strings.Join(what, ", "), filepath.Join(cfg.OutDir, "report.md"))
	}
	return rf, nil
}

func writeOutputs(dir string, rf *ResultFile, h *checker.History) error {
	if err := writeJSON(filepath.Join(dir, "result.json"), rf); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.md"))
	if err != nil {
		return err
	}
	WriteReport(f, rf)
	if err := f.Close(); err != nil {
		return err
	}
	return WriteTimeline(filepath.Join(dir, "timeline.png"), rf)
}

// dbClockOffset is the database clock minus the harness clock, measured at
// the midpoint of one round trip; the harness adds it to its own fault and
// submit times so every time in the history is on the database clock.
func dbClockOffset(ctx context.Context, db *sql.DB) (time.Duration, error) {
	before := time.Now()
	var now time.Time
	if err := db.QueryRowContext(ctx, "SELECT NOW(6)").Scan(&now); err != nil {
		return 0, fmt.Errorf("read database clock: %w", err)
	}
	after := time.Now()
	return now.Sub(before.Add(after.Sub(before) / 2)), nil
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// progress logs the workload's progress every 5 s until stopped.
func progress(ctx context.Context, log interface{ Info(string, ...any) }, db *sql.DB, submitted *atomic.Int64, total int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				var terminal int
				qctx, cancel := context.WithTimeout(ctx, time.Second)
				_ = db.QueryRowContext(qctx, "SELECT COUNT(*) FROM job_queue WHERE status IN ('SUCCESS','FAILED','CANCELED')").Scan(&terminal)
				cancel()
				log.Info("progress", "submitted", submitted.Load(), "of", total, "terminal", terminal)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// replicaUser is the account replicas use on the run's own server: all
// privileges on the run's database and no global ones (no SUPER, no
// READ_ONLY ADMIN), so read_only applies to it.
const replicaUser, replicaPassword = "jobq_replica", "jobq-replica"

// createReplicaUser creates replicaUser with every privilege on dsn's
// database and returns dsn rewritten to use it.
func createReplicaUser(ctx context.Context, db *sql.DB, dsn string) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", err
	}
	for _, q := range []string{
		"CREATE USER IF NOT EXISTS '" + replicaUser + "'@'%' IDENTIFIED BY '" + replicaPassword + "'",
		"GRANT ALL PRIVILEGES ON `" + c.DBName + "`.* TO '" + replicaUser + "'@'%'",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return "", fmt.Errorf("replica user: %w", err)
		}
	}
	c.User, c.Passwd = replicaUser, replicaPassword
	return c.FormatDSN(), nil
}
