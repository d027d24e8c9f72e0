package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
)

func nullInt(n sql.NullInt64) int64 {
	if !n.Valid {
		return 0
	}
	return n.Int64
}

func nullID(id uint64) sql.NullInt64 {
	return sql.NullInt64{Int64: int64(id), Valid: id != 0}
}

// PeriodicFire fires schedule name in one transaction: it locks the row
// FOR UPDATE, asks plan what to enqueue and what the misfire policy skips,
// applies the schedule's overlap policy to each instant, inserts one job
// per instant let run (job_key PeriodicKey(name, instant), run_at = the
// instant, or jobq.ParkedRunAt for a parked queue_one run), records every
// due instant's fate in the fire ledger (periodic_fire) and moves the
// cursor. Each instant becomes at most one job because job_key is UNIQUE,
// and one ledger row because (name, instant) is its primary key; both are
// written in the same transaction, so the ledger says exactly what the fire
// committed. ErrNotFound when the schedule was deleted.
//
// Where SKIP LOCKED exists the lock never waits: when another session holds
// the schedule's row (a peer frozen inside its fire, an operator's open
// transaction), the fire plans from the last committed cursor, inserts the
// due instants of an OverlapAllow schedule all the same and leaves the
// cursor to the next fire that gets the lock (res.Locked). A schedule with
// another overlap policy decides on its previous run only under the lock, so
// such a fire writes nothing. A held row thus delays no instant of an
// allow schedule, where waiting on it made every instant due meanwhile a
// misfire.
func (s *Store) PeriodicFire(ctx context.Context, name string, plan jobq.PeriodicPlanFunc) (jobq.PeriodicFireResult, error) {
	var res jobq.PeriodicFireResult
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		res = jobq.PeriodicFireResult{}
		q := s.q.WithTx(tx)
		var r jobqdb.PeriodicJob
		if s.Server.SkipLocked {
			rows, err := q.PeriodicLockSkipLocked(ctx, name)
			if err != nil {
				return err
			}
			if len(rows) == 1 {
				r = rows[0]
			} else if r, err = q.PeriodicGet(ctx, name); err != nil { // held by another session, or gone
				return notFound(err)
			} else {
				res.Locked = true
			}
		} else {
			var err error
			if r, err = q.PeriodicLock(ctx, name); err != nil {
				return notFound(err)
			}
		}
		now, err := q.DBNow(ctx)
		if err != nil {
			return err
		}
		p := periodicFromRow(r)
		now = now.UTC()
		res.DBNow = now
		pl := plan(p, now)
		res.Next = pl.Next.UTC()
		if len(pl.Enqueue) == 0 && len(pl.Skipped) == 0 && pl.SkippedMore == 0 && res.Next.Equal(p.NextRunAt) {
			return nil
		}
		if res.Locked && p.Overlap != "" && p.Overlap != jobq.OverlapAllow {
			return nil // the lock holder, or the next fire, decides
		}
		skip := func(at time.Time, reason string, covers int64) error {
			res.Skipped += covers
			return q.FireRecordSkipped(ctx, jobqdb.FireRecordSkippedParams{Name: name, Instant: at.UTC(),
				Reason: sql.NullString{String: reason, Valid: true}, LateMs: now.Sub(at).Milliseconds(), Covers: covers})
		}
		for _, at := range pl.Skipped {
			if err := skip(at, jobq.FireReasonMisfire, 1); err != nil {
				return err
			}
		}
		if pl.SkippedMore > 0 {
			if err := skip(pl.SkippedMoreFrom, jobq.FireReasonMisfire, pl.SkippedMore); err != nil {
				return err
			}
		}
		runs := overlapRuns{active: p.ActiveJobID, queued: p.QueuedJobID}
		before := runs
		var last sql.NullTime
		for _, at := range pl.Enqueue {
			at = at.UTC()
			fate := jobq.FireFired
			if now.Sub(at) > pl.LateAfter {
				fate = jobq.FireLate
			}
			if p.Workflow != nil {
				wfID, ok, err := s.startScheduledWorkflow(ctx, tx, p, at)
				if err != nil {
					return err
				}
				if ok {
					res.Inserted = append(res.Inserted, at)
					if err := q.FireRecord(ctx, jobqdb.FireRecordParams{Name: name, Instant: at, Fate: fate,
						WorkflowID: nullID(wfID), LateMs: now.Sub(at).Milliseconds()}); err != nil {
						return err
					}
				}
				last = sql.NullTime{Time: at, Valid: true}
				continue
			}
			decision, err := s.overlapDecide(ctx, q, p.Overlap, &runs)
			if err != nil {
				return err
			}
			if decision == overlapSkipInstant {
				if err := skip(at, jobq.FireReasonOverlap, 1); err != nil {
					return err
				}
				continue
			}
			runAt := at
			if decision == overlapPark {
				runAt = jobq.ParkedRunAt
			}
			key := jobq.PeriodicKey(name, at)
			sum := sha256.Sum256([]byte("periodic\x00" + key + "\x00" + p.JobType + "\x00" + string(p.Params)))
			ins, err := q.JobInsertPeriodicRun(ctx, jobqdb.JobInsertPeriodicRunParams{
				JobKey: key, JobType: p.JobType, Params: string(p.Params), RequestHash: hex.EncodeToString(sum[:]),
				Priority: int32(p.Priority), MaxRetry: int32(p.MaxRetry), TimeoutMs: int32(p.TimeoutMs), RunAt: runAt,
				Lane: s.laneOf(p.JobType),
			})
			if err != nil {
				return err
			}
			last = sql.NullTime{Time: at, Valid: true}
			if n, err := ins.RowsAffected(); err != nil || n == 0 {
				if err != nil {
					return err
				}
				continue // a concurrent unlocked fire enqueued the instant and recorded it
			}
			id, err := ins.LastInsertId()
			if err != nil {
				return err
			}
			if decision == overlapPark {
				runs.queued = uint64(id)
			} else {
				runs.active = uint64(id)
			}
			res.Inserted = append(res.Inserted, at)
			if err := q.FireRecord(ctx, jobqdb.FireRecordParams{Name: name, Instant: at, Fate: fate,
				JobID: nullID(uint64(id)), LateMs: now.Sub(at).Milliseconds()}); err != nil {
				return err
			}
		}
		if res.Locked {
			return nil // the lock holder, or the next fire, moves the cursor
		}
		if runs != before {
			if err := q.PeriodicSetRuns(ctx, jobqdb.PeriodicSetRunsParams{Name: name,
				ActiveJobID: nullID(runs.active), QueuedJobID: nullID(runs.queued)}); err != nil {
				return err
			}
		}
		return q.PeriodicAdvance(ctx, jobqdb.PeriodicAdvanceParams{NextRunAt: res.Next, LastRunAt: last, Name: name})
	})
	if err != nil {
		if errors.Is(err, jobq.ErrNotFound) {
			return jobq.PeriodicFireResult{}, jobq.ErrNotFound
		}
		return jobq.PeriodicFireResult{}, errorf("periodic fire %q: %w", name, err)
	}
	return res, nil
}

// overlapRuns is a schedule's active run and parked queue_one run (0: none).
type overlapRuns struct{ active, queued uint64 }

type overlapDecision int

const (
	overlapFire overlapDecision = iota
	overlapPark
	overlapSkipInstant
)

// runState reads a run's status under its row lock; a purged run counts as
// terminal.
func runState(ctx context.Context, q *jobqdb.Queries, id uint64) (jobq.JobState, bool, error) {
	if id == 0 {
		return "", false, nil
	}
	r, err := q.JobRunState(ctx, id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return jobq.JobState(r.Status), r.Status == string(jobq.StateScheduled) && r.RunAt.Equal(jobq.ParkedRunAt), nil
}

// overlapDecide applies overlap policy to one instant of a schedule whose
// runs are runs, under the schedule's row lock: fire it, park it
// (queue_one) or skip it. cancel_previous cancels the active run here; a
// queue_one run parked behind a run that ended is released here.
func (s *Store) overlapDecide(ctx context.Context, q *jobqdb.Queries, policy string, runs *overlapRuns) (overlapDecision, error) {
	if policy == "" || policy == jobq.OverlapAllow {
		return overlapFire, nil
	}
	if policy == jobq.OverlapQueueOne {
		if err := releaseParked(ctx, q, runs); err != nil {
			return 0, err
		}
	}
	st, _, err := runState(ctx, q, runs.active)
	if err != nil {
		return 0, err
	}
	busy := st != "" && !st.Terminal()
	switch policy {
	case jobq.OverlapSkip:
		if busy {
			return overlapSkipInstant, nil
		}
	case jobq.OverlapQueueOne:
		if busy && runs.queued != 0 {
			return overlapSkipInstant, nil
		}
		if busy {
			return overlapPark, nil
		}
	case jobq.OverlapCancelPrevious:
		if busy {
			n, err := q.JobCancelWaiting(ctx, runs.active)
			if err != nil {
				return 0, err
			}
			if n == 0 {
				if _, err := q.JobCancelRunning(ctx, runs.active); err != nil {
					return 0, err
				}
			}
		}
	}
	return overlapFire, nil
}

// releaseParked makes runs' parked queue_one run WAITING when the active
// run has ended (it becomes the active run), and forgets a parked run that
// is parked no more (cancelled by an operator).
func releaseParked(ctx context.Context, q *jobqdb.Queries, runs *overlapRuns) error {
	if runs.queued == 0 {
		return nil
	}
	_, parked, err := runState(ctx, q, runs.queued)
	if err != nil {
		return err
	}
	if !parked {
		runs.queued = 0
		return nil
	}
	st, _, err := runState(ctx, q, runs.active)
	if err != nil {
		return err
	}
	if st != "" && !st.Terminal() {
		return nil
	}
	if _, err := q.JobReleaseParked(ctx, runs.queued); err != nil {
		return err
	}
	runs.active, runs.queued = runs.queued, 0
	return nil
}

// PeriodicReleaseQueued releases the parked queue_one runs whose previous
// run has ended, one short transaction per schedule that has one (under
// its row lock, so replicas release each run once). released names the
// schedules whose run it released. Every replica's periodic planner calls
// it every second while a queue_one schedule exists.
func (s *Store) PeriodicReleaseQueued(ctx context.Context) (released []string, err error) {
	names, err := s.q.PeriodicQueuedNames(ctx)
	if err != nil {
		return nil, errorf("periodic release: %w", err)
	}
	for _, name := range names {
		err := s.WithTx(ctx, func(tx *sql.Tx) error {
			q := s.q.WithTx(tx)
			r, err := q.PeriodicLock(ctx, name)
			if err != nil {
				return notFound(err)
			}
			runs := overlapRuns{active: uint64(nullInt(r.ActiveJobID)), queued: uint64(nullInt(r.QueuedJobID))}
			before := runs
			if err := releaseParked(ctx, q, &runs); err != nil {
				return err
			}
			if runs == before {
				return nil
			}
			if runs.active != before.active {
				released = append(released, name)
			}
			return q.PeriodicSetRuns(ctx, jobqdb.PeriodicSetRunsParams{Name: name,
				ActiveJobID: nullID(runs.active), QueuedJobID: nullID(runs.queued)})
		})
		if err != nil && !errors.Is(err, jobq.ErrNotFound) {
			return released, errorf("periodic release %q: %w", name, err)
		}
	}
	return released, nil
}

// FireHistory returns one page of schedule p.Name's fire ledger, newest
// instant first (a schedule deleted keeps its ledger).
func (s *Store) FireHistory(ctx context.Context, p jobq.FireHistoryParams) ([]jobq.FireEntry, error) {
	before := p.Before
	if before.IsZero() {
		before = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	}
	rows, err := s.q.FireHistory(ctx, jobqdb.FireHistoryParams{Name: p.Name, Before: before, Limit: int32(p.Limit)})
	if err != nil {
		return nil, errorf("fire history: %w", err)
	}
	return fireEntries(rows), nil
}

// FireRange returns schedule name's ledger rows with instants in [from, to),
// oldest first.
func (s *Store) FireRange(ctx context.Context, name string, from, to time.Time) ([]jobq.FireEntry, error) {
	rows, err := s.q.FireRange(ctx, jobqdb.FireRangeParams{Name: name, FromInstant: from, ToInstant: to})
	if err != nil {
		return nil, errorf("fire range: %w", err)
	}
	return fireEntries(rows), nil
}

func fireEntries(rows []jobqdb.PeriodicFire) []jobq.FireEntry {
	out := make([]jobq.FireEntry, len(rows))
	for i, r := range rows {
		out[i] = jobq.FireEntry{Name: r.Name, Instant: r.Instant.UTC(), Fate: r.Fate, Reason: r.Reason.String,
			JobID: uint64(nullInt(r.JobID)), WorkflowID: uint64(nullInt(r.WorkflowID)), LateMs: r.LateMs,
			Covers: r.Covers, RecordTime: r.RecordTime.UTC()}
	}
	return out
}
