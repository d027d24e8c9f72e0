package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
	"github.com/jobq/jobq/storeerr"
)

// SetRemoteTypes declares the job types run by remote workers: their jobs
// are submitted in lane 1 (jobq.LaneRemote), which the replicas' scan and
// claims never read and workers' fetches do. Call it before the store
// serves submits.
func (s *Store) SetRemoteTypes(types []string) {
	m := make(map[string]bool, len(types))
	for _, t := range types {
		m[t] = true
	}
	s.remoteTypes.Store(&m)
}

// laneOf is the lane a new job of jobType is submitted in.
func (s *Store) laneOf(jobType string) int8 {
	if m := s.remoteTypes.Load(); m != nil && (*m)[jobType] {
		return jobq.LaneRemote
	}
	return jobq.LaneLocal
}

// JobLaneReconcile moves the WAITING and SCHEDULED jobs of types (declared
// remote) that sit in lane 0 — submitted before the type was declared
// remote — to lane 1, and returns how many it moved.
func (s *Store) JobLaneReconcile(ctx context.Context, types []string) (int64, error) {
	if len(types) == 0 {
		return 0, nil
	}
	n, err := s.q.JobLaneReconcile(ctx, types)
	if err != nil {
		return 0, errorf("lane reconcile: %w", err)
	}
	return n, nil
}

// JobClaimRemote claims up to p.Limit due lane-1 jobs of p.Types for a
// remote worker, exactly as JobClaimSkipLocked claims for a replica (one
// READ COMMITTED transaction: a locking read that skips held rows, one
// UPDATE by primary key; then the stamp read back after COMMIT), and stores
// p.Nonce with every claimed row. Returns ErrSkipLockedUnsupported on
// servers without SKIP LOCKED.
func (s *Store) JobClaimRemote(ctx context.Context, p jobq.RemoteClaimParams) ([]jobq.ClaimedJob, error) {
	if !s.Server.SkipLocked {
		return nil, ErrSkipLockedUnsupported
	}
	if len(p.Types) == 0 || p.Limit <= 0 {
		return nil, nil
	}
	// The paused and limited types are left out before the locking read,
	// so it locks only rows it can claim (see JobLockRemote); a type with
	// a concurrency or a rate limit is claimed first, by the replicas'
	// limited claim in lane 1: its max_running counts RUNNING jobs of the
	// type wherever they run.
	held, err := s.q.TypesHeld(ctx, p.Types)
	if err != nil {
		return nil, errorf("claim remote: paused types: %w", err)
	}
	var limited []jobq.ClaimedJob
	for _, h := range held {
		if h.Paused || len(limited) >= p.Limit {
			continue
		}
		got, err := s.claimRemoteLimited(ctx, h.JobType, p, p.Limit-len(limited))
		if err != nil {
			// What committed is returned (a retry would strand it); the
			// next fetch tries again.
			return limited, orNilIfAny(err, limited)
		}
		limited = append(limited, got...)
	}
	types := slices.DeleteFunc(slices.Clone(p.Types), func(t string) bool {
		return slices.ContainsFunc(held, func(h jobqdb.TypesHeldRow) bool { return h.JobType == t })
	})
	if len(types) == 0 || len(limited) >= p.Limit {
		return limited, nil
	}
	p.Limit -= len(limited)
	claimed, err := s.claimRemoteFast(ctx, p, types)
	if err != nil {
		return limited, orNilIfAny(err, limited)
	}
	return append(limited, claimed...), nil
}

// orNilIfAny returns err, or nil when claimed holds jobs a committed claim
// took: a fetch hands those over rather than fail and strand them.
func orNilIfAny(err error, claimed []jobq.ClaimedJob) error {
	if len(claimed) > 0 {
		return nil
	}
	return err
}

// claimRemoteLimited is the limited claim (claimLimited) of a job type
// with a concurrency or a rate limit in lane 1, for a worker's fetch: the
// same control row lock, RUNNING count and rate window as a replica's, the
// claim written with the fetch's owner and lease nonce.
func (s *Store) claimRemoteLimited(ctx context.Context, jobType string, p jobq.RemoteClaimParams, limit int) ([]jobq.ClaimedJob, error) {
	owner := sql.NullString{String: p.Owner, Valid: true}
	var claimed []jobq.ClaimedJob
	err := s.readCommittedTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		var err error
		claimed, err = s.claimLimited(ctx, q, jobType, jobq.LaneRemote, limit, func(ids []uint64) ([]jobq.ClaimedJob, error) {
			if _, err := q.JobClaimRemote(ctx, jobqdb.JobClaimRemoteParams{
				Owner: owner, LeaseUs: p.Lease.Microseconds(),
				LeaseNonce: sql.NullString{String: string(p.Nonce), Valid: true}, Ids: ids,
			}); err != nil {
				return nil, err
			}
			return s.readClaimed(ctx, q, owner, ids)
		})
		return err
	})
	if err != nil {
		return nil, errorf("claim remote limited %q: %w", jobType, err)
	}
	return claimed, nil
}

// claimRemoteFast is the fetch's claim of the types no control row holds
// back: one locking read of lane 1 and one UPDATE.
func (s *Store) claimRemoteFast(ctx context.Context, p jobq.RemoteClaimParams, types []string) ([]jobq.ClaimedJob, error) {
	var rows []jobqdb.JobLockRemoteRow
	var ids []uint64
	err := s.readCommittedTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		var err error
		rows, err = q.JobLockRemote(ctx, jobqdb.JobLockRemoteParams{Types: types, Limit: int32(p.Limit)})
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
		n, err := q.JobClaimRemote(ctx, jobqdb.JobClaimRemoteParams{
			Owner: sql.NullString{String: p.Owner, Valid: true}, LeaseUs: p.Lease.Microseconds(),
			LeaseNonce: sql.NullString{String: string(p.Nonce), Valid: true}, Ids: ids,
		})
		if err != nil {
			return err
		}
		if int(n) != len(ids) {
			return errorf("claimed %d of %d locked rows", n, len(ids))
		}
		return nil
	})
	if err != nil {
		return nil, errorf("claim remote: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(p.Lease/2, time.Second))
	defer cancel()
	st, err := storeerr.DoV(rctx, claimReadBack, "claim.started_at", func() (jobqdb.JobClaimedLeaseRow, error) {
		return s.q.JobClaimedLease(rctx, ids[0])
	})
	if err != nil {
		return nil, errorf("claim remote: read the stamp of a committed claim: %w", err)
	}
	now, until := st.StartedAt.Time.UTC(), st.LeaseUntil.Time.UTC()
	claimed := make([]jobq.ClaimedJob, len(rows))
	for i, r := range rows {
		claimed[i] = jobq.ClaimedJob{
			ID: r.ID, JobKey: r.JobKey, JobType: r.JobType, Params: json.RawMessage(r.Params),
			Priority: int(r.Priority), RetryTimes: int(r.RetryTimes), MaxRetry: int(r.MaxRetry),
			TimeoutMs: int(r.TimeoutMs), RunAt: r.RunAt.UTC(), Attempt: int(r.Attempt) + 1,
			LeaseUntil: until, StartedAt: now, CreateTime: r.CreateTime.UTC(), HasChildren: r.HasChildren, WorkflowID: uint64(r.WorkflowID.Int64), ConcurrencyKey: r.ConcurrencyKey.String,
		}
	}
	return claimed, nil
}

// JobTokenStates reads, by primary key and without locking, what task
// tokens of the jobs ids are checked against. Unknown ids are left out.
func (s *Store) JobTokenStates(ctx context.Context, ids []uint64) ([]jobq.TokenState, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.q.JobTokenStates(ctx, ids)
	if err != nil {
		return nil, errorf("token states: %w", err)
	}
	out := make([]jobq.TokenState, len(rows))
	for i, r := range rows {
		out[i] = jobq.TokenState{
			ID: r.ID, JobType: r.JobType, Attempt: int(r.Attempt), Status: jobq.JobState(r.Status),
			Nonce: []byte(r.LeaseNonce.String), CancelRequested: r.CancelRequested,
			RetryTimes: int(r.RetryTimes), MaxRetry: int(r.MaxRetry), RunAt: r.RunAt.UTC(), HasChildren: r.HasChildren,
			ConcurrencyKey: r.ConcurrencyKey.String, Owner: r.Owner.String, Timeout: time.Duration(r.TimeoutMs) * time.Millisecond,
			Running: time.Duration(r.RunUs) * time.Microsecond, WorkflowID: uint64(r.WorkflowID.Int64),
		}
		if r.LeaseUntil.Valid {
			t := r.LeaseUntil.Time.UTC()
			out[i].LeaseUntil = &t
		}
	}
	return out, nil
}

// LeaseRenewFenced renews the leases of runs in one UPDATE, each row fenced
// by its own attempt (WHERE id IN (…) AND status='RUNNING' AND attempt =
// CASE id WHEN … END, by primary key only), whoever holds them, and reads
// back each run's lease and cancel request: a run is renewed when its job
// is RUNNING at its attempt afterwards (an attempt's RUNNING spell is one
// stretch, so such a row matched the UPDATE). A cancel request does not
// stop the renewal: the worker is told and completes the run. The answers
// are in the order of runs.
func (s *Store) LeaseRenewFenced(ctx context.Context, runs []jobq.Fence, lease time.Duration) ([]jobq.LeaseRenewal, error) {
	out := make([]jobq.LeaseRenewal, len(runs))
	for i, f := range runs {
		out[i].Fence = f
	}
	if len(runs) == 0 {
		return out, nil
	}
	ids := make([]uint64, 0, len(runs))
	seen := make(map[uint64]bool, len(runs))
	var b strings.Builder
	args := make([]any, 0, 3*len(runs)+1)
	args = append(args, lease.Microseconds())
	b.WriteString("UPDATE job_queue FORCE INDEX (PRIMARY) SET lease_until = NOW(6) + INTERVAL ? MICROSECOND WHERE id IN (")
	for _, f := range runs {
		if seen[f.ID] {
			continue
		}
		seen[f.ID] = true
		if len(ids) > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		ids = append(ids, f.ID)
		args = append(args, f.ID)
	}
	b.WriteString(") AND status = 'RUNNING' AND attempt = CASE id")
	caseSeen := make(map[uint64]bool, len(runs))
	for _, f := range runs {
		if caseSeen[f.ID] {
			continue
		}
		caseSeen[f.ID] = true
		b.WriteString(" WHEN ? THEN ?")
		args = append(args, f.ID, f.Attempt)
	}
	b.WriteString(" END")
	if _, err := s.db.ExecContext(ctx, b.String(), args...); err != nil {
		return nil, errorf("lease renew fenced: %w", err)
	}
	states, err := s.JobTokenStates(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[uint64]jobq.TokenState, len(states))
	for _, st := range states {
		byID[st.ID] = st
	}
	for i, f := range runs {
		st, ok := byID[f.ID]
		if ok && st.Status == jobq.StateRunning && st.Attempt == f.Attempt && st.LeaseUntil != nil {
			out[i].Renewed, out[i].CancelRequested, out[i].LeaseUntil = true, st.CancelRequested, *st.LeaseUntil
		}
	}
	return out, nil
}

// ErrLogFull is returned by JobLogAppend when the lines would take the
// attempt's log past jobq.MaxLogBytes; nothing was appended.
var ErrLogFull = jobq.ErrLogFull

// ErrRunGone is returned by JobLogAppend and JobProgressSet when the run no
// longer holds its job (stale); nothing was written.
var ErrRunGone = jobq.ErrRunGone

// runFenced runs fn in a transaction that first share-locks the job row of
// f and has check judge its token state (check's error is returned as is);
// a job not RUNNING at f's attempt is ErrRunGone.
func (s *Store) runFenced(ctx context.Context, f jobq.Fence, check func(jobq.TokenState) error, fn func(q *jobqdb.Queries, tx *sql.Tx) error) error {
	return s.readCommittedTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		r, err := q.JobTokenStateLocked(ctx, f.ID)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrRunGone
		}
		if err != nil {
			return err
		}
		st := jobq.TokenState{ID: r.ID, JobType: r.JobType, Attempt: int(r.Attempt), Status: jobq.JobState(r.Status), Nonce: []byte(r.LeaseNonce.String)}
		if check != nil {
			if err := check(st); err != nil {
				return err
			}
		}
		if st.Status != jobq.StateRunning || st.Attempt != f.Attempt {
			return ErrRunGone
		}
		return fn(q, tx)
	})
}

// JobLogAppend appends lines to the log of run f while it holds its job
// (check, if set, judges the token first). Lines must each be at most
// jobq.MaxLogLineBytes (the caller checks); ErrLogFull when they would take
// the attempt's log past jobq.MaxLogBytes, ErrRunGone when the run is
// stale. All or nothing.
func (s *Store) JobLogAppend(ctx context.Context, f jobq.Fence, lines []string, check func(jobq.TokenState) error) error {
	if len(lines) == 0 {
		return nil
	}
	size := 0
	for _, l := range lines {
		size += len(l)
	}
	return s.runFenced(ctx, f, check, func(q *jobqdb.Queries, tx *sql.Tx) error {
		key := jobqdb.RunInfoEnsureParams{JobID: f.ID, Attempt: int32(f.Attempt)}
		if err := q.RunInfoEnsure(ctx, key); err != nil {
			return err
		}
		info, err := q.RunInfoLock(ctx, jobqdb.RunInfoLockParams{JobID: f.ID, Attempt: int32(f.Attempt)})
		if err != nil {
			return err
		}
		if int(info.LogBytes)+size > jobq.MaxLogBytes {
			return ErrLogFull
		}
		var b strings.Builder
		b.WriteString("INSERT INTO job_log (job_id, attempt, seq, line, created_at) VALUES ")
		args := make([]any, 0, 4*len(lines))
		for i, l := range lines {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?, ?, ?, ?, NOW(6))")
			args = append(args, f.ID, f.Attempt, int(info.LogLines)+i+1, l)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
		return q.RunInfoAddLog(ctx, jobqdb.RunInfoAddLogParams{ByteCount: int32(size), LineCount: int32(len(lines)), JobID: f.ID, Attempt: int32(f.Attempt)})
	})
}

// JobProgressSet records run f's progress report (the last one is kept per
// attempt) while it holds its job; ErrRunGone when it is stale.
func (s *Store) JobProgressSet(ctx context.Context, r jobq.RunReport, check func(jobq.TokenState) error) error {
	return s.runFenced(ctx, r.Fence, check, func(q *jobqdb.Queries, _ *sql.Tx) error {
		return q.RunInfoSetProgress(ctx, jobqdb.RunInfoSetProgressParams{
			JobID: r.ID, Attempt: int32(r.Attempt), Progress: sql.NullFloat64{Float64: r.Progress, Valid: true},
			ProgressMessage: nullStr(r.Message),
		})
	})
}

// JobLogs returns up to limit lines of attempt's log of job id after line
// afterSeq. attempt 0 means the latest attempt with a log or a progress
// report; the attempt read is returned.
func (s *Store) JobLogs(ctx context.Context, id uint64, attempt, afterSeq, limit int) ([]jobq.LogLine, int, error) {
	if attempt == 0 {
		a, err := s.q.JobLogLastAttempt(ctx, id)
		if err != nil {
			return nil, 0, errorf("logs: %w", err)
		}
		attempt = int(a)
		if attempt == 0 {
			return nil, 0, nil
		}
	}
	rows, err := s.q.JobLogList(ctx, jobqdb.JobLogListParams{JobID: id, Attempt: int32(attempt), AfterSeq: int32(afterSeq), Limit: int32(limit)})
	if err != nil {
		return nil, attempt, errorf("logs: %w", err)
	}
	out := make([]jobq.LogLine, len(rows))
	for i, r := range rows {
		out[i] = jobq.LogLine{Seq: int(r.Seq), Line: r.Line, Time: r.CreatedAt.UTC()}
	}
	return out, attempt, nil
}

// JobOutput returns the output of attempt of job id (nil when none).
func (s *Store) JobOutput(ctx context.Context, id uint64, attempt int) (json.RawMessage, error) {
	out, err := s.q.ExecutionOutput(ctx, jobqdb.ExecutionOutputParams{JobID: id, Attempt: int32(attempt)})
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !out.Valid) {
		return nil, nil
	}
	if err != nil {
		return nil, errorf("output: %w", err)
	}
	return json.RawMessage(out.String), nil
}

// WorkerRunsInFlight counts the RUNNING jobs each worker holds, across
// replicas (owner 'worker:<id>').
func (s *Store) WorkerRunsInFlight(ctx context.Context) ([]jobq.WorkerRuns, error) {
	rows, err := s.q.WorkerRunsInFlight(ctx)
	if err != nil {
		return nil, errorf("worker runs: %w", err)
	}
	out := make([]jobq.WorkerRuns, 0, len(rows))
	for _, r := range rows {
		out = append(out, jobq.WorkerRuns{WorkerID: strings.TrimPrefix(r.Owner.String, jobq.WorkerOwnerPrefix), Runs: int(r.Runs)})
	}
	slices.SortFunc(out, func(a, b jobq.WorkerRuns) int { return strings.Compare(a.WorkerID, b.WorkerID) })
	return out, nil
}

// runInfoByJob reads the progress reports of job id's attempts.
func (s *Store) runInfoByJob(ctx context.Context, id uint64) (map[int]jobqdb.JobRunInfo, error) {
	rows, err := s.q.RunInfoByJob(ctx, id)
	if err != nil {
		return nil, err
	}
	m := make(map[int]jobqdb.JobRunInfo, len(rows))
	for _, r := range rows {
		m[int(r.Attempt)] = r
	}
	return m, nil
}

// ExecutionOutcome returns the recorded outcome of run f's attempt ("" when
// it has none yet): its execution row's, or SUCCESS when the job row records
// the attempt's success (a batched success writes no execution row).
func (s *Store) ExecutionOutcome(ctx context.Context, f jobq.Fence) (jobq.Outcome, error) {
	out, err := attemptOutcome(ctx, s.q, f)
	if err != nil {
		return "", errorf("execution outcome: %w", err)
	}
	return out, nil
}
