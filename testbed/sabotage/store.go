package sabotage

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/storeerr"
)

// The sabotaged statements. They are the testbed's, compiled into no
// product binary: the product's sql/queries hold only fenced writes.
const (
	// casUnguarded is the classic CAS on status alone (cas-guard). The
	// classic design has one waiting state for due and future jobs alike,
	// so SCHEDULED counts as waiting here: a stale read then claims a job
	// that was re-queued with a retry backoff, before it is due.
	casUnguarded = `UPDATE job_queue
SET status = 'RUNNING',
    attempt = attempt + 1,
    owner = ?,
    lease_until = NOW(6) + INTERVAL ? MICROSECOND,
    started_at = NOW(6),
    finished_at = NULL,
    update_time = NOW(6)
WHERE id = ? AND status IN ('WAITING', 'SCHEDULED')`

	// completeUnfencedSQL is the classic success completion by id (fencing).
	completeUnfencedSQL = `UPDATE job_queue
SET status = IF(cancel_requested = 1, 'CANCELED', 'SUCCESS'),
    lease_until = NULL,
    finished_at = NOW(6),
    update_time = NOW(6)
WHERE id = ?`

	// executionRecordUnfenced is the execution row of an unfenced
	// completion, by id and attempt whatever the status; an attempt that
	// already has a row keeps it (fencing).
	executionRecordUnfenced = `INSERT INTO job_execution (job_id, attempt, owner, started_at, due_at, finished_at, outcome, error)
SELECT q.id, q.attempt, COALESCE(q.owner, ''), COALESCE(q.started_at, NOW(6)), q.run_at,
       NOW(6), IF(q.cancel_requested = 1, 'CANCELED', ?), ?
FROM job_queue AS q
WHERE q.id = ? AND q.attempt = ?
FOR UPDATE
ON DUPLICATE KEY UPDATE job_id = job_execution.job_id`
)

// Store is a scheduler.Store that breaks the guarantees its Switches name
// and passes everything else to the store it wraps. db is the database of
// that store, on which the sabotaged statements run.
type Store struct {
	inner scheduler.Store
	db    *sql.DB
	sw    Switches
	rate  *rateWindowLocal // rate-window
}

// Wrap returns inner sabotaged by sw; db is inner's database (store.DB()).
func Wrap(inner scheduler.Store, db *sql.DB, sw Switches) *Store {
	if sw.UnblockOutsideTx {
		// 300 ms between the commit and the unblock: wide enough that a
		// kill-storm's three SIGKILLs land in some parent's window (at 30
		// ms one run in two lost nothing: the checker had nothing to see).
		inner = &unblockOutsideTx{Store: inner, DB: db, Gap: 300 * time.Millisecond}
	}
	if sw.KeyEarlyFree {
		inner = &keyEarlyFree{Store: inner, DB: db}
	}
	s := &Store{inner: inner, db: db, sw: sw}
	if sw.RatePerReplica {
		s.rate = &rateWindowLocal{db: db, starts: map[rateWindowKey][]time.Time{}}
	}
	return s
}

var _ scheduler.Store = (*Store)(nil)

// unretried marks a transient error permanent (keeping its cause for the
// logs), so the scheduler tries the operation once.
func unretried(err error) error {
	if !storeerr.IsRetryable(err) {
		return err
	}
	return storeerr.Mark(err, storeerr.KindPermanent, storeerr.Cause(err))
}

// out is the error the scheduler sees of any call: unretried under
// deadlock-retry.
func (s *Store) out(err error) error {
	if s.sw.NoDeadlockRetry {
		return unretried(err)
	}
	return err
}

// outcome is the error the scheduler sees of an outcome write: unretried
// under deadlock-retry and outcome-retry.
func (s *Store) outcome(err error) error {
	if s.sw.NoOutcomeRetry {
		return unretried(err)
	}
	return s.out(err)
}

// JobScanAvailable implements scheduler.Store.
func (s *Store) JobScanAvailable(ctx context.Context, limit int) ([]jobq.Fence, error) {
	r, err := s.inner.JobScanAvailable(ctx, limit)
	return r, s.out(err)
}

// JobClaimSkipLocked implements scheduler.Store.
func (s *Store) JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	r, err := s.inner.JobClaimSkipLocked(ctx, p)
	return r, s.out(err)
}

// JobClaimCAS implements scheduler.Store; under cas-guard each candidate
// is claimed on its status alone.
func (s *Store) JobClaimCAS(ctx context.Context, p jobq.ClaimCASParams) ([]jobq.ClaimedJob, int, error) {
	if !s.sw.NoCASGuard {
		r, n, err := s.inner.JobClaimCAS(ctx, p)
		return r, n, s.out(err)
	}
	r, n, err := s.claimCASUnguarded(ctx, p)
	return r, n, s.out(store.Mark(err))
}

// claimedFrom shapes the rows a sabotaged claim read back (JobGetClaimed)
// as the scheduler gets them.
func claimedFrom(rows []jobqdb.JobGetClaimedRow) []jobq.ClaimedJob {
	out := make([]jobq.ClaimedJob, len(rows))
	for i, r := range rows {
		out[i] = jobq.ClaimedJob{
			ID: r.ID, JobKey: r.JobKey, JobType: r.JobType, Params: json.RawMessage(r.Params),
			Priority: int(r.Priority), RetryTimes: int(r.RetryTimes), MaxRetry: int(r.MaxRetry),
			TimeoutMs: int(r.TimeoutMs), RunAt: r.RunAt.UTC(), Attempt: int(r.Attempt),
			LeaseUntil: r.LeaseUntil.Time.UTC(), StartedAt: r.StartedAt.Time.UTC(), CreateTime: r.CreateTime.UTC(),
			HasChildren: r.HasChildren, WorkflowID: uint64(r.WorkflowID.Int64),
		}
	}
	return out
}

// claimCASUnguarded is the store's cas claim (one READ COMMITTED
// transaction, per-row CAS, read-back of the rows won) with casUnguarded.
func (s *Store) claimCASUnguarded(ctx context.Context, p jobq.ClaimCASParams) (claimed []jobq.ClaimedJob, lost int, err error) {
	owner := sql.NullString{String: p.Owner, Valid: true}
	err = s.inTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
		lost, claimed = 0, nil
		var won []uint64
		for _, c := range p.Candidates {
			res, err := tx.ExecContext(ctx, casUnguarded, owner, p.Lease.Microseconds(), c.ID)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				lost++
				continue
			}
			won = append(won, c.ID)
		}
		if len(won) == 0 {
			return nil
		}
		rows, err := jobqdb.New(tx).JobGetClaimed(ctx, jobqdb.JobGetClaimedParams{Ids: won, Owner: owner})
		if err != nil {
			return err
		}
		claimed = claimedFrom(rows)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return claimed, lost, nil
}

// JobHeldBy implements scheduler.Store.
func (s *Store) JobHeldBy(ctx context.Context, owner string, within time.Duration) ([]jobq.ClaimedJob, error) {
	r, err := s.inner.JobHeldBy(ctx, owner, within)
	return r, s.out(err)
}

// LeaseRenewMany implements scheduler.Store.
func (s *Store) LeaseRenewMany(ctx context.Context, p jobq.LeaseRenewParams) ([]uint64, error) {
	r, err := s.inner.LeaseRenewMany(ctx, p)
	return r, s.out(err)
}

// JobFenceStates implements scheduler.Store.
func (s *Store) JobFenceStates(ctx context.Context, ids []uint64) ([]jobq.FenceState, error) {
	r, err := s.inner.JobFenceStates(ctx, ids)
	return r, s.out(err)
}

// JobCompleteMany implements scheduler.Store; under fencing its successes
// are written by id alone (row by row, in one transaction of their own) and
// the other outcomes, still fenced, by the wrapped store.
func (s *Store) JobCompleteMany(ctx context.Context, cs []jobq.Completion) ([]bool, error) {
	if !s.sw.NoFencing {
		r, err := s.inner.JobCompleteMany(ctx, cs)
		return r, s.outcome(err)
	}
	applied := make([]bool, len(cs))
	var rest []jobq.Completion
	var restAt, succAt []int
	for i, c := range cs {
		if c.Outcome == jobq.OutcomeSuccess {
			succAt = append(succAt, i)
		} else {
			rest, restAt = append(rest, c), append(restAt, i)
		}
	}
	if len(succAt) > 0 {
		err := s.inTx(ctx, nil, func(tx *sql.Tx) error {
			for _, i := range succAt {
				ok, err := completeUnfenced(ctx, tx, cs[i])
				if err != nil {
					return err
				}
				applied[i] = ok
			}
			return nil
		})
		if err != nil {
			return nil, s.outcome(store.Mark(err))
		}
	}
	if len(rest) > 0 {
		r, err := s.inner.JobCompleteMany(ctx, rest)
		if err != nil {
			return nil, s.outcome(err)
		}
		for k, i := range restAt {
			applied[i] = r[k]
		}
	}
	return applied, nil
}

// JobCompleteTx implements scheduler.Store; under fencing a success is
// written by id alone and fn runs in the same transaction.
func (s *Store) JobCompleteTx(ctx context.Context, c jobq.Completion, fn func(ctx context.Context, tx jobq.Tx) error) (bool, error) {
	if !s.sw.NoFencing || c.Outcome != jobq.OutcomeSuccess {
		r, err := s.inner.JobCompleteTx(ctx, c, fn)
		return r, s.outcome(err)
	}
	var applied bool
	err := s.inTx(ctx, nil, func(tx *sql.Tx) error {
		ok, err := completeUnfenced(ctx, tx, c)
		if err != nil || !ok {
			return err
		}
		applied = true
		return fn(ctx, tx)
	})
	if err != nil {
		return false, s.outcome(store.Mark(err))
	}
	return applied, nil
}

// completeUnfenced writes success completion c by its job's id alone, and
// its execution row; false when no job has that id.
func completeUnfenced(ctx context.Context, tx *sql.Tx, c jobq.Completion) (bool, error) {
	res, err := tx.ExecContext(ctx, completeUnfencedSQL, c.ID)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	var msg sql.NullString
	if e := jobq.SanitizeText(c.Error, jobq.MaxErrorRunes); e != "" {
		msg = sql.NullString{String: e, Valid: true}
	}
	_, err = tx.ExecContext(ctx, executionRecordUnfenced, string(c.Outcome), msg, c.ID, c.Attempt)
	return err == nil, err
}

// JobRescueCandidates implements scheduler.Store; under rescuer it finds
// no expired lease, ever.
func (s *Store) JobRescueCandidates(ctx context.Context, limit int) ([]jobq.Fence, error) {
	if s.sw.NoRescuer {
		return nil, nil
	}
	r, err := s.inner.JobRescueCandidates(ctx, limit)
	return r, s.out(err)
}

// JobRescueExpired implements scheduler.Store.
func (s *Store) JobRescueExpired(ctx context.Context, f jobq.Fence) (bool, error) {
	r, err := s.inner.JobRescueExpired(ctx, f)
	return r, s.out(err)
}

// JobIdleProbe implements scheduler.Store.
func (s *Store) JobIdleProbe(ctx context.Context, limit int) (jobq.IdleProbe, error) {
	r, err := s.inner.JobIdleProbe(ctx, limit)
	return r, s.out(err)
}

// JobScheduledNext implements scheduler.Store.
func (s *Store) JobScheduledNext(ctx context.Context) (jobq.ScheduledNext, error) {
	r, err := s.inner.JobScheduledNext(ctx)
	return r, s.out(err)
}

// JobPromoteDue implements scheduler.Store.
func (s *Store) JobPromoteDue(ctx context.Context, limit int) (int, error) {
	r, err := s.inner.JobPromoteDue(ctx, limit)
	return r, s.out(err)
}

// TypeLimits implements scheduler.OpsStore.
func (s *Store) TypeLimits(ctx context.Context) (map[string]int, error) {
	r, err := s.inner.TypeLimits(ctx)
	return r, s.out(err)
}

// TypeProbe implements scheduler.OpsStore.
func (s *Store) TypeProbe(ctx context.Context, jobType string) (jobq.TypeProbe, error) {
	r, err := s.inner.TypeProbe(ctx, jobType)
	return r, s.out(err)
}

// JobClaimLimited implements scheduler.OpsStore.
func (s *Store) JobClaimLimited(ctx context.Context, jobType string, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	if s.rate != nil {
		if r, handled, err := s.rate.claim(ctx, jobType, p); handled {
			return r, s.out(store.Mark(err))
		}
	}
	r, err := s.inner.JobClaimLimited(ctx, jobType, p)
	return r, s.out(err)
}

// PeriodicList implements scheduler.OpsStore.
func (s *Store) PeriodicList(ctx context.Context) ([]jobq.Periodic, error) {
	r, err := s.inner.PeriodicList(ctx)
	return r, s.out(err)
}

// PeriodicFire implements scheduler.OpsStore.
func (s *Store) PeriodicFire(ctx context.Context, name string, plan jobq.PeriodicPlanFunc) (jobq.PeriodicFireResult, error) {
	r, err := s.inner.PeriodicFire(ctx, name, plan)
	return r, s.out(err)
}

// PeriodicReleaseQueued implements scheduler.OpsStore.
func (s *Store) PeriodicReleaseQueued(ctx context.Context) ([]string, error) {
	r, err := s.inner.PeriodicReleaseQueued(ctx)
	return r, s.out(err)
}

// JobPurge implements scheduler.OpsStore.
func (s *Store) JobPurge(ctx context.Context, p jobq.PurgeParams) (jobq.PurgeResult, error) {
	r, err := s.inner.JobPurge(ctx, p)
	return r, s.out(err)
}

// inTx runs fn in a transaction on s.db (opts nil: the session's level),
// committing when fn returns nil.
func (s *Store) inTx(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
