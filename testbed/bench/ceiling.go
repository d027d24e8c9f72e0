package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/store"
)

// ceiling is the raw SQL minimum of one job's life, with no scheduler around
// it: Loops connections each repeat
//
//	BEGIN; SELECT id … FOR UPDATE SKIP LOCKED LIMIT Batch;
//	UPDATE … SET status='RUNNING', attempt+1, owner, lease_until, started_at WHERE id IN (…); COMMIT
//	BEGIN; INSERT INTO job_execution … SELECT … FROM job_queue WHERE id IN (…) FOR UPDATE;
//	UPDATE … SET status='SUCCESS', finished_at WHERE id IN (…) AND status='RUNNING'; COMMIT
//
// i.e. the rows jobq wrote for a job before a batched success stopped
// writing its execution-log row (the queue row claimed and completed, and
// the execution row written once, at completion) in the fewest statements: 8 per batch, 2 commits, no fencing per row, no handler
// dispatch, no heartbeat. Every jobq figure is reported as a ratio to it. With queueOnly
// (strategy ceiling-queue, shown for reference) the execution log is left
// out: the floor of any design that keeps its queue in a table, and the
// rows jobq now writes for a first-try success.
type ceiling struct {
	dsn          string
	loops, batch int
	queueOnly    bool
	counter      StmtCounter
	errs         errCounts
	completed    atomic.Int64
	db           *sql.DB
	cancel       context.CancelFunc
	wg           sync.WaitGroup
}

func newCeiling(dsn string, loops, batch int, queueOnly bool) *ceiling {
	return &ceiling{dsn: dsn, loops: loops, batch: batch, queueOnly: queueOnly}
}

func (c *ceiling) Start(ctx context.Context) error {
	db, err := OpenCountingDB(c.dsn, c.loops+1, &c.counter)
	if err != nil {
		return err
	}
	c.db = db
	ctx, c.cancel = context.WithCancel(ctx)
	for i := range c.loops {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.loop(ctx, fmt.Sprintf("ceiling-%d", i)) }()
	}
	return nil
}

func (c *ceiling) loop(ctx context.Context, owner string) {
	for ctx.Err() == nil {
		ids, err := c.claim(ctx, owner)
		if err != nil {
			if ctx.Err() == nil {
				c.errs.add(err)
				sleepCtx(ctx, 5*time.Millisecond)
			}
			continue
		}
		if len(ids) == 0 {
			sleepCtx(ctx, 5*time.Millisecond)
			continue
		}
		for {
			// Completion outlives ctx: a claimed batch is always finished.
			err := c.complete(context.WithoutCancel(ctx), ids)
			if err == nil {
				break
			}
			c.errs.add(err)
			if !store.IsRetryable(err) {
				return
			}
		}
		c.completed.Add(int64(len(ids)))
	}
}

func (c *ceiling) complete(ctx context.Context, ids []uint64) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	list := idList(ids)
	if !c.queueOnly {
		if _, err := tx.ExecContext(ctx, `INSERT INTO job_execution (job_id, attempt, owner, started_at, due_at, finished_at, outcome)
			SELECT id, attempt, owner, started_at, run_at, NOW(6), 'SUCCESS' FROM job_queue
			WHERE id IN (`+list+`) AND status = 'RUNNING' FOR UPDATE`); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE job_queue SET status = 'SUCCESS', lease_until = NULL,
		finished_at = NOW(6), update_time = NOW(6) WHERE id IN (`+list+`) AND status = 'RUNNING'`); err != nil {
		return err
	}
	return tx.Commit()
}

func (c *ceiling) claim(ctx context.Context, owner string) ([]uint64, error) {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT id FROM job_queue WHERE scan_status = 'WAITING' AND lane = 0 AND run_at <= NOW(6)
		ORDER BY priority DESC, run_at, id LIMIT ? FOR UPDATE SKIP LOCKED`, c.batch)
	if err != nil {
		return nil, err
	}
	ids, err := scanIDs(rows)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE job_queue SET status = 'RUNNING', attempt = attempt + 1, owner = ?,
		lease_until = NOW(6) + INTERVAL 30 SECOND, started_at = NOW(6), update_time = NOW(6)
		WHERE id IN (`+idList(ids)+`)`, owner); err != nil {
		return nil, err
	}
	return ids, tx.Commit()
}

func (c *ceiling) Completed() int64 { return c.completed.Load() }

func (c *ceiling) Counters() Counters {
	return Counters{Deadlocks: c.errs.deadlock.Load(), LockWaits: c.errs.lockWait.Load(),
		OtherErrors: c.errs.other.Load(), Statements: c.counter.Load(), RowsWritten: c.counter.Rows()}
}

func (c *ceiling) APIs() []string { return nil }

func (c *ceiling) Stop() error {
	c.cancel()
	c.wg.Wait()
	return c.db.Close()
}

func scanIDs(rows *sql.Rows) ([]uint64, error) {
	defer rows.Close()
	var ids []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// idList formats ids as a SQL list literal ("1,2,3"); ids are integers, so
// nothing needs quoting.
func idList(ids []uint64) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, id)
	}
	return b.String()
}
