package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
)

// submitManyChunkBytes caps the params bytes of one multi-row INSERT, so a
// batch of large params stays well under max_allowed_packet (16 MiB by
// default on MariaDB 10.11 and MySQL 8): a batch of small jobs is one
// statement; a batch whose params add up to more is split, in the same
// transaction.
const submitManyChunkBytes = 4 << 20

// JobSubmitMany inserts a batch of WAITING jobs (PARKED or admitted for
// jobs with a concurrency key: see store/keys.go) with one multi-row INSERT
// (split only when their params exceed submitManyChunkBytes) and one
// commit. ps must have distinct job keys. out[i] says what happened to
// ps[i]: created, or the job that already had its job_key — Conflict when
// that job was submitted with a different request (the rules of JobSubmit).
//
// In one transaction it reads which keys exist (uk_job_key), inserts the
// others and reads their ids back. A concurrent submit of one of the keys
// between the read and the INSERT makes the INSERT fail as a whole (1062):
// the transaction rolls back and the batch is submitted job by job with
// JobSubmit, which tells each job's outcome exactly. So is a batch with a
// job that has a uniqueness window of its own; a key whose holder has one
// is released in the batch's transaction when the window has passed
// (releaseWindowed).
func (s *Store) JobSubmitMany(ctx context.Context, ps []jobq.SubmitParams) ([]jobq.SubmitOutcome, error) {
	out := make([]jobq.SubmitOutcome, len(ps))
	if len(ps) == 0 {
		return out, nil
	}
	if slices.ContainsFunc(ps, jobq.SubmitParams.Windowed) {
		return s.submitOneByOne(ctx, ps)
	}
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		existing, err := s.keyLookup(ctx, tx, ps, func(int) bool { return true })
		if err != nil {
			return err
		}
		if err := releaseWindowed(ctx, s.q.WithTx(tx), existing); err != nil {
			return err
		}
		var fresh []int
		for i, p := range ps {
			if e, ok := existing[p.JobKey]; ok {
				out[i] = jobq.SubmitOutcome{ID: e.id, Conflict: e.hash != p.RequestHash}
				continue
			}
			fresh = append(fresh, i)
		}
		if len(fresh) == 0 {
			return nil
		}
		// Keyed jobs: their keys are locked (and their limits set) before
		// the insert, which parks them; the admission pass admits them.
		keys, err := upsertKeys(ctx, tx, ps, fresh)
		if err != nil {
			return err
		}
		for start := 0; start < len(fresh); {
			end, size := start, 0
			for end < len(fresh) && (end == start || size+len(ps[fresh[end]].Params) <= submitManyChunkBytes) {
				size += len(ps[fresh[end]].Params)
				end++
			}
			if err := insertMany(ctx, tx, ps, fresh[start:end], s.laneOf); err != nil {
				return err
			}
			start = end
		}
		isFresh := make(map[int]bool, len(fresh))
		for _, i := range fresh {
			isFresh[i] = true
		}
		created, err := s.keyLookup(ctx, tx, ps, func(i int) bool { return isFresh[i] })
		if err != nil {
			return err
		}
		for _, i := range fresh {
			e, ok := created[ps[i].JobKey]
			if !ok {
				return fmt.Errorf("job_key %q: inserted but not read back", ps[i].JobKey)
			}
			out[i] = jobq.SubmitOutcome{ID: e.id, Created: true}
		}
		return admitKeys(ctx, tx, keys)
	})
	if isDupKey(err) {
		return s.submitOneByOne(ctx, ps)
	}
	if err != nil {
		return nil, errorf("submit batch: %w", err)
	}
	return out, nil
}

// submitOneByOne is JobSubmitMany's fallback after a concurrent submit
// took one of its keys.
func (s *Store) submitOneByOne(ctx context.Context, ps []jobq.SubmitParams) ([]jobq.SubmitOutcome, error) {
	out := make([]jobq.SubmitOutcome, len(ps))
	for i, p := range ps {
		job, created, err := s.JobSubmit(ctx, p)
		switch {
		case errors.Is(err, jobq.ErrKeyConflict):
			out[i] = jobq.SubmitOutcome{ID: job.ID, Conflict: true}
		case err != nil:
			return nil, fmt.Errorf("submit batch: job %d: %w", i, err)
		default:
			out[i] = jobq.SubmitOutcome{ID: job.ID, Created: created}
		}
	}
	return out, nil
}

// releaseWindowed releases, in the batch's transaction, the keys of
// existing whose holder has a uniqueness window that has passed
// (JobKeyRelease) and drops them from existing: the batch inserts their new
// holders in the same transaction, as JobSubmit does. A holder still inside
// its window stays existing; when the release matched nothing because a
// concurrent submit had already replaced the holder this transaction read,
// the key's current holder is read again under its lock.
func releaseWindowed(ctx context.Context, q *jobqdb.Queries, existing map[string]keyRow) error {
	for key, e := range existing {
		if !e.windowed {
			continue
		}
		n, err := q.JobKeyRelease(ctx, key)
		if err != nil {
			return err
		}
		if n > 0 {
			delete(existing, key)
			continue
		}
		cur, err := q.JobKeyHolderLock(ctx, key)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			delete(existing, key)
		case err != nil:
			return err
		default:
			existing[key] = keyRow{id: cur.ID, hash: cur.RequestHash}
		}
	}
	return nil
}

type keyRow struct {
	id       uint64
	hash     string
	windowed bool
}

// keyLookup reads id and request_hash of the jobs whose job_key is one of
// ps[i].JobKey for which pick(i) holds (JobKeysLookup, one statement).
func (s *Store) keyLookup(ctx context.Context, tx *sql.Tx, ps []jobq.SubmitParams, pick func(int) bool) (map[string]keyRow, error) {
	keys := make([]string, 0, len(ps))
	for i, p := range ps {
		if pick(i) {
			keys = append(keys, p.JobKey)
		}
	}
	rows, err := s.q.WithTx(tx).JobKeysLookup(ctx, keys)
	if err != nil {
		return nil, err
	}
	m := make(map[string]keyRow, len(rows))
	for _, r := range rows {
		m[r.JobKey] = keyRow{id: r.ID, hash: r.RequestHash, windowed: r.Windowed.Bool}
	}
	return m, nil
}

// insertMany inserts ps[i] for each i in idx with one multi-row INSERT (the
// columns and defaults of JobInsert and JobInsertAt: no run_at means due
// now, WAITING; a run_at ahead of the database clock is SCHEDULED; a job
// with a concurrency key is PARKED, for the caller's admission pass; a rate
// key is stored as given).
func insertMany(ctx context.Context, tx *sql.Tx, ps []jobq.SubmitParams, idx []int, laneOf func(string) int8) error {
	var b strings.Builder
	b.WriteString(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, max_retry,
    timeout_ms, run_at, create_time, update_time, lane, concurrency_key, rate_key) VALUES `)
	args := make([]any, 0, 12*len(idx))
	for n, i := range idx {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, ?, IF(? IS NOT NULL, 'PARKED', IF(? > NOW(6), 'SCHEDULED', 'WAITING')), ?, ?, ?, COALESCE(?, NOW(6)), NOW(6), NOW(6), ?, ?, ?)")
		p := ps[i]
		var runAt sql.NullTime
		if p.RunAt != nil {
			runAt = sql.NullTime{Time: p.RunAt.UTC(), Valid: true}
		}
		var key sql.NullString
		if p.ConcurrencyKey != "" {
			key = sql.NullString{String: p.ConcurrencyKey, Valid: true}
		}
		rateKey := sql.NullString{String: p.RateKey, Valid: p.RateKey != ""}
		args = append(args, p.JobKey, p.JobType, p.Params, p.RequestHash, key, runAt, p.Priority, p.MaxRetry, p.TimeoutMs, runAt,
			laneOf(p.JobType), key, rateKey)
	}
	_, err := tx.ExecContext(ctx, b.String(), args...)
	return err
}
