package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
)

func jobFromRow(r jobqdb.JobQueue) jobq.Job {
	return jobq.Job{
		ID: r.ID, JobKey: r.JobKey, JobType: r.JobType, Params: json.RawMessage(r.Params),
		Status: jobq.JobState(r.Status), Priority: int(r.Priority), RetryTimes: int(r.RetryTimes),
		MaxRetry: int(r.MaxRetry), TimeoutMs: int(r.TimeoutMs), RunAt: r.RunAt.UTC(),
		Attempt: int(r.Attempt), Owner: r.Owner.String, LeaseUntil: nullTimePtr(r.LeaseUntil),
		LastError: r.LastError.String, StartedAt: nullTimePtr(r.StartedAt),
		FinishedAt: nullTimePtr(r.FinishedAt), CancelRequested: r.CancelRequested,
		CreateTime: r.CreateTime.UTC(), UpdateTime: r.UpdateTime.UTC(), RequestHash: r.RequestHash,
		WorkflowID: uint64(r.WorkflowID.Int64), BlockedParents: int(r.BlockedParents),
		UniqueUntil: nullTimePtr(r.UniqueUntil), UniqueWhileActive: r.UniqueWhileActive, KeyReleased: r.KeyRelease != 0, ConcurrencyKey: r.ConcurrencyKey.String,
		RateKey: r.RateKey.String,
	}
}

// JobSubmit inserts a job: SCHEDULED when p.RunAt is ahead of the database
// clock, else WAITING. When job_key is already held it returns the holder
// with created=false if its RequestHash matches, or ErrKeyConflict —
// unless the holder's uniqueness window has passed (UniqueUntil on the
// database clock, or UniqueWhileActive and terminal): then the submit
// releases the key and inserts a new job, in one transaction.
// Concurrent submits of one key yield exactly one holder (UNIQUE
// uk_job_key on (job_key, key_release)).
//
// A new job costs one autocommitted statement on MariaDB ≥ 10.5 (INSERT …
// RETURNING gives back the stored row); elsewhere the INSERT and a read-back
// by id. A job_key that already exists costs one more read (by key), and a
// holder with a window one more transaction.
func (s *Store) JobSubmit(ctx context.Context, p jobq.SubmitParams) (job jobq.Job, created bool, err error) {
	if p.ConcurrencyKey != "" || (p.RateKey != "" && !p.Windowed()) {
		// A rate key rides on the batch insert (insertMany), as a
		// concurrency key does; with a window, on JobInsertUnique.
		return s.submitKeyed(ctx, p)
	}
	if p.Windowed() {
		var id int64
		id, err = s.jobInsertUnique(ctx, s.q, p)
		if err == nil {
			return s.readBack(ctx, id)
		}
	} else if s.Server.InsertReturning && !s.noReturning.Load() {
		job, err = s.jobInsertReturning(ctx, p)
		if ErrorNumber(err) == ErrNumParseError {
			// The server did not take RETURNING after all (a proxy
			// reporting another server's version): nothing was inserted;
			// use the INSERT and read-back from now on.
			s.noReturning.Store(true)
			return s.JobSubmit(ctx, p)
		}
		if err == nil {
			return job, true, nil
		}
	} else {
		var id int64
		id, err = s.jobInsert(ctx, p)
		if err == nil {
			job, err = s.JobGet(ctx, uint64(id))
			if err != nil {
				return jobq.Job{}, false, errorf("submit: read back: %w", err)
			}
			return job, true, nil
		}
	}
	if !isDupKey(err) {
		return jobq.Job{}, false, errorf("submit: %w", err)
	}
	existing, gerr := s.JobGetByKey(ctx, p.JobKey)
	if gerr != nil {
		return jobq.Job{}, false, errorf("submit: read existing key: %w", gerr)
	}
	if existing.UniqueUntil != nil || existing.UniqueWhileActive {
		id, released, err := s.jobKeyReleaseInsert(ctx, p)
		if err != nil {
			return jobq.Job{}, false, errorf("submit: release key: %w", err)
		}
		if released {
			return s.readBack(ctx, id)
		}
		if existing, gerr = s.JobGetByKey(ctx, p.JobKey); gerr != nil {
			return jobq.Job{}, false, errorf("submit: read existing key: %w", gerr)
		}
	}
	if existing.RequestHash != p.RequestHash {
		return existing, false, jobq.ErrKeyConflict
	}
	return existing, false, nil
}

func (s *Store) readBack(ctx context.Context, id int64) (jobq.Job, bool, error) {
	job, err := s.JobGet(ctx, uint64(id))
	if err != nil {
		return jobq.Job{}, false, errorf("submit: read back: %w", err)
	}
	return job, true, nil
}

// jobKeyReleaseInsert releases p.JobKey from its holder if the holder's
// window has passed and inserts p as the key's new holder, in one
// transaction; released is false (nothing written) when the key is still
// held.
func (s *Store) jobKeyReleaseInsert(ctx context.Context, p jobq.SubmitParams) (id int64, released bool, err error) {
	err = s.WithTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		n, err := q.JobKeyRelease(ctx, p.JobKey)
		if err != nil || n == 0 {
			released = false
			return err
		}
		released = true
		id, err = s.jobInsertUnique(ctx, q, p)
		return err
	})
	return id, released, err
}

// jobInsertUnique inserts p with its uniqueness window (JobInsertUnique).
func (s *Store) jobInsertUnique(ctx context.Context, q *jobqdb.Queries, p jobq.SubmitParams) (int64, error) {
	var runAt any
	if p.RunAt != nil {
		runAt = p.RunAt.UTC()
	}
	return q.JobInsertUnique(ctx, jobqdb.JobInsertUniqueParams{
		JobKey: p.JobKey, JobType: p.JobType, Params: p.Params, RequestHash: p.RequestHash, RunAt: runAt,
		Priority: int32(p.Priority), MaxRetry: int32(p.MaxRetry), TimeoutMs: int32(p.TimeoutMs), Lane: s.laneOf(p.JobType),
		UniqueForMs: p.UniqueForMs, UniqueWhileActive: p.UniqueWhileActive,
		RateKey: sql.NullString{String: p.RateKey, Valid: p.RateKey != ""},
	})
}

// submitKeyed is JobSubmit for a job with a concurrency key or a rate key
// (and no uniqueness window): the batch
// submit of one job (its key locked, the job parked, then the admission
// pass, in one transaction), and the stored job read back.
func (s *Store) submitKeyed(ctx context.Context, p jobq.SubmitParams) (jobq.Job, bool, error) {
	out, err := s.JobSubmitMany(ctx, []jobq.SubmitParams{p})
	if err != nil {
		return jobq.Job{}, false, err
	}
	job, err := s.JobGet(ctx, out[0].ID)
	if err != nil {
		return jobq.Job{}, false, errorf("submit: read back: %w", err)
	}
	if out[0].Conflict {
		return job, false, jobq.ErrKeyConflict
	}
	return job, out[0].Created, nil
}

// jobInsert runs JobInsert or JobInsertAt and returns the new id.
func (s *Store) jobInsert(ctx context.Context, p jobq.SubmitParams) (int64, error) {
	if p.RunAt == nil {
		return s.q.JobInsert(ctx, jobqdb.JobInsertParams{
			JobKey: p.JobKey, JobType: p.JobType, Params: p.Params, RequestHash: p.RequestHash,
			Priority: int32(p.Priority), MaxRetry: int32(p.MaxRetry), TimeoutMs: int32(p.TimeoutMs),
			Lane: s.laneOf(p.JobType),
		})
	}
	return s.q.JobInsertAt(ctx, jobqdb.JobInsertAtParams{
		JobKey: p.JobKey, JobType: p.JobType, Params: p.Params, RequestHash: p.RequestHash,
		Priority: int32(p.Priority), MaxRetry: int32(p.MaxRetry), TimeoutMs: int32(p.TimeoutMs),
		RunAt: p.RunAt.UTC(), Lane: s.laneOf(p.JobType),
	})
}

// jobColumns is every job_queue column in the order of jobqdb.JobQueue
// (what sqlc expands SELECT * to in JobGetByID).
const jobColumns = `id, job_key, job_type, params, request_hash, status, priority, retry_times, max_retry, timeout_ms, run_at, attempt, owner, lease_until, last_error, started_at, finished_at, cancel_requested, create_time, update_time`

// jobInsertReturningSQL and jobInsertAtReturningSQL are JobInsert and
// JobInsertAt (sql/queries/jobs.sql: same columns, values and status rule)
// with MariaDB's RETURNING of the stored row. sqlc's MySQL parser does not
// know RETURNING, so they are written here, like submit_many.go's
// multi-row INSERT.
const (
	jobInsertReturningSQL = `INSERT INTO job_queue (
    job_key, job_type, params, request_hash, status, priority, max_retry,
    timeout_ms, run_at, create_time, update_time, lane
) VALUES (?, ?, ?, ?, 'WAITING', ?, ?, ?, NOW(6), NOW(6), NOW(6), ?)
RETURNING ` + jobColumns
	jobInsertAtReturningSQL = `INSERT INTO job_queue (
    job_key, job_type, params, request_hash, status, priority, max_retry,
    timeout_ms, run_at, create_time, update_time, lane
) VALUES (?, ?, ?, ?, IF(? > NOW(6), 'SCHEDULED', 'WAITING'), ?, ?, ?, ?, NOW(6), NOW(6), ?)
RETURNING ` + jobColumns
)

// jobInsertReturning inserts p with one statement and returns the stored
// row (MariaDB ≥ 10.5).
func (s *Store) jobInsertReturning(ctx context.Context, p jobq.SubmitParams) (jobq.Job, error) {
	var row *sql.Row
	if p.RunAt == nil {
		row = s.db.QueryRowContext(ctx, jobInsertReturningSQL, p.JobKey, p.JobType, p.Params, p.RequestHash,
			int32(p.Priority), int32(p.MaxRetry), int32(p.TimeoutMs), s.laneOf(p.JobType))
	} else {
		runAt := p.RunAt.UTC()
		row = s.db.QueryRowContext(ctx, jobInsertAtReturningSQL, p.JobKey, p.JobType, p.Params, p.RequestHash,
			runAt, int32(p.Priority), int32(p.MaxRetry), int32(p.TimeoutMs), runAt, s.laneOf(p.JobType))
	}
	var r jobqdb.JobQueue
	if err := row.Scan(&r.ID, &r.JobKey, &r.JobType, &r.Params, &r.RequestHash, &r.Status, &r.Priority, &r.RetryTimes,
		&r.MaxRetry, &r.TimeoutMs, &r.RunAt, &r.Attempt, &r.Owner, &r.LeaseUntil, &r.LastError, &r.StartedAt,
		&r.FinishedAt, &r.CancelRequested, &r.CreateTime, &r.UpdateTime); err != nil {
		return jobq.Job{}, err
	}
	return jobFromRow(r), nil
}

// JobGet returns the job with id, or ErrNotFound.
// A SUCCESS job carries the output of its successful attempt.
func (s *Store) JobGet(ctx context.Context, id uint64) (jobq.Job, error) {
	r, err := s.q.JobGetByID(ctx, id)
	if err != nil {
		return jobq.Job{}, notFound(err)
	}
	j := jobFromRow(r)
	if j.Status == jobq.StateSuccess {
		if j.Output, err = s.JobOutput(ctx, j.ID, j.Attempt); err != nil {
			return jobq.Job{}, err
		}
	}
	return j, nil
}

// JobGetByKey returns the job that holds jobKey or, when every job of the
// key released it (uniqueness windows), the newest; ErrNotFound if none.
func (s *Store) JobGetByKey(ctx context.Context, jobKey string) (jobq.Job, error) {
	r, err := s.q.JobGetByKey(ctx, jobKey)
	if err != nil {
		return jobq.Job{}, notFound(err)
	}
	return jobFromRow(r), nil
}

// JobList returns one page of jobs and the cursor of the next page (0 when
// this page is the last).
func (s *Store) JobList(ctx context.Context, p jobq.ListParams) ([]jobq.Job, uint64, error) {
	before := p.BeforeID
	if before == 0 {
		before = math.MaxInt64
	}
	// Fetch one extra row to know whether another page exists.
	lim := int32(p.Limit + 1)
	var rows []jobqdb.JobQueue
	var err error
	switch {
	case p.KeyPrefix != "":
		rows, err = s.q.JobListByKeyPrefix(ctx, jobqdb.JobListByKeyPrefixParams{KeyLike: likePrefix(p.KeyPrefix),
			Status: string(p.Status), JobType: p.JobType, BeforeID: before, Limit: lim})
	case p.Status == jobq.StateRunning && p.JobType != "":
		rows, err = s.q.JobListRunningByType(ctx, jobqdb.JobListRunningByTypeParams{JobType: p.JobType, BeforeID: before, Limit: lim})
	case p.Status != "" && p.JobType != "":
		rows, err = s.q.JobListByTypeStatus(ctx, jobqdb.JobListByTypeStatusParams{JobType: p.JobType, TypeStatus: typeStatus(p.Status), Status: string(p.Status), BeforeID: before, Limit: lim})
	case p.Status == jobq.StateWaiting:
		rows, err = s.q.JobListWaiting(ctx, jobqdb.JobListWaitingParams{BeforeID: before, Limit: lim})
	case p.Status == jobq.StateParked:
		rows, err = s.q.JobListParked(ctx, jobqdb.JobListParkedParams{BeforeID: before, Limit: lim})
	case p.Status != "":
		rows, err = s.q.JobListByStatus(ctx, jobqdb.JobListByStatusParams{IndexStatus: indexStatus(p.Status), Status: string(p.Status), BeforeID: before, Limit: lim})
	case p.JobType != "":
		rows, err = s.q.JobListByType(ctx, jobqdb.JobListByTypeParams{JobType: p.JobType, BeforeID: before, Limit: lim})
	default:
		rows, err = s.q.JobList(ctx, jobqdb.JobListParams{BeforeID: before, Limit: lim})
	}
	if err != nil {
		return nil, 0, errorf("list jobs: %w", err)
	}
	var next uint64
	if len(rows) > p.Limit {
		rows = rows[:p.Limit]
		next = rows[len(rows)-1].ID
	}
	jobs := make([]jobq.Job, len(rows))
	for i, r := range rows {
		jobs[i] = jobFromRow(r)
	}
	return jobs, next, nil
}

// likePrefix makes a LIKE pattern matching strings that start with prefix:
// its wildcards and the escape character are escaped, then '%' appended.
func likePrefix(prefix string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(prefix) + "%"
}

// JobCancel cancels a job: a WAITING, SCHEDULED or BLOCKED job becomes
// CANCELED at once (a workflow job's descendants with it, by their
// dependencies' policies); a RUNNING
// job gets cancel_requested=1, its handler's context is cancelled within one
// heartbeat and it ends CANCELED whatever the handler returns. It returns the
// job after the change; ErrInvalidState for a terminal job. A job that moved
// between the two statements (a run released or re-queued after the first,
// a job claimed after it) is tried again.
func (s *Store) JobCancel(ctx context.Context, id uint64) (jobq.Job, error) {
	for try := 0; ; try++ {
		var n int64
		err := s.WithTx(ctx, func(tx *sql.Tx) error {
			q := s.q.WithTx(tx)
			// A PARKED job's key is locked before its row, as every
			// admission locks them (a completion's pick of the key's next
			// job locks that job's idx_key_parked entry under the key, then
			// its row): row first here would deadlock with it. Read without
			// a lock first; a keyed job parks again only from FAILED or
			// CANCELED, which this cancel leaves alone.
			if st, err := q.JobKeyStates(ctx, []uint64{id}); err != nil {
				return err
			} else if len(st) == 1 && jobq.JobState(st[0].Status) == jobq.StateParked {
				if _, err := q.KeyLock(ctx, []string{st[0].ConcurrencyKey.String}); err != nil {
					return err
				}
			}
			// Whether the job was admitted (its concurrency key's slot is
			// freed with the cancel) or PARKED (it frees nothing), read
			// under the row lock the cancel takes anyway.
			before, err := q.JobLockState(ctx, id)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			if err != nil {
				return err
			}
			if n, err = q.JobCancelWaiting(ctx, id); err != nil || n == 0 {
				return err
			}
			t := keyTally{}
			if err := settleOne(ctx, q, id, t); err != nil { // a workflow job's descendants are cancelled with it
				return err
			}
			if jobq.JobState(before.Status) == jobq.StateParked {
				return nil
			}
			return admitKeys(ctx, tx, t)
		})
		if err != nil {
			return jobq.Job{}, errorf("cancel: %w", err)
		}
		if n == 0 {
			if n, err = s.q.JobCancelRunning(ctx, id); err != nil {
				return jobq.Job{}, errorf("cancel: %w", err)
			}
		}
		job, err := s.JobGet(ctx, id)
		if err != nil {
			return jobq.Job{}, err
		}
		if n > 0 || job.Status == jobq.StateCanceled || (job.Status == jobq.StateRunning && job.CancelRequested) {
			return job, nil
		}
		if job.Terminal() || try == 2 {
			return job, jobq.ErrInvalidState
		}
	}
}

// JobRetry moves a FAILED or CANCELED job back to WAITING, due now, with
// retry_times reset to 0 — BLOCKED instead for a workflow job whose parents
// have not all succeeded (WorkflowRetry re-arms a workflow's descendants). ErrInvalidState for any other status.
func (s *Store) JobRetry(ctx context.Context, id uint64) (jobq.Job, error) {
	var n int64
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		// A keyed job is parked under its key's lock, taken before its
		// row, then admitted if the key has a free slot.
		t, keyed, err := lockKeysOf(ctx, q, []uint64{id})
		if err != nil {
			return err
		}
		if n, err = q.JobRetryManual(ctx, id); err != nil || n == 0 {
			return err
		}
		// A workflow job whose parents have not all succeeded waits for
		// them again (BLOCKED) instead of running.
		if err := reblockRetried(ctx, q, []uint64{id}); err != nil {
			return err
		}
		if !keyed {
			return nil
		}
		if err := parkedKeysOf(ctx, q, []uint64{id}, t); err != nil {
			return err
		}
		return admitKeys(ctx, tx, t)
	})
	if err != nil {
		return jobq.Job{}, errorf("retry: %w", err)
	}
	job, err := s.JobGet(ctx, id)
	if err != nil {
		return jobq.Job{}, err
	}
	if n == 0 {
		return job, jobq.ErrInvalidState
	}
	return job, nil
}

// JobExecutions returns a job's attempts in order; ErrNotFound if no such job.
// job_execution holds the attempts whose outcome is known (a row is written
// once, when the attempt ends); the attempt of a RUNNING job is in flight and
// has no row yet, so it is read from the job row (owner, started_at) and
// listed last, with no finished_at and no outcome. A success the batched
// completion wrote has no row either: the job row (owner, started_at,
// finished_at) is its record, listed last with outcome SUCCESS.
func (s *Store) JobExecutions(ctx context.Context, id uint64) ([]jobq.Execution, error) {
	job, err := s.JobGet(ctx, id)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.ExecutionListByJob(ctx, id)
	if err != nil {
		return nil, errorf("executions: %w", err)
	}
	info, err := s.runInfoByJob(ctx, id)
	if err != nil {
		return nil, errorf("executions: %w", err)
	}
	out := make([]jobq.Execution, len(rows), len(rows)+1)
	for i, r := range rows {
		out[i] = jobq.Execution{JobID: r.JobID, Attempt: int(r.Attempt), Owner: r.Owner, StartedAt: r.StartedAt.UTC(),
			FinishedAt: nullTimePtr(r.FinishedAt), Outcome: jobq.Outcome(r.Outcome.String), Error: r.Error.String}
		if r.Output.Valid {
			out[i].Output = json.RawMessage(r.Output.String)
		}
	}
	last := len(out) == 0 || out[len(out)-1].Attempt < job.Attempt
	switch {
	case job.Status == jobq.StateRunning && job.StartedAt != nil && last:
		out = append(out, jobq.Execution{JobID: job.ID, Attempt: job.Attempt, Owner: job.Owner, StartedAt: *job.StartedAt})
	case job.Status == jobq.StateSuccess && job.Attempt > 0 && last:
		// A batched success writes no execution row: the job row records
		// its attempt (ExecutionRecordKeptMany).
		e := jobq.Execution{JobID: job.ID, Attempt: job.Attempt, Owner: job.Owner, Outcome: jobq.OutcomeSuccess,
			FinishedAt: job.FinishedAt}
		if job.StartedAt != nil {
			e.StartedAt = *job.StartedAt
		} else if job.FinishedAt != nil {
			e.StartedAt = *job.FinishedAt
		}
		out = append(out, e)
	}
	for i := range out {
		if ri, ok := info[out[i].Attempt]; ok && ri.Progress.Valid {
			p := ri.Progress.Float64
			out[i].Progress, out[i].ProgressMessage = &p, ri.ProgressMessage.String
		}
	}
	return out, nil
}

// JobCountByStatus returns how many jobs are in each status.
func (s *Store) JobCountByStatus(ctx context.Context) (map[string]int64, error) {
	rows, err := s.q.JobCountByStatus(ctx)
	if err != nil {
		return nil, errorf("count by status: %w", err)
	}
	m := map[string]int64{}
	for _, r := range rows {
		m[r.Status] = r.N
	}
	return m, nil
}

// DBNow returns the database clock (UTC).
func (s *Store) DBNow(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := s.db.QueryRowContext(ctx, "SELECT NOW(6)").Scan(&t)
	return t.UTC(), Mark(err)
}

// JobIdleProbe is the skiplocked scan's idle probe and the promoter's probe
// in one index-only statement (JobIdleProbe in sql/queries/jobs.sql):
// how many jobs are due for the scan (up to limit, at least 1), and the
// earliest SCHEDULED run_at
// (zero when none) with the database clock.
func (s *Store) JobIdleProbe(ctx context.Context, limit int) (jobq.IdleProbe, error) {
	r, err := s.q.JobIdleProbe(ctx, int32(max(limit, 1)))
	if err != nil {
		return jobq.IdleProbe{}, errorf("idle probe: %w", err)
	}
	out := jobq.IdleProbe{Due: int(r.Due), Scheduled: jobq.ScheduledNext{DBNow: r.DbNow.UTC()}}
	if r.NextRunAt.Year() > 1 {
		out.Scheduled.Next = r.NextRunAt.UTC()
	}
	return out, nil
}

// JobScheduledNext reads the earliest run_at among SCHEDULED jobs and the
// database clock in one index-only statement (idx_due).
func (s *Store) JobScheduledNext(ctx context.Context) (jobq.ScheduledNext, error) {
	r, err := s.q.JobScheduledNext(ctx)
	if err != nil {
		return jobq.ScheduledNext{}, errorf("scheduled next: %w", err)
	}
	out := jobq.ScheduledNext{DBNow: r.DbNow.UTC()}
	switch t := r.NextRunAt.(type) {
	case time.Time:
		out.Next = t.UTC()
	case nil:
	default:
		return jobq.ScheduledNext{}, errorf("scheduled next: unexpected %T for MIN(run_at)", r.NextRunAt)
	}
	return out, nil
}

// JobPromoteDue moves up to limit SCHEDULED jobs whose run_at has come
// (database clock) to WAITING, earliest first, and returns how many it
// moved. Safe to run on every replica at once. It is one READ COMMITTED
// transaction (readCommittedTx): a locking read that skips rows another
// transaction holds (JobLockDue), then one UPDATE of the rows it locked by
// primary key. So a promotion never waits for a lock — not for another
// replica's promotion of the same rows, not for a completion that is
// parking a retry in idx_due over a slow link (which made peers' promoters,
// and the rescuers queued behind them, wait seconds) — and it locks no gap
// of idx_due, so it never blocks a completion that parks a retry SCHEDULED.
// Rows it skipped are promoted by whoever holds them or by a later pass.
func (s *Store) JobPromoteDue(ctx context.Context, limit int) (int, error) {
	var n int64
	err := s.readCommittedTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		ids, err := q.JobLockDue(ctx, int32(limit))
		if err != nil || len(ids) == 0 {
			return err
		}
		n, err = q.JobPromoteLocked(ctx, ids)
		if err == nil && int(n) != len(ids) {
			err = errFenceMoved
		}
		return err
	})
	if err != nil {
		return 0, errorf("promote: %w", err)
	}
	return int(n), nil
}
