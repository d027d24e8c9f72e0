package store

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
	"github.com/jobq/jobq/storeerr"
)

// JobScanAvailable reads up to limit due WAITING jobs (id and attempt only,
// from idx_scan) without locking. It is the idle probe and the read half of
// the cas claim.
func (s *Store) JobScanAvailable(ctx context.Context, limit int) ([]jobq.Fence, error) {
	rows, err := s.q.JobScanAvailable(ctx, int32(limit))
	if err != nil {
		return nil, errorf("scan: %w", err)
	}
	out := make([]jobq.Fence, len(rows))
	for i, r := range rows {
		out[i] = jobq.Fence{ID: r.ID, Attempt: int(r.Attempt)}
	}
	return out, nil
}

// JobClaimSkipLocked claims up to p.Limit due jobs in one READ COMMITTED
// transaction: SELECT … FOR UPDATE SKIP LOCKED returning the rows, and one
// UPDATE … WHERE id IN (…) stamping started_at and the lease from its own
// NOW(6) (so the stamp is taken while the rows are held); then, after
// COMMIT, a primary-key read of that stamp. The rows are locked for two round
// trips (the UPDATE and the COMMIT), and at READ COMMITTED the locking read
// locks only the rows it returns, never a gap of idx_scan where peers'
// completions, rescues and submits insert (readCommittedTx): over a slow link
// a claim makes no peer wait on it.
// The claim writes no job_execution row: each attempt's row is written once,
// when its outcome is known (completion, rescue), from the claimed job row —
// and a batched success writes none: the job row is its record.
// Returns ErrSkipLockedUnsupported on servers without SKIP LOCKED.
func (s *Store) JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	if !s.Server.SkipLocked {
		return nil, ErrSkipLockedUnsupported
	}
	// The paused and limited types are read before the locking read and
	// given to it as a constant list, so it locks only rows it can claim
	// (see JobLockAvailable); '' (no job type) keeps the list non-empty.
	excluded, err := s.q.TypesExcluded(ctx)
	if err != nil {
		return nil, errorf("claim: excluded types: %w", err)
	}
	excluded = append(excluded, "")
	var rows []jobqdb.JobLockAvailableRow
	var ids []uint64
	var stampSent time.Time
	slots := min(p.Slots, jobq.ClaimSlotsMax)
	var lockWaitSet bool // MySQL: the session's lock wait timeout is the slot wait's
	claimTx := func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		if slots > 0 {
			if err := s.takeClaimSlot(ctx, tx, q, slots, p.OnSlotWait, &lockWaitSet); err != nil {
				return err
			}
		}
		var err error
		rows, err = q.JobLockAvailable(ctx, jobqdb.JobLockAvailableParams{Excluded: excluded, Limit: int32(p.Limit)})
		if s.afterClaimLock != nil && err == nil {
			s.afterClaimLock(ctx, tx)
		}
		if err != nil || len(rows) == 0 {
			return err
		}
		ids = make([]uint64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		owner := sql.NullString{String: p.Owner, Valid: true}
		stampSent = time.Now()
		n, err := q.JobClaimMany(ctx, jobqdb.JobClaimManyParams{Owner: owner, LeaseUs: p.Lease.Microseconds(), Ids: ids})
		if err != nil {
			return err
		}
		if int(n) != len(ids) {
			// Locked WAITING rows cannot change under us; anything else is a bug.
			return errorf("claimed %d of %d locked rows", n, len(ids))
		}
		return nil
	}
	err = s.claimTx(ctx, &lockWaitSet, claimTx)
	if errors.Is(err, errClaimSlotsBusy) {
		// Every slot stayed held for ClaimSlotWait (a holder may be
		// frozen mid-claim): claim without one rather than not at all.
		slots = 0
		err = s.readCommittedTx(ctx, claimTx)
	}
	if err != nil {
		return nil, errorf("claim skiplocked: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	// The stamp is read after COMMIT, by primary key: the claimed rows are
	// this replica's for a lease, and no statement but a rescue after the
	// lease (or this replica's own outcome write, once a handler ran) can
	// change them. A failed read is retried: the claim has committed.
	// Not under ctx: the claim has committed, and a stopping replica (ctx
	// cancelled by Stop) must still get its rows back to release them —
	// failing here would strand them RUNNING until a rescue.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(p.Lease/2, time.Second))
	defer cancel()
	started, err := storeerr.DoV(rctx, claimReadBack, "claim.started_at", func() (sql.NullTime, error) {
		t, err := s.q.JobClaimedStartedAt(rctx, ids[0])
		return t, Mark(err)
	})
	if err != nil {
		return nil, errorf("claim skiplocked: read started_at of committed claim: %w", err)
	}
	now := started.Time.UTC()
	claimed := make([]jobq.ClaimedJob, len(rows))
	for i, r := range rows {
		claimed[i] = jobq.ClaimedJob{
			ID: r.ID, JobKey: r.JobKey, JobType: r.JobType, Params: json.RawMessage(r.Params),
			Priority: int(r.Priority), RetryTimes: int(r.RetryTimes), MaxRetry: int(r.MaxRetry),
			TimeoutMs: int(r.TimeoutMs), RunAt: r.RunAt.UTC(), Attempt: int(r.Attempt) + 1,
			LeaseUntil: now.Add(p.Lease), StartedAt: now, CreateTime: r.CreateTime.UTC(), HasChildren: r.HasChildren, WorkflowID: uint64(r.WorkflowID.Int64), ConcurrencyKey: r.ConcurrencyKey.String,
			// The UPDATE that stamped the lease was sent then: the three
			// round trips before it (isolation, BEGIN, the locking read)
			// are not taken from the run's local lease — on a slow link
			// they were most of the time its first renewal had.
			LeaseBase: stampSent,
		}
	}
	return claimed, nil
}

// claimReadBack retries the read of a committed claim's stamp on transient
// errors (a lost connection): a few tries, well inside the lease.
var claimReadBack = storeerr.RetryPolicy{MaxAttempts: 5, Max: 200 * time.Millisecond}

// readCommittedTx runs fn in a READ COMMITTED transaction: its locking
// statements lock only the rows they touch (no gap locks, and a row that
// does not match is unlocked once evaluated), and an INSERT … SELECT reads
// its source rows without locking them. Every multi-statement write
// transaction of the scheduler uses it: the skiplocked claim, batched
// completions, rescues — each of their statements is fenced on the row it
// writes, so the level does not change what they write — so that over a
// slow link the locks they hold between round trips never cover a gap where
// a peer's claim, completion, rescue or submit inserts an index entry. (At
// REPEATABLE READ a claim's FOR UPDATE SKIP LOCKED locks the gap before the
// first WAITING entry of idx_scan, exactly where a peer's completion inserts
// its SUCCESS entry.) Measured: a 50-row claim is as fast at READ COMMITTED
// as at REPEATABLE READ on MariaDB 10.11 (BenchmarkClaimSkipLocked). A server that refuses READ COMMITTED writes (binlog_format=STATEMENT:
// error 1665) gets the session's level from then on.
func (s *Store) readCommittedTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.readCommittedTxOn(ctx, s.db, fn)
}

// readCommittedTxOn is readCommittedTx begun on b.
func (s *Store) readCommittedTxOn(ctx context.Context, b txBeginner, fn func(tx *sql.Tx) error) error {
	if !s.claimDefaultIso.Load() {
		err := withTxOn(ctx, b, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, fn)
		if ErrorNumber(err) != ErrNumBinlogStmtMode {
			return Mark(err)
		}
		s.claimDefaultIso.Store(true)
	}
	return Mark(withTxOn(ctx, b, nil, fn))
}

// claimTx runs a skiplocked claim's transaction fn (readCommittedTx). In
// the MySQL dialect the slot wait sets the session's lock wait timeout and
// puts it back inside the transaction (takeClaimSlot); when it could not
// (the claim's context ended between the statements, and the transaction
// with it), the pooled connection would keep the wait's timeout for
// whatever runs on it next. So there fn runs on one connection of the pool,
// set reports whether the timeout is still the wait's afterwards, and if so
// it is put back on that connection, or the connection is closed.
func (s *Store) claimTx(ctx context.Context, set *bool, fn func(tx *sql.Tx) error) error {
	if s.Server.MariaDB {
		return s.readCommittedTx(ctx, fn)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return Mark(err)
	}
	defer conn.Close()
	*set = false
	err = s.readCommittedTxOn(ctx, conn, fn)
	if *set {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if _, rerr := conn.ExecContext(rctx, restoreLockWait); rerr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	return err
}

// claimRows claims ids (rows this transaction already locked) for the
// limited-type claim: it writes the claim (stamped with the database clock
// while the rows are held) and reads the claimed rows back.
func (s *Store) claimRows(ctx context.Context, q *jobqdb.Queries, p jobq.ClaimParams, ids []uint64) ([]jobq.ClaimedJob, error) {
	owner := sql.NullString{String: p.Owner, Valid: true}
	if _, err := q.JobClaimMany(ctx, jobqdb.JobClaimManyParams{Owner: owner, LeaseUs: p.Lease.Microseconds(), Ids: ids}); err != nil {
		return nil, err
	}
	return s.readClaimed(ctx, q, owner, ids)
}

// readClaimed reads back the rows a cas or limited claim won (ids, locked
// by this transaction).
func (s *Store) readClaimed(ctx context.Context, q *jobqdb.Queries, owner sql.NullString, ids []uint64) ([]jobq.ClaimedJob, error) {
	rows, err := q.JobGetClaimed(ctx, jobqdb.JobGetClaimedParams{Ids: ids, Owner: owner})
	if err != nil {
		return nil, err
	}
	out := make([]jobq.ClaimedJob, len(rows))
	for i, r := range rows {
		out[i] = jobq.ClaimedJob{
			ID: r.ID, JobKey: r.JobKey, JobType: r.JobType, Params: json.RawMessage(r.Params),
			Priority: int(r.Priority), RetryTimes: int(r.RetryTimes), MaxRetry: int(r.MaxRetry),
			TimeoutMs: int(r.TimeoutMs), RunAt: r.RunAt.UTC(), Attempt: int(r.Attempt),
			LeaseUntil: r.LeaseUntil.Time.UTC(), StartedAt: r.StartedAt.Time.UTC(), CreateTime: r.CreateTime.UTC(), HasChildren: r.HasChildren, WorkflowID: uint64(r.WorkflowID.Int64), ConcurrencyKey: r.ConcurrencyKey.String,
		}
	}
	return out, nil
}

// JobClaimCAS runs the per-row compare-and-set for each candidate in one
// READ COMMITTED transaction (readCommittedTx: a candidate it lost is not
// kept locked) and reads back the rows it won.
// lost counts candidates another replica took first (claim conflicts).
func (s *Store) JobClaimCAS(ctx context.Context, p jobq.ClaimCASParams) (claimed []jobq.ClaimedJob, lost int, err error) {
	owner := sql.NullString{String: p.Owner, Valid: true}
	err = s.readCommittedTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		lost = 0
		won := make([]uint64, 0, len(p.Candidates))
		for _, c := range p.Candidates {
			n, err := q.JobClaimCAS(ctx, jobqdb.JobClaimCASParams{Owner: owner, LeaseUs: p.Lease.Microseconds(), ID: c.ID, Attempt: int32(c.Attempt)})
			if err != nil {
				return err
			}
			if n == 0 {
				lost++
				continue
			}
			won = append(won, c.ID)
		}
		if len(won) == 0 {
			claimed = nil
			return nil
		}
		var err error
		claimed, err = s.readClaimed(ctx, q, owner, won)
		return err
	})
	if err != nil {
		return nil, 0, errorf("claim cas: %w", err)
	}
	return claimed, lost, nil
}

// JobHeldBy returns the runs owner holds on the database that were claimed
// within the last `within` (database clock) — its recent RUNNING rows —
// shaped as a claim returns them (Attempt is the run's attempt). A replica
// reads them after a claim whose answer was lost, to find claims that
// committed although it never heard of them. Errors: ErrUnavailable when the
// database cannot answer.
func (s *Store) JobHeldBy(ctx context.Context, owner string, within time.Duration) ([]jobq.ClaimedJob, error) {
	rows, err := s.q.JobHeldBy(ctx, jobqdb.JobHeldByParams{
		Owner: sql.NullString{String: owner, Valid: true}, WithinUs: within.Microseconds(),
	})
	if err != nil {
		return nil, errorf("held by %q: %w", owner, err)
	}
	held := make([]jobq.ClaimedJob, len(rows))
	for i, r := range rows {
		held[i] = jobq.ClaimedJob{
			ID: r.ID, JobKey: r.JobKey, JobType: r.JobType, Params: json.RawMessage(r.Params),
			Priority: int(r.Priority), RetryTimes: int(r.RetryTimes), MaxRetry: int(r.MaxRetry),
			TimeoutMs: int(r.TimeoutMs), RunAt: r.RunAt.UTC(), Attempt: int(r.Attempt),
			LeaseUntil: r.LeaseUntil.Time.UTC(), StartedAt: r.StartedAt.Time.UTC(), CreateTime: r.CreateTime.UTC(), HasChildren: r.HasChildren, WorkflowID: uint64(r.WorkflowID.Int64), ConcurrencyKey: r.ConcurrencyKey.String,
		}
	}
	return held, nil
}

// ClaimSlotWait is the longest a skiplocked claim waits for a claim slot
// when every one below its ClaimParams.Slots is held, in whole seconds (the
// unit of a lock wait timeout); after it the claim runs without a slot, so a
// holder frozen mid-claim costs its peers at most this per claim.
const ClaimSlotWait = time.Second

// errClaimSlotsBusy reports that every claim slot stayed held for
// ClaimSlotWait.
var errClaimSlotsBusy = errors.New("claim gate: every claim slot stayed held")

// takeClaimSlot locks one claim_gate row below slots in the claim's
// transaction tx, which holds it until it ends: the lowest free one
// (ClaimSlotTake, SKIP LOCKED), else it waits up to ClaimSlotWait for a
// random one — a lock wait, so the waiting claim costs the server nothing
// until the holder's COMMIT wakes it. It returns errClaimSlotsBusy when the
// wait times out (the transaction then holds nothing it took here: a lock
// wait timeout rolls back the statement, and the caller rolls back the
// transaction). A wait, whatever its end, is reported to onWait (nil:
// not reported) with its length. MariaDB bounds the wait in the statement (SET STATEMENT
// innodb_lock_wait_timeout = n FOR …); MySQL has no per-statement lock wait
// timeout, so there the session's innodb_lock_wait_timeout is set around
// the statement and put back; *lockWaitSet is true while it is the wait's
// (claimTx puts it back when this could not).
func (s *Store) takeClaimSlot(ctx context.Context, tx *sql.Tx, q *jobqdb.Queries, slots int, onWait func(time.Duration, bool), lockWaitSet *bool) error {
	free, err := q.ClaimSlotTake(ctx, uint16(slots))
	if err != nil || len(free) > 0 {
		return err
	}
	began := time.Now()
	wait := int(cmp.Or(s.claimSlotWait, ClaimSlotWait) / time.Second)
	slot := rand.IntN(slots)
	const lockSlot = "SELECT slot FROM claim_gate WHERE slot = ? FOR UPDATE"
	if s.Server.MariaDB {
		_, err = tx.ExecContext(ctx, "SET STATEMENT innodb_lock_wait_timeout = ? FOR "+lockSlot, wait, slot)
	} else {
		if _, err = tx.ExecContext(ctx, "SET @jobq_lock_wait = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = ?", wait); err != nil {
			return err
		}
		*lockWaitSet = true
		_, err = tx.ExecContext(ctx, lockSlot, slot)
		if s.afterSlotWait != nil {
			s.afterSlotWait()
		}
		_, rerr := tx.ExecContext(ctx, restoreLockWait)
		if rerr == nil {
			*lockWaitSet = false
		} else if err == nil {
			err = rerr
		}
	}
	timedOut := ErrorNumber(err) == ErrNumLockWaitTimeout
	if onWait != nil && (err == nil || timedOut) {
		onWait(time.Since(began), timedOut)
	}
	if timedOut {
		return errClaimSlotsBusy
	}
	return err
}

// restoreLockWait puts back the session lock wait timeout the MySQL
// dialect's slot wait saved in @jobq_lock_wait.
const restoreLockWait = "SET SESSION innodb_lock_wait_timeout = @jobq_lock_wait"
