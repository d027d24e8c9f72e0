package sabotage

import (
	"context"
	"database/sql"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/scheduler"
)

// unblockOutsideTx is the unblock-outside-tx switch's decorator: it moves the unblock of workflow
// children out of the parent's completion transaction, as a naive
// implementation would have it. Before a successful completion of a job
// with children it adds back, in its own statement, what the completion's
// in-transaction decrement will take; after the completion it decrements
// the children in another statement, whatever the completion's fate (no
// fence), Gap later. A replica killed in between leaves children BLOCKED
// for ever (stuck_waiting_on_done_parents); a stale completion unblocks
// them although its run no longer owned the parent, and two unblocks of one
// child race (child_before_parent_success, child_run_twice).
type unblockOutsideTx struct {
	scheduler.Store
	DB  *sql.DB
	Gap time.Duration
}

const (
	addBackSQL = `UPDATE job_queue AS q
JOIN (SELECT child_id, COUNT(*) AS n FROM job_dependency WHERE parent_id = ? GROUP BY child_id) AS d ON d.child_id = q.id
SET q.blocked_parents = q.blocked_parents + d.n
WHERE q.status = 'BLOCKED'`
	unblockSQL = `UPDATE job_queue AS q
JOIN (SELECT child_id, COUNT(*) AS n FROM job_dependency WHERE parent_id = ? GROUP BY child_id) AS d ON d.child_id = q.id
SET q.status = IF(q.blocked_parents <= d.n, 'WAITING', q.status), q.blocked_parents = q.blocked_parents - d.n
WHERE q.status = 'BLOCKED'`
)

func (u *unblockOutsideTx) before(ctx context.Context, cs []jobq.Completion) []uint64 {
	var ids []uint64
	for _, c := range cs {
		if c.HasChildren && c.Outcome == jobq.OutcomeSuccess {
			if _, err := u.DB.ExecContext(ctx, addBackSQL, c.ID); err == nil {
				ids = append(ids, c.ID)
			}
		}
	}
	return ids
}

func (u *unblockOutsideTx) after(ids []uint64) {
	if len(ids) == 0 {
		return
	}
	time.Sleep(u.Gap)
	for _, id := range ids {
		_, _ = u.DB.ExecContext(context.Background(), unblockSQL, id)
	}
}

// JobCompleteMany completes cs, with the unblock outside its transaction.
func (u *unblockOutsideTx) JobCompleteMany(ctx context.Context, cs []jobq.Completion) ([]bool, error) {
	ids := u.before(ctx, cs)
	defer u.after(ids)
	return u.Store.JobCompleteMany(ctx, cs)
}

// JobCompleteTx is transactional completion, with the unblock outside it.
func (u *unblockOutsideTx) JobCompleteTx(ctx context.Context, c jobq.Completion, fn func(ctx context.Context, tx jobq.Tx) error) (bool, error) {
	ids := u.before(ctx, []jobq.Completion{c})
	defer u.after(ids)
	return u.Store.JobCompleteTx(ctx, c, fn)
}
