package bench

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/testbed/replica"
)

// ReplicaConfig is what a jobq point varies.
type ReplicaConfig struct {
	Strategy     string        `json:"-"`                // scheduler.StrategySkipLocked or StrategyCAS
	Replicas     int           `json:"replicas"`         // scheduler instances (ceiling: loops)
	Workers      int           `json:"workers"`          // per replica
	BatchLimit   int           `json:"batch_limit"`      // scheduler.Config.BatchLimit (classic: scan LIMIT)
	PollInterval time.Duration `json:"poll_interval_ns"` // scheduler.Config.PollInterval
	PollJitter   time.Duration `json:"poll_jitter_ns"`   // 0 = NoJitter
	RunQueue     int           `json:"run_queue"`        // scheduler.Config.RunQueue (0: default, < 0: off)
	// ClaimsInFlight is scheduler.Config.ClaimsInFlight (0: default).
	ClaimsInFlight int `json:"claims_in_flight,omitempty"`
	// ClaimSlots is scheduler.Config.ClaimSlots (0: default, < 0: no
	// claim gate).
	ClaimSlots int `json:"claim_slots,omitempty"`
}

// schedulerConfig maps rc onto scheduler.Config, everything else default.
func (rc ReplicaConfig) schedulerConfig(owner string) scheduler.Config {
	return scheduler.Config{
		Owner: owner, Strategy: rc.Strategy, Workers: rc.Workers, BatchLimit: rc.BatchLimit, RunQueue: rc.RunQueue,
		PollInterval: rc.PollInterval, PollJitter: rc.PollJitter, NoJitter: rc.PollJitter == 0,
		ClaimsInFlight: rc.ClaimsInFlight, ClaimSlots: rc.ClaimSlots, ShutdownTimeout: 10 * time.Second, Logger: quietLogger(),
	}
}

// ServeFlags are the `jobq serve` flags equivalent to rc.
func (rc ReplicaConfig) ServeFlags() []string {
	return []string{"--strategy", rc.Strategy, "--workers", strconv.Itoa(rc.Workers),
		"--batch-limit", strconv.Itoa(rc.BatchLimit), "--poll-interval", rc.PollInterval.String(),
		"--poll-jitter", rc.PollJitter.String(), "--run-queue", strconv.Itoa(rc.RunQueue),
		"--claims-in-flight", strconv.Itoa(cmp.Or(rc.ClaimsInFlight, scheduler.ClaimsInFlightDefault)),
		"--claim-slots", strconv.Itoa(cmp.Or(rc.ClaimSlots, scheduler.ClaimSlotsDefault))}
}

// jobqInProc runs Replicas jobq schedulers in this process, each with its
// own connection pool (sized like `jobq serve`: workers/2+10) and, with
// withAPI, its own HTTP API whose submits wake that replica.
type jobqInProc struct {
	dsn       string
	rc        ReplicaConfig
	withAPI   bool
	counter   StmtCounter
	errs      errCounts
	completed atomic.Int64
	claims    atomic.Int64 // non-empty claims
	claimed   atomic.Int64 // jobs in them
	reps      []*app.Replica
}

func newJobqInProc(dsn string, rc ReplicaConfig, withAPI bool) *jobqInProc {
	return &jobqInProc{dsn: dsn, rc: rc, withAPI: withAPI}
}

func (j *jobqInProc) Start(ctx context.Context) error {
	for i := range j.rc.Replicas {
		db, err := OpenCountingDB(j.dsn, j.rc.Workers/2+10, &j.counter)
		if err != nil {
			return err
		}
		cfg := j.rc.schedulerConfig(fmt.Sprintf("bench-%s-%d", j.rc.Strategy, i))
		cfg.Observer = scheduler.ObserverFunc(func(e scheduler.Event) {
			switch e.Kind {
			case scheduler.EventClaimed:
				if len(e.Jobs) > 0 {
					j.claims.Add(1)
					j.claimed.Add(int64(len(e.Jobs)))
				}
			case scheduler.EventDBError:
				j.errs.add(e.Err)
			case scheduler.EventCompleted:
				if e.Applied && e.Completion.Outcome == jobq.OutcomeSuccess {
					j.completed.Add(1)
				}
			}
		})
		r, err := startReplica(ctx, db, &cfg, j.withAPI)
		if err != nil {
			db.Close()
			return err
		}
		j.reps = append(j.reps, r)
	}
	return nil
}

func (j *jobqInProc) Completed() int64 { return j.completed.Load() }

// claimStats returns the non-empty claims so far and the jobs they took.
func (j *jobqInProc) claimStats() (claims, jobs int64) { return j.claims.Load(), j.claimed.Load() }

func (j *jobqInProc) Counters() Counters {
	c := Counters{Deadlocks: j.errs.deadlock.Load(), LockWaits: j.errs.lockWait.Load(),
		OtherErrors: j.errs.other.Load(), Statements: j.counter.Load(), RowsWritten: j.counter.Rows()}
	for _, r := range j.reps {
		c.ClaimConflicts += r.Scheduler.Stats().ClaimConflicts
	}
	return c
}

func (j *jobqInProc) APIs() []string {
	var out []string
	for _, r := range j.reps {
		if r.Addr != "" {
			out = append(out, apiURL(r))
		}
	}
	return out
}

// Stop stops every replica at once (API, scheduler, pool: app's order).
func (j *jobqInProc) Stop() error {
	var wg sync.WaitGroup
	errs := make([]error, len(j.reps))
	for i, r := range j.reps {
		wg.Go(func() { errs[i] = r.Stop(context.Background()) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// jobqProcs runs Replicas `jobq serve` processes (the --procs mode). Their
// completions are counted from job_queue (SUCCESS rows, which only the
// current point's jobs have: a batched success writes no job_execution
// row); conflicts, errors and statements are not observable from outside
// and reported as -1.
type jobqProcs struct {
	bin, dsn, logDir string
	rc               ReplicaConfig
	admin            *sql.DB
	reps             []*replica.Replica
	completed        atomic.Int64
	cancel           context.CancelFunc
	done             chan struct{}
}

func newJobqProcs(bin, dsn, logDir string, admin *sql.DB, rc ReplicaConfig) *jobqProcs {
	return &jobqProcs{bin: bin, dsn: dsn, logDir: logDir, admin: admin, rc: rc}
}

func (p *jobqProcs) Start(ctx context.Context) error {
	if err := os.MkdirAll(p.logDir, 0o755); err != nil {
		return err
	}
	for i := range p.rc.Replicas {
		name := fmt.Sprintf("bench-%s-%d", p.rc.Strategy, i)
		r, err := replica.Start(ctx, replica.Spec{Binary: p.bin, DSN: p.dsn, Name: name, LogDir: p.logDir, Args: p.rc.ServeFlags()})
		if err != nil {
			return err
		}
		p.reps = append(p.reps, r)
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		for sleepCtx(ctx, 100*time.Millisecond) {
			var n int64
			if err := p.admin.QueryRowContext(ctx, `SELECT COUNT(*) FROM job_queue WHERE status = 'SUCCESS'`).Scan(&n); err == nil {
				p.completed.Store(n)
			}
		}
	}()
	return nil
}

func (p *jobqProcs) Completed() int64 { return p.completed.Load() }

func (p *jobqProcs) Counters() Counters {
	return Counters{ClaimConflicts: -1, Deadlocks: -1, LockWaits: -1, OtherErrors: -1, Statements: -1, RowsWritten: -1}
}

func (p *jobqProcs) APIs() []string {
	var out []string
	for _, r := range p.reps {
		out = append(out, r.URL())
	}
	return out
}

func (p *jobqProcs) Stop() error {
	if p.cancel != nil {
		p.cancel()
		<-p.done
	}
	for _, r := range p.reps {
		r.Stop(15 * time.Second)
	}
	return nil
}

// logDirFor is where --procs replicas write their logs.
func logDirFor(out string) string { return filepath.Join(out, "logs") }
