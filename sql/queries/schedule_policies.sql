-- Schedule policies: the fire ledger (periodic_fire), the overlap policy of
-- periodic schedules (migration 012).
-- All times come from the database clock (NOW(6)).

-- name: FireRecord :exec
-- Records an instant the fire created a job or workflow for. The instant's
-- job was inserted by this transaction (its key was new), so the row is the
-- truth: it replaces a 'skipped' row a concurrent unlocked fire wrote.
INSERT INTO periodic_fire (name, instant, fate, reason, job_id, workflow_id, late_ms, covers, record_time)
VALUES (sqlc.arg(name), sqlc.arg(instant), sqlc.arg(fate), NULL, sqlc.narg(job_id), sqlc.narg(workflow_id),
        sqlc.arg(late_ms), 1, NOW(6))
ON DUPLICATE KEY UPDATE fate = sqlc.arg(fate), reason = NULL, job_id = sqlc.narg(job_id),
    workflow_id = sqlc.narg(workflow_id), late_ms = sqlc.arg(late_ms), covers = 1, record_time = NOW(6);

-- name: FireRecordSkipped :exec
-- Records an instant skipped by the misfire or overlap policy; an instant
-- already in the ledger keeps its row.
INSERT INTO periodic_fire (name, instant, fate, reason, job_id, workflow_id, late_ms, covers, record_time)
VALUES (sqlc.arg(name), sqlc.arg(instant), 'skipped', sqlc.arg(reason), NULL, NULL, sqlc.arg(late_ms),
        sqlc.arg(covers), NOW(6))
ON DUPLICATE KEY UPDATE name = name;

-- name: FireHistory :many
-- One page of a schedule's ledger, newest instant first, before a cursor.
SELECT * FROM periodic_fire
WHERE name = sqlc.arg(name) AND instant < sqlc.arg(before)
ORDER BY instant DESC
LIMIT ?;

-- name: FireRange :many
-- A schedule's ledger in [from, to), oldest first (the checker).
SELECT * FROM periodic_fire
WHERE name = sqlc.arg(name) AND instant >= sqlc.arg(from_instant) AND instant < sqlc.arg(to_instant)
ORDER BY instant;

-- name: PeriodicSetOverlap :exec
UPDATE periodic_job SET overlap = sqlc.arg(overlap) WHERE name = sqlc.arg(name);

-- name: PeriodicSetRuns :exec
-- The schedule's active and queued run after a fire or a release.
UPDATE periodic_job
SET active_job_id = sqlc.narg(active_job_id), queued_job_id = sqlc.narg(queued_job_id)
WHERE name = sqlc.arg(name);

-- name: PeriodicQueuedNames :many
-- The schedules with a parked queue_one run whose active run ended (or is
-- gone): the ones a release has work for. periodic_job is a small table;
-- each active run is read by primary key, without a lock.
SELECT p.name FROM periodic_job p
LEFT JOIN job_queue j FORCE INDEX (PRIMARY) ON j.id = p.active_job_id
WHERE p.queued_job_id IS NOT NULL
  AND (j.id IS NULL OR j.status IN ('SUCCESS', 'FAILED', 'CANCELED'))
ORDER BY p.name;

-- name: JobRunState :one
-- A schedule's run's status and run_at, locked: the overlap policy decides
-- on it under the schedule's row lock.
SELECT status, run_at FROM job_queue FORCE INDEX (PRIMARY) WHERE id = ? FOR UPDATE;

-- name: JobInsertPeriodicRun :execresult
-- JobInsertPeriodic returning the new id: one job per scheduled instant
-- (job_key '<name>@<instant>' is UNIQUE; a second insert changes nothing).
-- A parked run (queue_one) is SCHEDULED at the far-future run_at it is given.
INSERT INTO job_queue (
    job_key, job_type, params, request_hash, status, priority, max_retry,
    timeout_ms, run_at, create_time, update_time, lane
) VALUES (
    sqlc.arg(job_key), sqlc.arg(job_type), sqlc.arg(params), sqlc.arg(request_hash),
    IF(sqlc.arg(run_at) > NOW(6), 'SCHEDULED', 'WAITING'), sqlc.arg(priority), sqlc.arg(max_retry), sqlc.arg(timeout_ms),
    sqlc.arg(run_at), NOW(6), NOW(6), sqlc.arg(lane)
)
ON DUPLICATE KEY UPDATE id = id;

-- name: JobReleaseParked :execrows
-- Starts a parked queue_one run: due now.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = 'WAITING', run_at = NOW(6), update_time = NOW(6)
WHERE id = ? AND status = 'SCHEDULED';
