package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
)

func typeControlFromRow(r jobqdb.JobTypeControl) jobq.TypeControl {
	return jobq.TypeControl{JobType: r.JobType, Paused: r.Paused, MaxRunning: int(r.MaxRunning),
		RateStarts: int(r.RateStarts), RatePeriod: time.Duration(r.RatePeriodUs) * time.Microsecond, RatePerKey: r.RatePerKey, UpdateTime: r.UpdateTime.UTC()}
}

// TypeSetPaused pauses (paused=true) or resumes a job type and returns its
// control row. Pausing takes effect on the next scan of every replica (the
// scan reads job_type_control in the same statement); runs already RUNNING
// are not interrupted.
func (s *Store) TypeSetPaused(ctx context.Context, jobType string, paused bool) (jobq.TypeControl, error) {
	if err := s.q.TypeControlSetPaused(ctx, jobqdb.TypeControlSetPausedParams{JobType: jobType, Paused: paused}); err != nil {
		return jobq.TypeControl{}, errorf("set paused: %w", err)
	}
	return s.TypeControlGet(ctx, jobType)
}

// TypeSetLimit sets a job type's cluster-wide limit of RUNNING jobs
// (maxRunning ≥ 0; 0 removes the limit) and returns its control row. A new
// limit applies to claims that start after it commits; runs already RUNNING
// are not stopped, so the count can exceed a lowered limit until they finish.
func (s *Store) TypeSetLimit(ctx context.Context, jobType string, maxRunning int) (jobq.TypeControl, error) {
	if err := s.q.TypeControlSetLimit(ctx, jobqdb.TypeControlSetLimitParams{JobType: jobType, MaxRunning: int32(maxRunning)}); err != nil {
		return jobq.TypeControl{}, errorf("set limit: %w", err)
	}
	return s.TypeControlGet(ctx, jobType)
}

// TypeControlGet returns a job type's control row; a type without one gets
// the zero state (not paused, no limit) and no error.
func (s *Store) TypeControlGet(ctx context.Context, jobType string) (jobq.TypeControl, error) {
	r, err := s.q.TypeControlGet(ctx, jobType)
	if errors.Is(err, sql.ErrNoRows) {
		return jobq.TypeControl{JobType: jobType}, nil
	}
	if err != nil {
		return jobq.TypeControl{}, errorf("type control: %w", err)
	}
	return typeControlFromRow(r), nil
}

// TypeControls lists every control row, ordered by job type.
func (s *Store) TypeControls(ctx context.Context) ([]jobq.TypeControl, error) {
	rows, err := s.q.TypeControlList(ctx)
	if err != nil {
		return nil, errorf("type controls: %w", err)
	}
	out := make([]jobq.TypeControl, len(rows))
	for i, r := range rows {
		out[i] = typeControlFromRow(r)
	}
	return out, nil
}

// TypeSetRateLimit sets a job type's cluster-wide rate limit — at most
// rl.Starts starts in any window of rl.Period on the database clock, of the
// whole type or (rl.PerKey) of each rate key of the type — and returns its
// control row; Starts 0 removes it. A new limit binds claims that start
// after it commits; the window counts the starts recorded since the type
// was last rate-limited (rate_start keeps one window of them). A limit that
// is removed or no longer per key returns the type's HELD jobs to WAITING
// in the same transaction, under the type's control row lock.
func (s *Store) TypeSetRateLimit(ctx context.Context, jobType string, rl jobq.RateLimit) (jobq.TypeControl, error) {
	if rl.Starts <= 0 {
		rl = jobq.RateLimit{}
	}
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.TypeControlSetRate(ctx, jobqdb.TypeControlSetRateParams{
			JobType: jobType, RateStarts: int32(rl.Starts), RatePeriodUs: rl.Period.Microseconds(), RatePerKey: rl.PerKey,
		}); err != nil {
			return err
		}
		if rl.PerKey {
			return nil
		}
		// The upsert holds the control row's lock, as a limited claim does.
		if _, err := q.JobReleaseHeldByType(ctx, jobType); err != nil {
			return err
		}
		_, err := q.RateHoldDeleteByType(ctx, jobType)
		return err
	})
	if err != nil {
		return jobq.TypeControl{}, errorf("set rate limit: %w", err)
	}
	return s.TypeControlGet(ctx, jobType)
}

// TypeLimits returns job type → max_running for every limited type: one
// with a concurrency limit or a rate limit (max_running 0 for a type with
// only a rate limit).
func (s *Store) TypeLimits(ctx context.Context) (map[string]int, error) {
	rows, err := s.q.TypeControlLimited(ctx)
	if err != nil {
		return nil, errorf("type limits: %w", err)
	}
	m := make(map[string]int, len(rows))
	for _, r := range rows {
		m[r.JobType] = int(r.MaxRunning)
	}
	return m, nil
}

// TypeProbe reports, without locking, whether a limited claim of jobType
// could claim something now in lane 0: the type is not paused, has fewer
// RUNNING jobs than its max_running, fewer starts in its rate window than
// rate_starts and a due WAITING job (one read on job_type_control,
// idx_type_status and idx_rate_window). When due work waits only for the
// rate window, RateHeld is set and OpensIn says when the window next opens.
// It is the cheap probe before JobClaimLimited, so a type at its limit takes
// no lock.
func (s *Store) TypeProbe(ctx context.Context, jobType string) (jobq.TypeProbe, error) {
	rows, err := s.q.TypeProbe(ctx, jobqdb.TypeProbeParams{JobType: jobType, Lane: jobq.LaneLocal})
	if err != nil {
		return jobq.TypeProbe{}, errorf("probe type: %w", err)
	}
	if len(rows) == 0 {
		return jobq.TypeProbe{}, nil
	}
	r := rows[0]
	rated := r.RateStarts > 0
	if r.Paused || (r.MaxRunning > 0 && r.Running >= int64(r.MaxRunning)) {
		return jobq.TypeProbe{RateLimited: rated}, nil
	}
	if rated && r.RatePerKey {
		// Per key: due WAITING work is claimable (its key's window may
		// hold it, which the claim finds out), and so is a key whose held
		// jobs' window has opened (the claim releases them); held keys
		// whose windows are all full arm the wake.
		opens := max(time.Duration(r.HeldOpensInUs)*time.Microsecond, 0)
		if r.HasDue || (r.HasHeld && opens == 0) {
			return jobq.TypeProbe{Claimable: true, RateLimited: true}, nil
		}
		return jobq.TypeProbe{RateLimited: true, RateHeld: r.HasHeld, OpensIn: opens}, nil
	}
	if !r.HasDue {
		return jobq.TypeProbe{RateLimited: rated}, nil
	}
	if rated && r.WindowStarts >= int64(r.RateStarts) {
		return jobq.TypeProbe{RateLimited: true, RateHeld: true, OpensIn: max(time.Duration(r.OpensInUs)*time.Microsecond, 0)}, nil
	}
	return jobq.TypeProbe{Claimable: r.MaxRunning > 0 || rated, RateLimited: rated}, nil
}

// JobClaimLimited claims due jobs of one limited job type without ever
// letting its RUNNING count exceed max_running, or its starts in any window
// of rate_period exceed rate_starts, across replicas. In one READ COMMITTED
// transaction it locks the type's job_type_control row FOR UPDATE
// (serialising every claim of the type), counts the type's RUNNING jobs and
// its starts in the rate window (rate_start), claims at most the smallest
// room those leave (and p.Limit) of due jobs in priority order (skipping
// rows another transaction holds, where SKIP LOCKED exists), records the
// starts it made and prunes the starts older than the window. It claims
// nothing when the type is paused, has no limit any more (the ordinary scan
// serves it then) or is at a limit. Like the other claims it runs in
// readCommittedTx, so a server that refuses READ COMMITTED writes
// (binlog_format=STATEMENT: error 1665) gets it at the session's level
// instead of a claim that fails for good.
func (s *Store) JobClaimLimited(ctx context.Context, jobType string, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	var claimed []jobq.ClaimedJob
	err := s.readCommittedTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		var err error
		claimed, err = s.claimLimited(ctx, q, jobType, jobq.LaneLocal, p.Limit, func(ids []uint64) ([]jobq.ClaimedJob, error) {
			return s.claimRows(ctx, q, p, ids)
		})
		return err
	})
	if err != nil {
		return nil, errorf("claim limited %q: %w", jobType, err)
	}
	return claimed, nil
}

// rateStartPruneBatch is the most expired starts one limited claim deletes.
const rateStartPruneBatch = 1000

// claimLimited is the body of a limited claim of jobType in lane, in a
// transaction of q: claimFunc writes the claim of the locked ids and reads
// the claimed rows back.
func (s *Store) claimLimited(ctx context.Context, q *jobqdb.Queries, jobType string, lane int, limit int,
	claimFunc func(ids []uint64) ([]jobq.ClaimedJob, error)) ([]jobq.ClaimedJob, error) {
	ctl, err := q.TypeControlLock(ctx, jobType)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if ctl.Paused || (ctl.MaxRunning <= 0 && ctl.RateStarts <= 0) {
		return nil, nil
	}
	room := int64(limit)
	if ctl.MaxRunning > 0 {
		running, err := q.JobCountRunningByType(ctx, jobType)
		if err != nil {
			return nil, err
		}
		room = min(room, int64(ctl.MaxRunning)-running)
	}
	if ctl.RateStarts > 0 && ctl.RatePerKey {
		if room <= 0 {
			return nil, nil
		}
		return s.claimPerKey(ctx, q, jobType, lane, room, ctl, claimFunc)
	}
	if ctl.RateStarts > 0 {
		started, err := q.RateWindowCount(ctx, jobqdb.RateWindowCountParams{JobType: jobType, PeriodUs: ctl.RatePeriodUs})
		if err != nil {
			return nil, err
		}
		room = min(room, int64(ctl.RateStarts)-started)
	}
	if room <= 0 {
		return nil, nil
	}
	var ids []uint64
	if s.Server.SkipLocked {
		ids, err = q.JobLockAvailableByTypeSkipLocked(ctx, jobqdb.JobLockAvailableByTypeSkipLockedParams{JobType: jobType, Lane: int8(lane), Limit: int32(room)})
	} else {
		ids, err = q.JobLockAvailableByType(ctx, jobqdb.JobLockAvailableByTypeParams{JobType: jobType, Lane: int8(lane), Limit: int32(room)})
	}
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	claimed, err := claimFunc(ids)
	if err != nil || ctl.RateStarts <= 0 {
		return claimed, err
	}
	if _, err := q.RateStartRecord(ctx, ids); err != nil {
		return nil, err
	}
	if _, err := q.RateStartPrune(ctx, jobqdb.RateStartPruneParams{JobType: jobType, PeriodUs: ctl.RatePeriodUs, Limit: rateStartPruneBatch}); err != nil {
		return nil, err
	}
	return claimed, nil
}

// Bounds of one per-key limited claim: the held keys whose window opened
// that it releases, its rounds of candidates (a round that holds
// candidates back reads the next ones, beyond the held), and how many
// candidates past its room a round after the first reads, so a full key's
// backlog ahead in priority is held in a few rounds, not room jobs at a
// time.
const (
	rateReleaseKeys   = 100
	perKeyRounds      = 4
	rateHoldLookahead = 500
)

// keyWindow is one rate key's window: its starts in it and the oldest.
type keyWindow struct {
	starts int64
	oldest time.Time
}

// keyWindows reads the windows of keys (RateKeyWindows); a key without a
// start in its window is absent.
func keyWindows(ctx context.Context, q *jobqdb.Queries, jobType string, periodUs int64, keys []string) (map[string]keyWindow, error) {
	rows, err := q.RateKeyWindows(ctx, jobqdb.RateKeyWindowsParams{JobType: jobType, RateKeys: keys, PeriodUs: periodUs})
	if err != nil {
		return nil, err
	}
	m := make(map[string]keyWindow, len(rows))
	for _, r := range rows {
		m[r.RateKey] = keyWindow{starts: r.Starts, oldest: r.Oldest}
	}
	return m, nil
}

// claimPerKey is the limited claim of a type with a per-key rate limit, in
// claimLimited's transaction (the type's control row locked): each rate key
// may start ctl.RateStarts jobs in any window of ctl.RatePeriodUs.
//
// First it releases, for each key whose held jobs' window has opened
// (rate_hold), as many HELD jobs as the key's window has room for back to
// WAITING. Then, in up to perKeyRounds rounds, it locks the next due
// WAITING jobs in priority order (room; after a round that held, room plus
// rateHoldLookahead), counts their keys' windows
// (rate_start, idx_rate_key_window), claims the jobs whose key has room
// and records their starts, and holds the others (HELD, out of idx_scan):
// a full key's backlog is read once, never again by the claims of the
// type's other keys. Every key that keeps held jobs gets its rate_hold row,
// opening when the oldest start in its window leaves it. Counting under
// the control row lock with a NOW(6) before the claim's stamp keeps every
// key's every window within the limit, as for a per-type limit.
func (s *Store) claimPerKey(ctx context.Context, q *jobqdb.Queries, jobType string, lane int, room int64, ctl jobqdb.TypeControlLockRow,
	claimFunc func(ids []uint64) ([]jobq.ClaimedJob, error)) ([]jobq.ClaimedJob, error) {
	limit := int64(ctl.RateStarts)
	held := map[string]bool{} // keys left with HELD jobs
	due, err := q.RateHoldDue(ctx, jobqdb.RateHoldDueParams{JobType: jobType, Limit: rateReleaseKeys})
	if err != nil {
		return nil, err
	}
	if len(due) > 0 {
		wins, err := keyWindows(ctx, q, jobType, ctl.RatePeriodUs, due)
		if err != nil {
			return nil, err
		}
		for _, k := range due {
			free := limit - wins[k].starts
			if free <= 0 {
				held[k] = true // opened early (a start left it since): set again below
				continue
			}
			ids, err := q.JobHeldByKey(ctx, jobqdb.JobHeldByKeyParams{RateKey: sql.NullString{String: k, Valid: true}, JobType: jobType, Limit: int32(free)})
			if err != nil {
				return nil, err
			}
			if len(ids) > 0 {
				if _, err := q.JobRelease(ctx, ids); err != nil {
					return nil, err
				}
			}
			if int64(len(ids)) < free {
				if err := q.RateHoldDelete(ctx, jobqdb.RateHoldDeleteParams{JobType: jobType, RateKey: k}); err != nil {
					return nil, err
				}
				continue
			}
			held[k] = true
		}
	}
	var claimed []jobq.ClaimedJob
	for round := 0; round < perKeyRounds && room > 0; round++ {
		ask := room
		if round > 0 {
			ask += rateHoldLookahead // the last round held: a backlog of full keys may lie ahead
		}
		var cands []jobqdb.JobLockAvailableByTypeKeyedRow
		if s.Server.SkipLocked {
			rows, err := q.JobLockAvailableByTypeKeyedSkipLocked(ctx, jobqdb.JobLockAvailableByTypeKeyedSkipLockedParams{JobType: jobType, Lane: int8(lane), Limit: int32(ask)})
			if err != nil {
				return nil, err
			}
			for _, r := range rows {
				cands = append(cands, jobqdb.JobLockAvailableByTypeKeyedRow(r))
			}
		} else {
			cands, err = q.JobLockAvailableByTypeKeyed(ctx, jobqdb.JobLockAvailableByTypeKeyedParams{JobType: jobType, Lane: int8(lane), Limit: int32(ask)})
			if err != nil {
				return nil, err
			}
		}
		if len(cands) == 0 {
			break
		}
		var keys []string
		for _, c := range cands {
			if !slices.Contains(keys, c.RateKey) {
				keys = append(keys, c.RateKey)
			}
		}
		wins, err := keyWindows(ctx, q, jobType, ctl.RatePeriodUs, keys)
		if err != nil {
			return nil, err
		}
		taken := map[string]int64{}
		var take, hold []uint64
		for _, c := range cands {
			if wins[c.RateKey].starts+taken[c.RateKey] < limit {
				if int64(len(take)) < room {
					taken[c.RateKey]++
					take = append(take, c.ID)
				} // else: its key has room, this claim has none; it stays WAITING
				continue
			}
			held[c.RateKey] = true
			hold = append(hold, c.ID)
		}
		if len(hold) > 0 {
			if _, err := q.JobHold(ctx, hold); err != nil {
				return nil, err
			}
		}
		if len(take) > 0 {
			got, err := claimFunc(take)
			if err != nil {
				return nil, err
			}
			claimed = append(claimed, got...)
			if _, err := q.RateStartRecord(ctx, take); err != nil {
				return nil, err
			}
			room -= int64(len(take))
		}
		if int64(len(cands)) < ask || len(hold) == 0 {
			break // no more due, or nothing held (room is spent)
		}
	}
	if len(held) > 0 {
		keys := slices.Sorted(maps.Keys(held))
		wins, err := keyWindows(ctx, q, jobType, ctl.RatePeriodUs, keys)
		if err != nil {
			return nil, err
		}
		var now time.Time
		for _, k := range keys {
			opens := wins[k].oldest.Add(time.Duration(ctl.RatePeriodUs) * time.Microsecond)
			if _, ok := wins[k]; !ok {
				// No start in its window (what was released is not claimed
				// yet): it has room now.
				if now.IsZero() {
					if now, err = q.DBNow(ctx); err != nil {
						return nil, err
					}
				}
				opens = now
			}
			if err := q.RateHoldSet(ctx, jobqdb.RateHoldSetParams{JobType: jobType, RateKey: k, OpensAt: opens}); err != nil {
				return nil, err
			}
		}
	}
	if _, err := q.RateStartPrune(ctx, jobqdb.RateStartPruneParams{JobType: jobType, PeriodUs: ctl.RatePeriodUs, Limit: rateStartPruneBatch}); err != nil {
		return nil, err
	}
	return claimed, nil
}

func periodicFromRow(r jobqdb.PeriodicJob) jobq.Periodic {
	return jobq.Periodic{
		Name: r.Name, Cron: r.CronExpr, JobType: r.JobType, Params: json.RawMessage(r.Params),
		Priority: int(r.Priority), MaxRetry: int(r.MaxRetry), TimeoutMs: int(r.TimeoutMs),
		Misfire: r.Misfire, Source: r.Source, NextRunAt: r.NextRunAt.UTC(), LastRunAt: nullTimePtr(r.LastRunAt),
		CreateTime: r.CreateTime.UTC(), UpdateTime: r.UpdateTime.UTC(),
		Workflow: workflowTemplate(r.Workflow),
		Overlap:  r.Overlap, ActiveJobID: uint64(nullInt(r.ActiveJobID)), QueuedJobID: uint64(nullInt(r.QueuedJobID)),
	}
}

// workflowTemplate decodes periodic_job.workflow (nil for a job schedule or
// a template that does not decode: it was validated when written).
func workflowTemplate(s sql.NullString) []jobq.WorkflowJobParams {
	if !s.Valid {
		return nil
	}
	var jobs []jobq.WorkflowJobParams
	if json.Unmarshal([]byte(s.String), &jobs) != nil {
		return nil
	}
	return jobs
}

// PeriodicUpsert creates the schedule spec.Name or replaces its definition.
// A new schedule (or one whose cron expression changed) starts at
// firstFunc(now), now being the database clock; an unchanged expression keeps
// its cursor, so a restart never forgets instants missed meanwhile. created
// reports whether the schedule is new.
func (s *Store) PeriodicUpsert(ctx context.Context, spec jobq.PeriodicSpec, firstFunc func(now time.Time) time.Time) (p jobq.Periodic, created bool, err error) {
	var wf sql.NullString
	if spec.Workflow != nil {
		b, err := json.Marshal(spec.Workflow)
		if err != nil {
			return jobq.Periodic{}, false, errorf("periodic upsert: %w", err)
		}
		wf = sql.NullString{String: string(b), Valid: true}
	}
	err = s.WithTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		now, err := q.DBNow(ctx)
		if err != nil {
			return err
		}
		n, err := q.PeriodicUpsert(ctx, jobqdb.PeriodicUpsertParams{Workflow: wf,
			Name: spec.Name, CronExpr: spec.Cron, JobType: spec.JobType, Params: spec.Params,
			Priority: int32(spec.Priority), MaxRetry: int32(spec.MaxRetry), TimeoutMs: int32(spec.TimeoutMs),
			Misfire: spec.Misfire, Source: spec.Source, NextRunAt: firstFunc(now.UTC()),
		})
		if err != nil {
			return err
		}
		created = n == 1 // 1: inserted, 2: updated (MySQL's ON DUPLICATE KEY row count)
		overlap := spec.Overlap
		if overlap == "" {
			overlap = jobq.OverlapAllow
		}
		if err := q.PeriodicSetOverlap(ctx, jobqdb.PeriodicSetOverlapParams{Overlap: overlap, Name: spec.Name}); err != nil {
			return err
		}
		r, err := q.PeriodicGet(ctx, spec.Name)
		p = periodicFromRow(r)
		return err
	})
	if err != nil {
		return jobq.Periodic{}, false, errorf("periodic upsert: %w", err)
	}
	return p, created, nil
}

// PeriodicGet returns one schedule, or ErrNotFound.
func (s *Store) PeriodicGet(ctx context.Context, name string) (jobq.Periodic, error) {
	r, err := s.q.PeriodicGet(ctx, name)
	if err != nil {
		return jobq.Periodic{}, notFound(err)
	}
	return periodicFromRow(r), nil
}

// PeriodicList returns every schedule, ordered by name.
func (s *Store) PeriodicList(ctx context.Context) ([]jobq.Periodic, error) {
	rows, err := s.q.PeriodicList(ctx)
	if err != nil {
		return nil, errorf("periodic list: %w", err)
	}
	out := make([]jobq.Periodic, len(rows))
	for i, r := range rows {
		out[i] = periodicFromRow(r)
	}
	return out, nil
}

// PeriodicDelete removes a schedule (its jobs and its fire ledger stay)
// and cancels its parked queue_one run, if it has one; ErrNotFound if none.
func (s *Store) PeriodicDelete(ctx context.Context, name string) error {
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		r, err := q.PeriodicLock(ctx, name)
		if err != nil {
			return notFound(err)
		}
		// A parked queue_one run has no one left to release it.
		if queued := uint64(nullInt(r.QueuedJobID)); queued != 0 {
			if _, parked, err := runState(ctx, q, queued); err != nil {
				return err
			} else if parked {
				if _, err := q.JobCancelWaiting(ctx, queued); err != nil {
					return err
				}
			}
		}
		n, err := q.PeriodicDelete(ctx, name)
		if err == nil && n == 0 {
			return jobq.ErrNotFound
		}
		return err
	})
	if errors.Is(err, jobq.ErrNotFound) {
		return jobq.ErrNotFound
	}
	if err != nil {
		return errorf("periodic delete: %w", err)
	}
	return nil
}

// JobPurge deletes terminal jobs finished before NOW(6) − p.OlderThan, and
// their job_execution rows, in batches of p.Batch, each its own short
// transaction that re-checks and locks the rows it deletes. It walks
// job_queue by primary key from the oldest id and stops at the first job
// created after the cutoff, so it never reads the young part of the table.
// job_effect rows (the testbed's) are kept.
func (s *Store) JobPurge(ctx context.Context, p jobq.PurgeParams) (jobq.PurgeResult, error) {
	if p.OlderThan <= 0 {
		return jobq.PurgeResult{}, errorf("purge: older than must be positive, got %s", p.OlderThan)
	}
	if p.Batch <= 0 {
		p.Batch = 500
	}
	now, err := s.DBNow(ctx)
	if err != nil {
		return jobq.PurgeResult{}, errorf("purge: %w", err)
	}
	res := jobq.PurgeResult{Cutoff: now.Add(-p.OlderThan)}
	var after uint64
	for p.MaxJobs <= 0 || res.Jobs < int64(p.MaxJobs) {
		rows, err := s.q.JobRetentionWalk(ctx, jobqdb.JobRetentionWalkParams{AfterID: after, Limit: int32(p.Batch)})
		if err != nil {
			return res, errorf("purge: walk: %w", err)
		}
		var cands []uint64
		reachedCutoff := false
		for _, r := range rows {
			if !r.CreateTime.Before(res.Cutoff) {
				reachedCutoff = true
				break
			}
			after = r.ID
			if (jobq.JobState(r.Status).Terminal()) &&
				r.FinishedAt.Valid && r.FinishedAt.Time.Before(res.Cutoff) {
				cands = append(cands, r.ID)
			}
		}
		if len(cands) > 0 {
			jobs, execs, err := s.purgeBatch(ctx, cands, res.Cutoff)
			if err != nil {
				return res, err
			}
			res.Jobs += jobs
			res.Executions += execs
			res.Batches++
			if p.BatchFunc != nil {
				p.BatchFunc(jobs, execs)
			}
		}
		if reachedCutoff || len(rows) < p.Batch {
			break
		}
	}
	return res, nil
}

func (s *Store) purgeBatch(ctx context.Context, cands []uint64, cutoff time.Time) (jobs, execs int64, err error) {
	err = s.WithTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		ids, err := q.JobRetentionLock(ctx, jobqdb.JobRetentionLockParams{Ids: cands, Cutoff: sql.NullTime{Time: cutoff, Valid: true}})
		if err != nil || len(ids) == 0 {
			return err
		}
		if execs, err = q.ExecutionDeleteByJobs(ctx, ids); err != nil {
			return err
		}
		// Each attempt's log and progress go with their job.
		if _, err = q.JobLogDeleteByJobs(ctx, ids); err != nil {
			return err
		}
		if _, err = q.RunInfoDeleteByJobs(ctx, ids); err != nil {
			return err
		}
		// So do their workflow edges (a terminal job has settled its
		// children already).
		if _, err = q.DependencyDeleteByJobs(ctx, jobqdb.DependencyDeleteByJobsParams{Ids: ids}); err != nil {
			return err
		}
		jobs, err = q.JobDeleteMany(ctx, ids)
		return err
	})
	if err != nil {
		return 0, 0, errorf("purge: delete batch: %w", err)
	}
	return jobs, execs, nil
}

// JobRetryBulk moves every job with p.Status (and p.JobType, if set) back to
// WAITING, due now, with retry_times reset, in batches of p.Batch walked by
// id. It returns how many jobs it re-queued.
func (s *Store) JobRetryBulk(ctx context.Context, p jobq.RetryBulkParams) (int64, error) {
	if p.Status != jobq.StateFailed && p.Status != jobq.StateCanceled {
		return 0, errorf("retry bulk: status must be %s or %s, got %q", jobq.StateFailed, jobq.StateCanceled, p.Status)
	}
	if p.Batch <= 0 {
		p.Batch = 500
	}
	var total int64
	var after uint64
	for {
		var ids []uint64
		var err error
		if p.JobType != "" {
			ids, err = s.q.JobIDsByTypeStatus(ctx, jobqdb.JobIDsByTypeStatusParams{JobType: p.JobType, TypeStatus: typeStatus(p.Status), Status: string(p.Status), AfterID: after, Limit: int32(p.Batch)})
		} else {
			ids, err = s.q.JobIDsByStatus(ctx, jobqdb.JobIDsByStatusParams{IndexStatus: indexStatus(p.Status), Status: string(p.Status), AfterID: after, Limit: int32(p.Batch)})
		}
		if err != nil {
			return total, errorf("retry bulk: %w", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		var n int64
		err = s.WithTx(ctx, func(tx *sql.Tx) error {
			q := s.q.WithTx(tx)
			t, keyed, err := lockKeysOf(ctx, q, ids) // keyed jobs are parked, then admitted
			if err != nil {
				return err
			}
			if n, err = q.JobRetryMany(ctx, jobqdb.JobRetryManyParams{Ids: ids, Status: string(p.Status)}); err != nil || n == 0 {
				return err
			}
			if err := reblockRetried(ctx, q, ids); err != nil {
				return err
			}
			if !keyed {
				return nil
			}
			if err := parkedKeysOf(ctx, q, ids, t); err != nil {
				return err
			}
			return admitKeys(ctx, tx, t)
		})
		if err != nil {
			return total, errorf("retry bulk: %w", err)
		}
		total += n
		after = ids[len(ids)-1]
		if len(ids) < p.Batch {
			return total, nil
		}
	}
}

// OldestWaitingAge returns how long, in microseconds by the database clock,
// the longest-due WAITING job on db has been due, or -1 when none is due. It
// reads idx_scan (scan_status, lane, priority DESC, run_at, …), whose WAITING
// entries are in due order within each (lane, priority) group: one index dive
// per group plus one (StatsWaitingGroupNext), however many jobs wait. The
// metrics' backlog sampler and QueueStats call it.
func OldestWaitingAge(ctx context.Context, db *sql.DB) (int64, error) {
	q := jobqdb.New(db)
	oldest := int64(-1)
	var p jobqdb.StatsWaitingGroupNextParams
	for {
		g, err := q.StatsWaitingGroupNext(ctx, p)
		if errors.Is(err, sql.ErrNoRows) {
			return oldest, nil
		}
		if err != nil {
			return 0, err
		}
		oldest = max(oldest, g.AgeUs)
		p = jobqdb.StatsWaitingGroupNextParams{Lane: sql.NullInt16{Int16: int16(g.Lane), Valid: true}, Priority: g.Priority}
	}
}

// QueueStats counts jobs by status and type (a full pass over
// idx_type_status and the RUNNING range of idx_lease), the age of the oldest due WAITING job, and jobs created
// and attempts finished within window (among the newest StatsRecentRows rows).
func (s *Store) QueueStats(ctx context.Context, window time.Duration) (jobq.QueueStats, error) {
	st := jobq.QueueStats{ByStatus: map[string]int64{}, ByTypeStatus: []jobq.TypeStatusCount{}, Finished: map[string]int64{}, WindowSeconds: window.Seconds()}
	now, err := s.DBNow(ctx)
	if err != nil {
		return st, errorf("stats: %w", err)
	}
	st.DBNow = now
	rows, err := s.q.StatsCountByTypeStatus(ctx)
	if err != nil {
		return st, errorf("stats: counts: %w", err)
	}
	running, err := s.q.StatsCountRunningByType(ctx)
	if err != nil {
		return st, errorf("stats: running counts: %w", err)
	}
	st.ByTypeStatus = typeStatusCounts(rows, running)
	for _, c := range st.ByTypeStatus {
		st.ByStatus[string(c.Status)] += c.Count
	}
	age, err := OldestWaitingAge(ctx, s.db)
	if err != nil {
		return st, errorf("stats: oldest waiting: %w", err)
	}
	if age >= 0 {
		sec := float64(age) / 1e6
		st.OldestWaitingSeconds = &sec
	}
	maxIDs, err := s.q.StatsMaxIDs(ctx)
	if err != nil {
		return st, errorf("stats: max ids: %w", err)
	}
	st.Created, err = s.q.StatsRecentCreated(ctx, jobqdb.StatsRecentCreatedParams{
		MinID: uint64(max(maxIDs.MaxJobID-jobq.StatsRecentRows, 0)), WindowUs: window.Microseconds()})
	if err != nil {
		return st, errorf("stats: created: %w", err)
	}
	outs, err := s.q.StatsRecentOutcomes(ctx, jobqdb.StatsRecentOutcomesParams{
		MinID: uint64(max(maxIDs.MaxExecutionID-jobq.StatsRecentRows, 0)), WindowUs: window.Microseconds()})
	if err != nil {
		return st, errorf("stats: finished: %w", err)
	}
	var finished int64
	for _, o := range outs {
		st.Finished[o.Outcome] = o.N
		finished += o.N
	}
	// Batched successes have no execution row: their job rows record them.
	succ, err := s.q.StatsRecentSucceeded(ctx, jobqdb.StatsRecentSucceededParams{
		MinID: uint64(max(maxIDs.MaxJobID-jobq.StatsRecentRows, 0)), WindowUs: window.Microseconds()})
	if err != nil {
		return st, errorf("stats: succeeded: %w", err)
	}
	if succ > 0 {
		st.Finished[string(jobq.OutcomeSuccess)] += succ
		finished += succ
	}
	if window > 0 {
		st.CreatedPerSecond = float64(st.Created) / window.Seconds()
		st.FinishedPerSecond = float64(finished) / window.Seconds()
	}
	return st, nil
}

// Activity reads the cluster's last `minutes` minutes (1–60) from the newest
// jobq.ActivityRecentRows job_execution rows and, for the batched successes
// that have no execution row, the newest jobq.ActivityRecentRows job rows:
// attempts started and their pickup latency, attempts finished by outcome,
// and the replicas that started attempts or hold RUNNING jobs. Seven
// statements, each bounded by primary key or by idx_lease.
func (s *Store) Activity(ctx context.Context, minutes int) (jobq.Activity, error) {
	a := jobq.Activity{Minutes: make([]jobq.MinuteActivity, minutes), Replicas: []jobq.ReplicaActivity{}}
	for i := range a.Minutes {
		a.Minutes[i] = jobq.MinuteActivity{MinutesAgo: i, Finished: map[jobq.Outcome]int64{}}
	}
	now, err := s.DBNow(ctx)
	if err != nil {
		return a, errorf("activity: %w", err)
	}
	a.DBNow = now
	maxIDs, err := s.q.StatsMaxIDs(ctx)
	if err != nil {
		return a, errorf("activity: max ids: %w", err)
	}
	minID := uint64(max(maxIDs.MaxExecutionID-jobq.ActivityRecentRows, 0))
	a.Bounded = minID > 0
	started, err := s.q.ActivityStarted(ctx, jobqdb.ActivityStartedParams{MinID: minID, Minutes: minutes})
	if err != nil {
		return a, errorf("activity: started: %w", err)
	}
	// Batched successes have no execution row: their job rows (the newest
	// jobq.ActivityRecentRows jobs) record them, read by the *Succeeded
	// statements and merged here.
	minJobID := uint64(max(maxIDs.MaxJobID-jobq.ActivityRecentRows, 0))
	a.Bounded = a.Bounded || minJobID > 0
	startedOK, err := s.q.ActivityStartedSucceeded(ctx, jobqdb.ActivityStartedSucceededParams{MinID: minJobID, Minutes: minutes})
	if err != nil {
		return a, errorf("activity: started: %w", err)
	}
	for _, r := range append(started, convertStarted(startedOK)...) {
		if r.MinutesAgo >= 0 && int(r.MinutesAgo) < minutes {
			m := &a.Minutes[r.MinutesAgo]
			if n := m.Started + r.Started; n > 0 {
				m.PickupAvg = (m.PickupAvg*time.Duration(m.Started) + time.Duration(r.PickupAvgUs)*time.Microsecond*time.Duration(r.Started)) / time.Duration(n)
			}
			m.Started += r.Started
			m.PickupMax = max(m.PickupMax, time.Duration(r.PickupMaxUs)*time.Microsecond)
		}
	}
	finished, err := s.q.ActivityFinished(ctx, jobqdb.ActivityFinishedParams{MinID: minID, Minutes: minutes})
	if err != nil {
		return a, errorf("activity: finished: %w", err)
	}
	for _, r := range finished {
		if r.MinutesAgo >= 0 && int(r.MinutesAgo) < minutes {
			a.Minutes[r.MinutesAgo].Finished[jobq.Outcome(r.Outcome)] += r.N
		}
	}
	finishedOK, err := s.q.ActivityFinishedSucceeded(ctx, jobqdb.ActivityFinishedSucceededParams{MinID: minJobID, Minutes: minutes})
	if err != nil {
		return a, errorf("activity: finished: %w", err)
	}
	for _, r := range finishedOK {
		if r.MinutesAgo >= 0 && int(r.MinutesAgo) < minutes {
			a.Minutes[r.MinutesAgo].Finished[jobq.OutcomeSuccess] += r.N
		}
	}
	owners, err := s.q.ActivityOwners(ctx, jobqdb.ActivityOwnersParams{MinID: minID, Minutes: minutes})
	if err != nil {
		return a, errorf("activity: owners: %w", err)
	}
	ownersOK, err := s.q.ActivityOwnersSucceeded(ctx, jobqdb.ActivityOwnersSucceededParams{MinID: minJobID, Minutes: minutes})
	if err != nil {
		return a, errorf("activity: owners: %w", err)
	}
	for _, r := range ownersOK {
		owners = append(owners, jobqdb.ActivityOwnersRow(r))
	}
	byOwner := map[string]int{}
	for _, r := range owners {
		ls, lf := r.LastStarted.UTC(), r.LastFinished.UTC()
		if i, ok := byOwner[r.Owner]; ok {
			ra := &a.Replicas[i]
			ra.Attempts += r.Attempts
			if ls.After(*ra.LastStarted) {
				ra.LastStarted = &ls
			}
			if !lf.Equal(ls) && (ra.LastFinished == nil || lf.After(*ra.LastFinished)) {
				ra.LastFinished = &lf
			}
			continue
		}
		ra := jobq.ReplicaActivity{Owner: r.Owner, Attempts: r.Attempts, LastStarted: &ls}
		if !lf.Equal(ls) {
			ra.LastFinished = &lf
		}
		byOwner[r.Owner] = len(a.Replicas)
		a.Replicas = append(a.Replicas, ra)
	}
	running, err := s.q.ActivityRunningOwners(ctx)
	if err != nil {
		return a, errorf("activity: running owners: %w", err)
	}
	for _, r := range running {
		lu := r.LeaseUntil.UTC()
		i, ok := byOwner[r.Owner]
		if !ok {
			i = len(a.Replicas)
			a.Replicas = append(a.Replicas, jobq.ReplicaActivity{Owner: r.Owner})
		}
		a.Replicas[i].Running, a.Replicas[i].LeaseUntil = r.Running, &lu
	}
	slices.SortFunc(a.Replicas, func(x, y jobq.ReplicaActivity) int { return strings.Compare(x.Owner, y.Owner) })
	return a, nil
}

// convertStarted gives ActivityStartedSucceeded's rows ActivityStarted's type.
func convertStarted(rs []jobqdb.ActivityStartedSucceededRow) []jobqdb.ActivityStartedRow {
	out := make([]jobqdb.ActivityStartedRow, len(rs))
	for i, r := range rs {
		out[i] = jobqdb.ActivityStartedRow(r)
	}
	return out
}

// typeStatusCounts merges the counts by type and type_status (RUNNING jobs
// counted as WAITING) with the RUNNING counts by type into counts by type
// and status, ordered by type then status; a zero count is left out.
func typeStatusCounts(rows []jobqdb.StatsCountByTypeStatusRow, running []jobqdb.StatsCountRunningByTypeRow) []jobq.TypeStatusCount {
	byType := make(map[string]int64, len(running))
	for _, r := range running {
		byType[r.JobType] = r.N
	}
	out := make([]jobq.TypeStatusCount, 0, len(rows)+len(running))
	for _, r := range rows {
		n := r.N
		if jobq.JobState(r.Status.String) == jobq.StateWaiting {
			if c := byType[r.JobType]; c > 0 {
				out = append(out, jobq.TypeStatusCount{JobType: r.JobType, Status: jobq.StateRunning, Count: c})
				n -= c
			}
		}
		if n > 0 {
			out = append(out, jobq.TypeStatusCount{JobType: r.JobType, Status: jobq.JobState(r.Status.String), Count: n})
		}
	}
	slices.SortStableFunc(out, func(a, b jobq.TypeStatusCount) int {
		return cmp.Or(cmp.Compare(a.JobType, b.JobType), cmp.Compare(a.Status, b.Status))
	})
	return out
}

// typeStatus is the key idx_type_status holds for a job in status s
// (migration 021): s, except that RUNNING is indexed as WAITING. A read by
// type and status names it next to status.
func typeStatus(s jobq.JobState) sql.NullString {
	if s == jobq.StateRunning {
		s = jobq.StateWaiting
	}
	return sql.NullString{String: string(s), Valid: true}
}

// indexStatus is the key idx_lease holds for a job in status s (migration
// 021): s, except that PARKED is indexed as WAITING.
// A read by status names it next to status (MariaDB uses an index on a
// virtual column only for a query that names it).
func indexStatus(s jobq.JobState) sql.NullString {
	if s == jobq.StateParked {
		s = jobq.StateWaiting
	}
	return sql.NullString{String: string(s), Valid: true}
}
