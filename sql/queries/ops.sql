-- Operations statements: job type control (pause, resume, concurrency
-- limits), the limited claim, periodic schedules, retention, bulk retry and
-- stats. sqlc generates them into gen/jobqdb with jobs.sql. All times come
-- from the database clock (NOW(6)). The upserts name their new values by
-- parameter (sqlc.arg again), not by VALUES(col): MySQL deprecates VALUES()
-- in ON DUPLICATE KEY UPDATE since 8.0.20 and MariaDB has no row alias
-- (INSERT … AS new), so a repeated parameter is the one spelling both take.

-- name: TypeControlSetPaused :exec
INSERT INTO job_type_control (job_type, paused, max_running, update_time)
VALUES (sqlc.arg(job_type), sqlc.arg(paused), 0, NOW(6))
ON DUPLICATE KEY UPDATE paused = sqlc.arg(paused), update_time = NOW(6);

-- name: TypeControlSetLimit :exec
INSERT INTO job_type_control (job_type, paused, max_running, update_time)
VALUES (sqlc.arg(job_type), 0, sqlc.arg(max_running), NOW(6))
ON DUPLICATE KEY UPDATE max_running = sqlc.arg(max_running), update_time = NOW(6);

-- name: TypeControlSetRate :exec
-- Sets (rate_starts > 0) or clears (0, 0, 0) a job type's rate limit;
-- rate_per_key 1 applies it to each rate key of the type.
INSERT INTO job_type_control (job_type, paused, max_running, rate_starts, rate_period_us, rate_per_key, update_time)
VALUES (sqlc.arg(job_type), 0, 0, sqlc.arg(rate_starts), sqlc.arg(rate_period_us), sqlc.arg(rate_per_key), NOW(6))
ON DUPLICATE KEY UPDATE rate_starts = sqlc.arg(rate_starts), rate_period_us = sqlc.arg(rate_period_us),
    rate_per_key = sqlc.arg(rate_per_key), update_time = NOW(6);

-- name: JobReleaseHeldByType :execrows
-- Every HELD job of a type back to WAITING, in the transaction that clears
-- the type's rate limit or makes it per type (idx_type_status): no claim
-- would release them any more.
UPDATE job_queue SET status = 'WAITING', update_time = NOW(6)
WHERE job_type = ? AND type_status = 'HELD' AND status = 'HELD';

-- name: RateHoldDeleteByType :execrows
DELETE FROM rate_hold WHERE job_type = ?;

-- name: TypeControlGet :one
SELECT * FROM job_type_control WHERE job_type = ?;

-- name: TypeControlList :many
SELECT * FROM job_type_control ORDER BY job_type;

-- name: TypeControlLimited :many
-- The job types the limited claim serves (a concurrency or a rate limit),
-- read on a slow cadence.
SELECT job_type, max_running, rate_starts, rate_period_us FROM job_type_control
WHERE max_running > 0 OR rate_starts > 0
ORDER BY job_type;

-- name: TypeControlLock :one
-- First statement of the limited claim: serialises every claim of one type
-- across replicas until commit.
SELECT paused, max_running, rate_starts, rate_period_us, rate_per_key FROM job_type_control
WHERE job_type = ?
FOR UPDATE;

-- name: RateWindowCount :one
-- The starts of a rate-limited type in the window ending now, (NOW(6) − P,
-- NOW(6)], on idx_rate_window, read under the type's control row lock. This
-- NOW(6) is earlier than the one the claim's UPDATE then stamps, so the
-- window counted ends no later than the claim's: it holds every start the
-- claim's own window holds (and perhaps more), never fewer.
SELECT COUNT(*) FROM rate_start
WHERE job_type = sqlc.arg(job_type)
  AND started_at > NOW(6) - INTERVAL sqlc.arg(period_us) MICROSECOND;

-- name: RateStartRecord :execrows
-- Records the starts a limited claim just made, with the started_at its
-- UPDATE stamped on each job (the rows are locked by the claim) and the
-- job's rate key ('' for none).
INSERT INTO rate_start (job_type, rate_key, started_at, job_id)
SELECT q.job_type, COALESCE(q.rate_key, ''), q.started_at, q.id FROM job_queue AS q
WHERE q.id IN (sqlc.slice(ids));

-- name: RateKeyWindows :many
-- The per-key limit's count: for each of rate_keys, its starts in the
-- window ending now, (NOW(6) − P, NOW(6)], and the oldest of them (the
-- window next has room at oldest + P), on idx_rate_key_window, under the
-- type's control row lock. Keys without a start in the window have no row.
-- NOW(6) precedes the claim's stamp, as in RateWindowCount: safe.
SELECT rate_key, COUNT(*) AS starts, CAST(MIN(started_at) AS DATETIME(6)) AS oldest FROM rate_start
WHERE job_type = sqlc.arg(job_type) AND rate_key IN (sqlc.slice(rate_keys))
  AND started_at > NOW(6) - INTERVAL sqlc.arg(period_us) MICROSECOND
GROUP BY rate_key;

-- name: RateHoldDue :many
-- The keys of a per-key type whose held jobs' window has opened, earliest
-- first (idx_rate_hold_open), read under the type's control row lock.
SELECT rate_key FROM rate_hold
WHERE job_type = ? AND opens_at <= NOW(6)
ORDER BY opens_at
LIMIT ?;

-- name: RateHoldSet :exec
-- A key of a per-key type has HELD jobs; its window next has room at
-- opens_at (database clock).
INSERT INTO rate_hold (job_type, rate_key, opens_at)
VALUES (sqlc.arg(job_type), sqlc.arg(rate_key), sqlc.arg(opens_at))
ON DUPLICATE KEY UPDATE opens_at = sqlc.arg(opens_at);

-- name: RateHoldDelete :exec
-- The key has no HELD job left.
DELETE FROM rate_hold WHERE job_type = ? AND rate_key = ?;

-- name: JobHeldByKey :many
-- The release's pick: a key's HELD jobs by priority DESC, run_at, id on
-- idx_rate_held. A plain read: the type's control row lock, which the
-- caller holds, serialises every hold and release of the type; a cancel
-- that ends one meanwhile makes JobRelease skip it.
SELECT id FROM job_queue
WHERE held_rate_key = sqlc.arg(rate_key) AND job_type = sqlc.arg(job_type)
ORDER BY priority DESC, run_at, id
LIMIT ?;

-- name: JobRelease :execrows
-- HELD jobs back to WAITING (their run_at is kept: they were due), by
-- primary key only.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = 'WAITING', update_time = NOW(6)
WHERE id IN (sqlc.slice(ids)) AND status = 'HELD';

-- name: JobHold :execrows
-- WAITING jobs of a per-key type whose key's window is full become HELD,
-- by primary key only; the limited claim holds their rows.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = 'HELD', update_time = NOW(6)
WHERE id IN (sqlc.slice(ids)) AND status = 'WAITING';

-- name: RateStartPrune :execrows
-- Deletes starts of a type older than its window (at most LIMIT per claim),
-- so rate_start holds about one window of starts per rate-limited type.
DELETE FROM rate_start
WHERE job_type = sqlc.arg(job_type)
  AND started_at <= NOW(6) - INTERVAL sqlc.arg(period_us) MICROSECOND
ORDER BY started_at
LIMIT ?;

-- name: JobCountRunningByType :one
-- From idx_lease's RUNNING range, covering (it carries job_type).
SELECT COUNT(*) FROM job_queue FORCE INDEX (idx_lease)
WHERE index_status = 'RUNNING' AND job_type = ?;

-- name: TypeProbe :many
-- The non-locking probe before a limited claim, one row (none when the type
-- has no control row): whether it is paused, its RUNNING jobs (counted on
-- idx_lease's RUNNING range only when it has a concurrency limit), its starts in the
-- rate window and when that window next opens — the oldest start in it
-- plus the period, in microseconds from NOW(6) (idx_rate_window, only when
-- it has a per-type rate limit) — whether it has keys with HELD jobs and
-- when the first of their windows opens (rate_hold, per-key limits), and
-- whether a due WAITING job exists. A type at its limit costs one cheap
-- read per scan and takes no lock.
SELECT c.paused, c.max_running, c.rate_starts, c.rate_per_key,
       CAST(IF(c.max_running > 0,
            (SELECT COUNT(*) FROM job_queue AS r FORCE INDEX (idx_lease) WHERE r.index_status = 'RUNNING' AND r.job_type = c.job_type), 0) AS SIGNED) AS running,
       CAST(IF(c.rate_starts > 0 AND c.rate_per_key = 0,
            (SELECT COUNT(*) FROM rate_start AS s
             WHERE s.job_type = c.job_type AND s.started_at > NOW(6) - INTERVAL c.rate_period_us MICROSECOND), 0) AS SIGNED) AS window_starts,
       CAST(IF(c.rate_starts > 0 AND c.rate_per_key = 0,
            COALESCE(TIMESTAMPDIFF(MICROSECOND, NOW(6),
              (SELECT MIN(s.started_at) FROM rate_start AS s
               WHERE s.job_type = c.job_type AND s.started_at > NOW(6) - INTERVAL c.rate_period_us MICROSECOND)
              + INTERVAL c.rate_period_us MICROSECOND), 0), 0) AS SIGNED) AS opens_in_us,
       EXISTS (SELECT 1 FROM rate_hold AS h WHERE h.job_type = c.job_type) AS has_held,
       CAST(COALESCE(TIMESTAMPDIFF(MICROSECOND, NOW(6),
            (SELECT MIN(h.opens_at) FROM rate_hold AS h WHERE h.job_type = c.job_type)), 0) AS SIGNED) AS held_opens_in_us,
       EXISTS (SELECT 1 FROM job_queue AS w WHERE w.job_type = c.job_type AND w.status = 'WAITING' AND w.scan_status = 'WAITING' AND w.type_status = 'WAITING' AND w.lane = sqlc.arg(lane) AND w.run_at <= NOW(6)) AS has_due
FROM job_type_control AS c
WHERE c.job_type = sqlc.arg(job_type);

-- name: JobLockAvailableByType :many
-- The read half of the limited claim, under the type's control row lock, on
-- servers without SKIP LOCKED. It, its three siblings and TypeProbe's
-- has_due name status, scan_status and type_status (migrations 018, 021):
-- idx_scan is on scan_status and idx_type_status on type_status (RUNNING
-- read as WAITING), and MariaDB uses an index on a virtual column only for
-- a query that names it, so the optimizer keeps both choices it had:
-- idx_type_status for a type with few WAITING jobs, idx_scan (no filesort)
-- for a large backlog; status tells the type's RUNNING jobs apart.
SELECT id FROM job_queue
WHERE job_type = sqlc.arg(job_type) AND status = 'WAITING' AND scan_status = 'WAITING' AND type_status = 'WAITING'
  AND lane = sqlc.arg(lane) AND run_at <= NOW(6)
ORDER BY priority DESC, run_at, id
LIMIT ?
FOR UPDATE;

-- name: JobLockAvailableByTypeSkipLocked :many
-- The read half of the limited claim where SKIP LOCKED exists: rows an
-- ordinary claim's scan has locked in passing are skipped, not waited for
-- (the control row lock already serialises the type's claimers). lane 1 is
-- a remote worker's fetch of a rate-limited type.
SELECT id FROM job_queue
WHERE job_type = sqlc.arg(job_type) AND status = 'WAITING' AND scan_status = 'WAITING' AND type_status = 'WAITING'
  AND lane = sqlc.arg(lane) AND run_at <= NOW(6)
ORDER BY priority DESC, run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: JobLockAvailableByTypeKeyed :many
-- JobLockAvailableByType for a per-key rate limit: with each job's rate key
-- ('' for none).
SELECT id, COALESCE(rate_key, '') AS rate_key FROM job_queue
WHERE job_type = sqlc.arg(job_type) AND status = 'WAITING' AND scan_status = 'WAITING' AND type_status = 'WAITING'
  AND lane = sqlc.arg(lane) AND run_at <= NOW(6)
ORDER BY priority DESC, run_at, id
LIMIT ?
FOR UPDATE;

-- name: JobLockAvailableByTypeKeyedSkipLocked :many
-- JobLockAvailableByTypeSkipLocked for a per-key rate limit: with each
-- job's rate key ('' for none).
SELECT id, COALESCE(rate_key, '') AS rate_key FROM job_queue
WHERE job_type = sqlc.arg(job_type) AND status = 'WAITING' AND scan_status = 'WAITING' AND type_status = 'WAITING'
  AND lane = sqlc.arg(lane) AND run_at <= NOW(6)
ORDER BY priority DESC, run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: PeriodicUpsert :execrows
-- Creates or replaces a schedule. The cursor (next_run_at) is kept when the
-- cron expression is unchanged, so a restart never forgets missed instants;
-- a new expression starts from sqlc.arg(next_run_at). next_run_at is assigned
-- first because MySQL applies ON DUPLICATE KEY UPDATE assignments in order.
INSERT INTO periodic_job (
    name, cron_expr, job_type, params, priority, max_retry, timeout_ms,
    misfire, source, next_run_at, create_time, update_time, workflow
) VALUES (
    sqlc.arg(name), sqlc.arg(cron_expr), sqlc.arg(job_type), sqlc.arg(params),
    sqlc.arg(priority), sqlc.arg(max_retry), sqlc.arg(timeout_ms),
    sqlc.arg(misfire), sqlc.arg(source), sqlc.arg(next_run_at), NOW(6), NOW(6), sqlc.arg(workflow)
)
ON DUPLICATE KEY UPDATE
    next_run_at = IF(cron_expr = sqlc.arg(cron_expr), next_run_at, sqlc.arg(next_run_at)),
    cron_expr = sqlc.arg(cron_expr),
    job_type = sqlc.arg(job_type),
    params = sqlc.arg(params),
    priority = sqlc.arg(priority),
    max_retry = sqlc.arg(max_retry),
    timeout_ms = sqlc.arg(timeout_ms),
    misfire = sqlc.arg(misfire),
    source = sqlc.arg(source),
    workflow = sqlc.arg(workflow),
    update_time = NOW(6);

-- name: PeriodicGet :one
SELECT * FROM periodic_job WHERE name = ?;

-- name: PeriodicList :many
SELECT * FROM periodic_job ORDER BY name;

-- name: PeriodicLock :one
SELECT * FROM periodic_job WHERE name = ? FOR UPDATE;

-- name: PeriodicLockSkipLocked :many
-- PeriodicLock where SKIP LOCKED exists: no row when another session holds
-- the schedule's lock, so a fire never waits on a stuck peer (see
-- store.PeriodicFire).
SELECT * FROM periodic_job WHERE name = ? FOR UPDATE SKIP LOCKED;

-- name: PeriodicDelete :execrows
DELETE FROM periodic_job WHERE name = ?;

-- name: PeriodicAdvance :exec
UPDATE periodic_job
SET next_run_at = sqlc.arg(next_run_at),
    last_run_at = COALESCE(sqlc.narg(last_run_at), last_run_at),
    update_time = NOW(6)
WHERE name = sqlc.arg(name);

-- name: JobInsertPeriodic :execrows
-- One job per scheduled instant: job_key '<name>@<instant>' is UNIQUE, so a
-- second insert of the same instant changes nothing (0 rows). An instant
-- still ahead of the database clock is SCHEDULED, as any future submit.
INSERT INTO job_queue (
    job_key, job_type, params, request_hash, status, priority, max_retry,
    timeout_ms, run_at, create_time, update_time, lane
) VALUES (
    sqlc.arg(job_key), sqlc.arg(job_type), sqlc.arg(params), sqlc.arg(request_hash),
    IF(sqlc.arg(run_at) > NOW(6), 'SCHEDULED', 'WAITING'), sqlc.arg(priority), sqlc.arg(max_retry), sqlc.arg(timeout_ms),
    sqlc.arg(run_at), NOW(6), NOW(6), sqlc.arg(lane)
)
ON DUPLICATE KEY UPDATE id = id;

-- name: JobRetentionWalk :many
-- The cleaner walks job_queue by primary key from the oldest id; ids grow
-- with create_time, so the walk stops at the first row created after the
-- cutoff and never reads the young part of the table.
SELECT id, status, finished_at, create_time FROM job_queue
WHERE id > sqlc.arg(after_id)
ORDER BY id
LIMIT ?;

-- name: JobRetentionLock :many
-- Re-checks and locks, in the delete transaction, the rows still terminal and
-- finished before the cutoff (a manual retry may have revived one).
SELECT id FROM job_queue
WHERE id IN (sqlc.slice(ids))
  AND status IN ('SUCCESS', 'FAILED', 'CANCELED')
  AND finished_at < sqlc.arg(cutoff)
FOR UPDATE;

-- name: ExecutionDeleteByJobs :execrows
DELETE FROM job_execution WHERE job_id IN (sqlc.slice(ids));

-- name: JobDeleteMany :execrows
DELETE FROM job_queue WHERE id IN (sqlc.slice(ids));

-- name: JobIDsByTypeStatus :many
SELECT id FROM job_queue
WHERE job_type = sqlc.arg(job_type) AND type_status = sqlc.arg(type_status) AND status = sqlc.arg(status)
  AND id > sqlc.arg(after_id)
ORDER BY id
LIMIT ?;

-- name: JobIDsByStatus :many
SELECT id FROM job_queue
WHERE index_status = sqlc.arg(index_status) AND status = sqlc.arg(status) AND id > sqlc.arg(after_id)
ORDER BY id
LIMIT ?;

-- name: JobRetryMany :execrows
-- Bulk manual retry: FAILED or CANCELED back to WAITING, due now, with a fresh
-- retry budget (as JobRetryManual, for many ids: a keyed job to PARKED).
UPDATE job_queue
SET status = IF(concurrency_key IS NULL, 'WAITING', 'PARKED'), retry_times = 0, cancel_requested = 0,
    run_at = NOW(6), finished_at = NULL, lease_until = NULL,
    update_time = NOW(6)
WHERE id IN (sqlc.slice(ids)) AND status = sqlc.arg(status);

-- name: StatsCountByTypeStatus :many
-- Jobs by type and type_status (a full pass over idx_type_status, which
-- covers it): RUNNING jobs are counted as WAITING here, and
-- StatsCountRunningByType counts them apart.
SELECT job_type, type_status AS status, COUNT(*) AS n FROM job_queue
GROUP BY job_type, type_status
ORDER BY job_type, type_status;

-- name: StatsCountRunningByType :many
-- RUNNING jobs by type, from idx_lease's RUNNING range (covering).
SELECT job_type, COUNT(*) AS n FROM job_queue FORCE INDEX (idx_lease)
WHERE index_status = 'RUNNING'
GROUP BY job_type
ORDER BY job_type;

-- name: StatsWaitingGroupNext :one
-- The oldest WAITING job of the (lane, priority) group that follows the given
-- one in idx_scan order (lane ascending, priority descending), or of the first
-- group when lane is NULL: its group and its age in microseconds by the
-- database clock (negative while its run_at is ahead). One index dive: the
-- range starts right after the given group and the first entry of a group is
-- its oldest (run_at follows priority in idx_scan). Walking every group this
-- way (store.OldestWaitingAge) finds the oldest WAITING job in dives per group,
-- not per job: idx_scan has a descending key part, so MariaDB does no loose
-- index scan (GROUP BY lane, priority) on it.
SELECT lane, priority, CAST(TIMESTAMPDIFF(MICROSECOND, run_at, NOW(6)) AS SIGNED) AS age_us
FROM job_queue FORCE INDEX (idx_scan)
WHERE scan_status = 'WAITING'
  AND (sqlc.narg(lane) IS NULL OR lane > sqlc.narg(lane) OR (lane = sqlc.narg(lane) AND priority < sqlc.arg(priority)))
ORDER BY lane, priority DESC, run_at
LIMIT 1;

-- name: StatsMaxIDs :one
SELECT CAST(COALESCE((SELECT MAX(id) FROM job_queue), 0) AS UNSIGNED) AS max_job_id,
       CAST(COALESCE((SELECT MAX(id) FROM job_execution), 0) AS UNSIGNED) AS max_execution_id;

-- name: StatsRecentOutcomes :many
-- Attempts finished within the window, among executions with id > min_id.
SELECT COALESCE(outcome, '') AS outcome, COUNT(*) AS n FROM job_execution
WHERE id > sqlc.arg(min_id)
  AND finished_at >= NOW(6) - INTERVAL sqlc.arg(window_us) MICROSECOND
GROUP BY outcome
ORDER BY outcome;

-- name: StatsRecentSucceeded :one
-- Attempts finished SUCCESS within the window whose record is their job row
-- (a batched success writes no execution row), among jobs with id > min_id.
SELECT COUNT(*) FROM job_queue AS q
WHERE q.id > sqlc.arg(min_id) AND q.status = 'SUCCESS' AND q.attempt > 0
  AND q.finished_at >= NOW(6) - INTERVAL sqlc.arg(window_us) MICROSECOND
  AND NOT EXISTS (SELECT 1 FROM job_execution AS x WHERE x.job_id = q.id AND x.attempt = q.attempt);

-- name: StatsRecentCreated :one
-- Jobs created within the window, among jobs with id > min_id.
SELECT COUNT(*) FROM job_queue
WHERE id > sqlc.arg(min_id)
  AND create_time >= NOW(6) - INTERVAL sqlc.arg(window_us) MICROSECOND;
