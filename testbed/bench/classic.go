package bench

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/store"
)

// classic reproduces the classic design faithfully, as its own loop (jobq
// is not crippled to imitate it). Each replica:
//
//   - scans every Poll exactly from a random phase (a fixed ticker: no
//     jitter, no drain, no
//     wake-up on submit): SELECT id … WHERE status='WAITING' … LIMIT Batch
//     (200), through the same idx_scan order as jobq so only the loop differs;
//   - claims each row with its own autocommitted compare-and-set on status
//     alone: UPDATE … SET status='RUNNING' WHERE id=? AND status='WAITING'
//     (0 rows = another replica won: a claim conflict);
//   - hands every won row to a pool of Workers goroutines through an
//     unbounded queue (a thread pool's work queue), whatever the free slots;
//   - completes each job with its own autocommitted UPDATE … WHERE id=?
//     (no fencing, no batching).
//
// started_at is set by the claim so pickup latency is measured the same way
// as jobq's.
type classic struct {
	dsn                string
	replicas, workers  int
	batch              int
	poll               time.Duration
	withAPI            bool
	counter            StmtCounter
	errs               errCounts
	completed, lost    atomic.Int64
	dbs                []*sql.DB
	apis               []*app.Replica
	cancel             context.CancelFunc
	scanners, handlers sync.WaitGroup
}

func newClassic(dsn string, replicas, workers, batch int, poll time.Duration, withAPI bool) *classic {
	return &classic{dsn: dsn, replicas: replicas, workers: workers, batch: batch, poll: poll, withAPI: withAPI}
}

func (c *classic) Start(ctx context.Context) error {
	ctx, c.cancel = context.WithCancel(ctx)
	for r := range c.replicas {
		db, err := OpenCountingDB(c.dsn, c.workers+2, &c.counter)
		if err != nil {
			return err
		}
		c.dbs = append(c.dbs, db)
		if c.withAPI {
			a, err := startReplica(ctx, db, nil, true) // API only: the classic design has no wake-up
			if err != nil {
				return err
			}
			c.apis = append(c.apis, a)
		}
		queue := make(chan uint64, 1<<20)
		owner := fmt.Sprintf("classic-%d", r)
		for range c.workers {
			c.handlers.Add(1)
			go func() { defer c.handlers.Done(); c.work(db, queue) }()
		}
		c.scanners.Add(1)
		go func() {
			defer c.scanners.Done()
			defer close(queue)
			c.scanLoop(ctx, db, owner, queue)
		}()
	}
	return nil
}

func (c *classic) scanLoop(ctx context.Context, db *sql.DB, owner string, queue chan<- uint64) {
	// Replicas start at arbitrary times, so each ticks at its own phase.
	if !sleepCtx(ctx, time.Duration(rand.Int64N(int64(c.poll)))) {
		return
	}
	t := time.NewTicker(c.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rows, err := db.QueryContext(ctx, `SELECT id FROM job_queue WHERE scan_status = 'WAITING' AND lane = 0 AND run_at <= NOW(6)
			ORDER BY priority DESC, run_at, id LIMIT ?`, c.batch)
		if err != nil {
			if ctx.Err() == nil {
				c.errs.add(err)
			}
			continue
		}
		ids, err := scanIDs(rows)
		if err != nil {
			c.errs.add(err)
			continue
		}
		for _, id := range ids {
			if ctx.Err() != nil {
				return
			}
			res, err := db.ExecContext(ctx, `UPDATE job_queue SET status = 'RUNNING', owner = ?, started_at = NOW(6),
				update_time = NOW(6) WHERE id = ? AND status = 'WAITING'`, owner, id)
			if err != nil {
				if ctx.Err() == nil {
					c.errs.add(err)
				}
				continue
			}
			if n, _ := res.RowsAffected(); n == 0 {
				c.lost.Add(1)
				continue
			}
			queue <- id
		}
	}
}

// work runs the no-op handler and completes by id. Queued jobs are finished
// even after Stop, like a thread pool's graceful shutdown.
func (c *classic) work(db *sql.DB, queue <-chan uint64) {
	for id := range queue {
		for {
			_, err := db.Exec(`UPDATE job_queue SET status = 'SUCCESS', finished_at = NOW(6), update_time = NOW(6) WHERE id = ?`, id)
			if err == nil {
				c.completed.Add(1)
				break
			}
			c.errs.add(err)
			if !store.IsRetryable(err) {
				break
			}
		}
	}
}

func (c *classic) Completed() int64 { return c.completed.Load() }

func (c *classic) Counters() Counters {
	return Counters{ClaimConflicts: c.lost.Load(), Deadlocks: c.errs.deadlock.Load(), LockWaits: c.errs.lockWait.Load(),
		OtherErrors: c.errs.other.Load(), Statements: c.counter.Load(), RowsWritten: c.counter.Rows()}
}

func (c *classic) APIs() []string {
	var out []string
	for _, a := range c.apis {
		out = append(out, apiURL(a))
	}
	return out
}

func (c *classic) Stop() error {
	c.cancel()
	c.scanners.Wait()
	c.handlers.Wait()
	// The API replicas share the scanners' pools, which their Stop closes.
	for _, a := range c.apis {
		_ = a.Stop(context.Background())
	}
	for _, db := range c.dbs {
		db.Close()
	}
	return nil
}
