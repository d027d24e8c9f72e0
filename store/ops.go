package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jobq/jobq/gen/jobqdb"
)

// TypeControl is the operations state of one job type (job_type_control).
// A type without a row is neither paused nor limited.
type TypeControl struct {
	JobType string `json:"job_type"`
	// Paused types are not claimed; their RUNNING jobs finish normally.
	Paused bool `json:"paused"`
	// MaxRunning caps the type's RUNNING jobs across all replicas; 0 = no limit.
	MaxRunning int       `json:"max_running"`
	UpdateTime time.Time `json:"update_time"`
}

func typeControlFromRow(r jobqdb.JobTypeControl) TypeControl {
	return TypeControl{JobType: r.JobType, Paused: r.Paused, MaxRunning: int(r.MaxRunning), UpdateTime: r.UpdateTime.UTC()}
}

// TypeSetPaused pauses (paused=true) or resumes a job type and returns its
// control row. Pausing takes effect on the next scan of every replica (the
// scan reads job_type_control in the same statement); runs already RUNNING
// are not interrupted.
func (s *Store) TypeSetPaused(ctx context.Context, jobType string, paused bool) (TypeControl, error) {
	if err := s.q.TypeControlSetPaused(ctx, jobqdb.TypeControlSetPausedParams{JobType: jobType, Paused: paused}); err != nil {
		return TypeControl{}, fmt.Errorf("set paused: %w", err)
	}
	return s.TypeControlGet(ctx, jobType)
}

// TypeSetLimit sets a job type's cluster-wide limit of RUNNING jobs
// (maxRunning ≥ 0; 0 removes the limit) and returns its control row. A new
// limit applies to claims that start after it commits; runs already RUNNING
// are not stopped, so the count can exceed a lowered limit until they finish.
func (s *Store) TypeSetLimit(ctx context.Context, jobType string, maxRunning int) (TypeControl, error) {
	if err := s.q.TypeControlSetLimit(ctx, jobqdb.TypeControlSetLimitParams{JobType: jobType, MaxRunning: int32(maxRunning)}); err != nil {
		return TypeControl{}, fmt.Errorf("set limit: %w", err)
	}
	return s.TypeControlGet(ctx, jobType)
}

// TypeControlGet returns a job type's control row; a type without one gets
// the zero state (not paused, no limit) and no error.
func (s *Store) TypeControlGet(ctx context.Context, jobType string) (TypeControl, error) {
	r, err := s.q.TypeControlGet(ctx, jobType)
	if errors.Is(err, sql.ErrNoRows) {
		return TypeControl{JobType: jobType}, nil
	}
	if err != nil {
		return TypeControl{}, fmt.Errorf("type control: %w", err)
	}
	return typeControlFromRow(r), nil
}

// TypeControls lists every control row, ordered by job type.
func (s *Store) TypeControls(ctx context.Context) ([]TypeControl, error) {
	rows, err := s.q.TypeControlList(ctx)
	if err != nil {
		return nil, fmt.Errorf("type controls: %w", err)
	}
	out := make([]TypeControl, len(rows))
	for i, r := range rows {
		out[i] = typeControlFromRow(r)
	}
	return out, nil
}

// TypeLimits returns job type → max_running for every limited type.
func (s *Store) TypeLimits(ctx context.Context) (map[string]int, error) {
	rows, err := s.q.TypeControlLimited(ctx)
	if err != nil {
		return nil, fmt.Errorf("type limits: %w", err)
	}
	m := make(map[string]int, len(rows))
	for _, r := range rows {
		m[r.JobType] = int(r.MaxRunning)
	}
	return m, nil
}

// TypeClaimable reports, without locking, whether a limited claim of
// jobType could claim something now: the type is not paused, has fewer
// RUNNING jobs than its max_running and has a due WAITING job (one read on
// job_type_control and idx_type_status). It is the cheap probe before
// JobClaimLimited, so a type at its limit takes no lock.
func (s *Store) TypeClaimable(ctx context.Context, jobType string) (bool, error) {
	rows, err := s.q.TypeProbeClaimable(ctx, jobType)
	if err != nil {
		return false, fmt.Errorf("probe type: %w", err)
	}
	return len(rows) > 0, nil
}

// JobClaimLimited claims due jobs of one limited job type without ever
// letting its RUNNING count exceed max_running across replicas. In one READ
// COMMITTED transaction it locks the type's job_type_control row FOR UPDATE
// (serialising every claim of the type), counts the type's RUNNING jobs,
// and claims at most min(p.Limit, max_running − running) due jobs in
// priority order (skipping rows another transaction holds, where SKIP LOCKED
// exists). It claims nothing when the type is paused, has no limit
// any more (the ordinary scan serves it then) or is at its limit.
func (s *Store) JobClaimLimited(ctx context.Context, jobType string, p ClaimParams) ([]ClaimedJob, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("claim limited: %w", err)
	}
	claimed, err := s.claimLimited(ctx, s.q.WithTx(tx), jobType, p)
	if err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("claim limited %q: %w", jobType, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("claim limited %q: commit: %w", jobType, err)
	}
	return claimed, nil
}

func (s *Store) claimLimited(ctx context.Context, q *jobqdb.Queries, jobType string, p ClaimParams) ([]ClaimedJob, error) {
	ctl, err := q.TypeControlLock(ctx, jobType)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if ctl.Paused || ctl.MaxRunning <= 0 {
		return nil, nil
	}
	running, err := q.JobCountRunningByType(ctx, jobType)
	if err != nil {
		return nil, err
	}
	room := min(int64(ctl.MaxRunning)-running, int64(p.Limit))
	if room <= 0 {
		return nil, nil
	}
	var ids []uint64
	if s.Server.SkipLocked {
		ids, err = q.JobLockAvailableByTypeSkipLocked(ctx, jobqdb.JobLockAvailableByTypeSkipLockedParams{JobType: jobType, Limit: int32(room)})
	} else {
		ids, err = q.JobLockAvailableByType(ctx, jobqdb.JobLockAvailableByTypeParams{JobType: jobType, Limit: int32(room)})
	}
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	return s.claimRows(ctx, q, p, ids)
}

// Misfire policies of a periodic schedule.
const (
	// MisfireSkip drops instants missed while every replica was down: no
	// catch-up, the schedule resumes at its next instant.
	MisfireSkip = "skip"
	// MisfireOnce runs exactly one catch-up job (the latest missed instant).
	MisfireOnce = "once"
)

// Sources of a periodic schedule.
const (
	PeriodicSourceAPI    = "api"    // created through /v1/periodic
	PeriodicSourceConfig = "config" // from `jobq serve --periodic` or --periodic-file
)

// PeriodicInstantLayout formats a scheduled instant (UTC, whole seconds) in
// a periodic job's key '<name>@<instant>', e.g. "nightly@2026-01-02T03:00:00Z".
const PeriodicInstantLayout = "2006-01-02T15:04:05Z"

// PeriodicKey is the job_key of schedule name's job for instant.
func PeriodicKey(name string, instant time.Time) string {
	return name + "@" + instant.UTC().Format(PeriodicInstantLayout)
}

// Periodic is one cron schedule (periodic_job). Times are UTC.
type Periodic struct {
	Name      string          `json:"name"`
	Cron      string          `json:"cron"`
	JobType   string          `json:"job_type"`
	Params    json.RawMessage `json:"params"`
	Priority  int             `json:"priority"`
	MaxRetry  int             `json:"max_retry"`
	TimeoutMs int             `json:"timeout_ms"`
	Misfire   string          `json:"misfire"`
	Source    string          `json:"source"`
	// NextRunAt is the cursor: the first scheduled instant not yet enqueued.
	NextRunAt time.Time `json:"next_run_at"`
	// LastRunAt is the latest instant enqueued, if any.
	LastRunAt  *time.Time `json:"last_run_at,omitempty"`
	CreateTime time.Time  `json:"create_time"`
	UpdateTime time.Time  `json:"update_time"`
}

func periodicFromRow(r jobqdb.PeriodicJob) Periodic {
	return Periodic{
		Name: r.Name, Cron: r.CronExpr, JobType: r.JobType, Params: json.RawMessage(r.Params),
		Priority: int(r.Priority), MaxRetry: int(r.MaxRetry), TimeoutMs: int(r.TimeoutMs),
		Misfire: r.Misfire, Source: r.Source, NextRunAt: r.NextRunAt.UTC(), LastRunAt: nullTimePtr(r.LastRunAt),
		CreateTime: r.CreateTime.UTC(), UpdateTime: r.UpdateTime.UTC(),
	}
}

// PeriodicSpec is a validated schedule to create or replace. Params must be
// a compact JSON object.
type PeriodicSpec struct {
	Name      string
	Cron      string
	JobType   string
	Params    string
	Priority  int
	MaxRetry  int
	TimeoutMs int
	Misfire   string // MisfireSkip or MisfireOnce
	Source    string // PeriodicSourceAPI or PeriodicSourceConfig
}

// PeriodicUpsert creates the schedule spec.Name or replaces its definition.
// A new schedule (or one whose cron expression changed) starts at
// firstFunc(now), now being the database clock; an unchanged expression keeps
// its cursor, so a restart never forgets instants missed meanwhile. created
// reports whether the schedule is new.
func (s *Store) PeriodicUpsert(ctx context.Context, spec PeriodicSpec, firstFunc func(now time.Time) time.Time) (p Periodic, created bool, err error) {
	err = s.WithTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		now, err := q.DBNow(ctx)
		if err != nil {
			return err
		}
		n, err := q.PeriodicUpsert(ctx, jobqdb.PeriodicUpsertParams{
			Name: spec.Name, CronExpr: spec.Cron, JobType: spec.JobType, Params: spec.Params,
			Priority: int32(spec.Priority), MaxRetry: int32(spec.MaxRetry), TimeoutMs: int32(spec.TimeoutMs),
			Misfire: spec.Misfire, Source: spec.Source, NextRunAt: firstFunc(now.UTC()),
		})
		if err != nil {
			return err
		}
		created = n == 1 // 1: inserted, 2: updated (MySQL's ON DUPLICATE KEY row count)
		r, err := q.PeriodicGet(ctx, spec.Name)
		p = periodicFromRow(r)
		return err
	})
	if err != nil {
		return Periodic{}, false, fmt.Errorf("periodic upsert: %w", err)
	}
	return p, created, nil
}

// PeriodicGet returns one schedule, or ErrNotFound.
func (s *Store) PeriodicGet(ctx context.Context, name string) (Periodic, error) {
	r, err := s.q.PeriodicGet(ctx, name)
	if err != nil {
		return Periodic{}, notFound(err)
	}
	return periodicFromRow(r), nil
}

// PeriodicList returns every schedule, ordered by name.
func (s *Store) PeriodicList(ctx context.Context) ([]Periodic, error) {
	rows, err := s.q.PeriodicList(ctx)
	if err != nil {
		return nil, fmt.Errorf("periodic list: %w", err)
	}
	out := make([]Periodic, len(rows))
	for i, r := range rows {
		out[i] = periodicFromRow(r)
	}
	return out, nil
}

// PeriodicDelete removes a schedule (its jobs stay); ErrNotFound if none.
func (s *Store) PeriodicDelete(ctx context.Context, name string) error {
	n, err := s.q.PeriodicDelete(ctx, name)
	if err != nil {
		return fmt.Errorf("periodic delete: %w", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// PeriodicPlanFunc decides, under the schedule's row lock, which instants to
// enqueue given the schedule (its cursor NextRunAt) and the database clock
// now, and the new cursor (an instant after now). Returning next equal to
// p.NextRunAt and no instants leaves the row untouched.
type PeriodicPlanFunc func(p Periodic, now time.Time) (enqueue []time.Time, next time.Time)

// PeriodicFireResult is what one fire of a schedule did.
type PeriodicFireResult struct {
	// Inserted are the instants whose job this fire created (an instant whose
	// key already existed is not listed).
	Inserted []time.Time
	// Next is the schedule's cursor after the fire; DBNow the database clock
	// during it, so a replica can sleep Next−DBNow whatever its own clock says.
	Next, DBNow time.Time
}

// PeriodicFire fires schedule name in one transaction: it locks the row
// FOR UPDATE, asks plan what to enqueue, inserts one WAITING job per instant
// (job_key PeriodicKey(name, instant), run_at = the instant) and moves the
// cursor. Replicas firing the same schedule at once serialise on the row
// lock, so each instant becomes exactly one job. ErrNotFound when the
// schedule was deleted.
func (s *Store) PeriodicFire(ctx context.Context, name string, plan PeriodicPlanFunc) (PeriodicFireResult, error) {
	var res PeriodicFireResult
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		res = PeriodicFireResult{}
		q := s.q.WithTx(tx)
		r, err := q.PeriodicLock(ctx, name)
		if err != nil {
			return notFound(err)
		}
		now, err := q.DBNow(ctx)
		if err != nil {
			return err
		}
		p := periodicFromRow(r)
		res.DBNow = now.UTC()
		enqueue, next := plan(p, res.DBNow)
		res.Next = next.UTC()
		if len(enqueue) == 0 && res.Next.Equal(p.NextRunAt) {
			return nil
		}
		var last sql.NullTime
		for _, at := range enqueue {
			at = at.UTC()
			key := PeriodicKey(name, at)
			sum := sha256.Sum256([]byte("periodic\x00" + key + "\x00" + p.JobType + "\x00" + string(p.Params)))
			n, err := q.JobInsertPeriodic(ctx, jobqdb.JobInsertPeriodicParams{
				JobKey: key, JobType: p.JobType, Params: string(p.Params), RequestHash: hex.EncodeToString(sum[:]),
				Priority: int32(p.Priority), MaxRetry: int32(p.MaxRetry), TimeoutMs: int32(p.TimeoutMs), RunAt: at,
			})
			if err != nil {
				return err
			}
			if n > 0 {
				res.Inserted = append(res.Inserted, at)
			}
			last = sql.NullTime{Time: at, Valid: true}
		}
		return q.PeriodicAdvance(ctx, jobqdb.PeriodicAdvanceParams{NextRunAt: res.Next, LastRunAt: last, Name: name})
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return PeriodicFireResult{}, ErrNotFound
		}
		return PeriodicFireResult{}, fmt.Errorf("periodic fire %q: %w", name, err)
	}
	return res, nil
}

// PurgeParams configures a retention pass.
type PurgeParams struct {
	// OlderThan: terminal jobs (SUCCESS, FAILED, CANCELED) whose finished_at
	// is more than this before NOW(6) are deleted with their job_execution
	// rows. Must be positive.
	OlderThan time.Duration
	// Batch is the most jobs one short delete transaction removes (and the
	// rows one walk step reads). Defaults to 500.
	Batch int
	// MaxJobs stops the pass after about this many deletions; 0 = no cap.
	MaxJobs int
	// BatchFunc, if set, is called after each committed batch with the jobs
	// and execution rows it deleted.
	BatchFunc func(jobs, executions int64)
}

// PurgeResult counts what a retention pass deleted.
type PurgeResult struct {
	Jobs       int64     `json:"jobs"`       // job_queue rows deleted
	Executions int64     `json:"executions"` // job_execution rows deleted
	Batches    int       `json:"batches"`    // delete transactions committed
	Cutoff     time.Time `json:"cutoff"`     // NOW(6) − OlderThan, UTC
}

// JobPurge deletes terminal jobs finished before NOW(6) − p.OlderThan, and
// their job_execution rows, in batches of p.Batch, each its own short
// transaction that re-checks and locks the rows it deletes. It walks
// job_queue by primary key from the oldest id and stops at the first job
// created after the cutoff, so it never reads the young part of the table.
// job_effect rows (the testbed's) are kept.
func (s *Store) JobPurge(ctx context.Context, p PurgeParams) (PurgeResult, error) {
	if p.OlderThan <= 0 {
		return PurgeResult{}, fmt.Errorf("purge: older than must be positive, got %s", p.OlderThan)
	}
	if p.Batch <= 0 {
		p.Batch = 500
	}
	now, err := s.DBNow(ctx)
	if err != nil {
		return PurgeResult{}, fmt.Errorf("purge: %w", err)
	}
	res := PurgeResult{Cutoff: now.Add(-p.OlderThan)}
	var after uint64
	for p.MaxJobs <= 0 || res.Jobs < int64(p.MaxJobs) {
		rows, err := s.q.JobRetentionWalk(ctx, jobqdb.JobRetentionWalkParams{AfterID: after, Limit: int32(p.Batch)})
		if err != nil {
			return res, fmt.Errorf("purge: walk: %w", err)
		}
		var cands []uint64
		reachedCutoff := false
		for _, r := range rows {
			if !r.CreateTime.Before(res.Cutoff) {
				reachedCutoff = true
				break
			}
			after = r.ID
			if (r.Status == StatusSuccess || r.Status == StatusFailed || r.Status == StatusCanceled) &&
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
		jobs, err = q.JobDeleteMany(ctx, ids)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("purge: delete batch: %w", err)
	}
	return jobs, execs, nil
}

// RetryBulkParams selects the jobs a bulk retry re-queues.
type RetryBulkParams struct {
	Status  string // StatusFailed or StatusCanceled
	JobType string // "" for every type
	Batch   int    // ids per UPDATE; defaults to 500
}

// JobRetryBulk moves every job with p.Status (and p.JobType, if set) back to
// WAITING, due now, with retry_times reset, in batches of p.Batch walked by
// id. It returns how many jobs it re-queued.
func (s *Store) JobRetryBulk(ctx context.Context, p RetryBulkParams) (int64, error) {
	if p.Status != StatusFailed && p.Status != StatusCanceled {
		return 0, fmt.Errorf("retry bulk: status must be %s or %s, got %q", StatusFailed, StatusCanceled, p.Status)
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
			ids, err = s.q.JobIDsByTypeStatus(ctx, jobqdb.JobIDsByTypeStatusParams{JobType: p.JobType, Status: p.Status, AfterID: after, Limit: int32(p.Batch)})
		} else {
			ids, err = s.q.JobIDsByStatus(ctx, jobqdb.JobIDsByStatusParams{Status: p.Status, AfterID: after, Limit: int32(p.Batch)})
		}
		if err != nil {
			return total, fmt.Errorf("retry bulk: %w", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		n, err := s.q.JobRetryMany(ctx, jobqdb.JobRetryManyParams{Ids: ids, Status: p.Status})
		if err != nil {
			return total, fmt.Errorf("retry bulk: %w", err)
		}
		total += n
		after = ids[len(ids)-1]
		if len(ids) < p.Batch {
			return total, nil
		}
	}
}

// StatsRecentRows bounds the rows the recent-rate counts of QueueStats read:
// only the newest this many job_queue and job_execution rows (by id).
const StatsRecentRows = 100000

// TypeStatusCount is the number of jobs of one type in one status.
type TypeStatusCount struct {
	JobType string `json:"job_type"`
	Status  string `json:"status"`
	Count   int64  `json:"count"`
}

// QueueStats is a snapshot of the queue for `jobq stats`.
type QueueStats struct {
	DBNow time.Time `json:"db_now"`
	// ByStatus counts every job by status; ByTypeStatus by type and status.
	ByStatus     map[string]int64  `json:"by_status"`
	ByTypeStatus []TypeStatusCount `json:"by_type_status"`
	// OldestWaitingSeconds is how long the longest-due WAITING job has been
	// due (NOW(6) − run_at); null when no job is due.
	OldestWaitingSeconds *float64 `json:"oldest_waiting_seconds"`
	// WindowSeconds is the span of the recent counts below (ending now).
	WindowSeconds float64 `json:"window_seconds"`
	// Created counts jobs created in the window; Finished counts attempts
	// finished in the window by outcome (SUCCESS, FAILED, CANCELED, …).
	Created  int64            `json:"created"`
	Finished map[string]int64 `json:"finished"`
	// CreatedPerSecond and FinishedPerSecond are those counts over the window.
	CreatedPerSecond  float64 `json:"created_per_second"`
	FinishedPerSecond float64 `json:"finished_per_second"`
}

// QueueStats counts jobs by status and type (a full pass over
// idx_type_status), the age of the oldest due WAITING job, and jobs created
// and attempts finished within window (among the newest StatsRecentRows rows).
func (s *Store) QueueStats(ctx context.Context, window time.Duration) (QueueStats, error) {
	st := QueueStats{ByStatus: map[string]int64{}, ByTypeStatus: []TypeStatusCount{}, Finished: map[string]int64{}, WindowSeconds: window.Seconds()}
	now, err := s.DBNow(ctx)
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	st.DBNow = now
	rows, err := s.q.StatsCountByTypeStatus(ctx)
	if err != nil {
		return st, fmt.Errorf("stats: counts: %w", err)
	}
	for _, r := range rows {
		st.ByTypeStatus = append(st.ByTypeStatus, TypeStatusCount{JobType: r.JobType, Status: r.Status, Count: r.N})
		st.ByStatus[r.Status] += r.N
	}
	age, err := s.q.StatsOldestWaiting(ctx)
	if err != nil {
		return st, fmt.Errorf("stats: oldest waiting: %w", err)
	}
	if age >= 0 {
		sec := float64(age) / 1e6
		st.OldestWaitingSeconds = &sec
	}
	maxIDs, err := s.q.StatsMaxIDs(ctx)
	if err != nil {
		return st, fmt.Errorf("stats: max ids: %w", err)
	}
	st.Created, err = s.q.StatsRecentCreated(ctx, jobqdb.StatsRecentCreatedParams{
		MinID: uint64(max(maxIDs.MaxJobID-StatsRecentRows, 0)), WindowUs: window.Microseconds()})
	if err != nil {
		return st, fmt.Errorf("stats: created: %w", err)
	}
	outs, err := s.q.StatsRecentOutcomes(ctx, jobqdb.StatsRecentOutcomesParams{
		MinID: uint64(max(maxIDs.MaxExecutionID-StatsRecentRows, 0)), WindowUs: window.Microseconds()})
	if err != nil {
		return st, fmt.Errorf("stats: finished: %w", err)
	}
	var finished int64
	for _, o := range outs {
		st.Finished[o.Outcome] = o.N
		finished += o.N
	}
	if window > 0 {
		st.CreatedPerSecond = float64(st.Created) / window.Seconds()
		st.FinishedPerSecond = float64(finished) / window.Seconds()
	}
	return st, nil
}
