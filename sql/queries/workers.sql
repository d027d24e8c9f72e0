-- Remote workers (docs/workers.md): the fetch claim, task-token reads, the
-- attempt's log and progress, and what the console shows of workers. The
-- heartbeat's renewal (one UPDATE fenced per row by its own attempt) is
-- built in store/workers.go: sqlc cannot express its CASE of variable length.

-- name: JobLockRemote :many
-- The read half of a worker's fetch: locks up to LIMIT due lane-1 (remote)
-- jobs of the given job types that no other transaction holds, in
-- idx_scan order (status, lane, priority DESC, run_at, id: no filesort; the
-- job_type filter is read from the index). The caller leaves paused types
-- out of types (TypesHeld): a constant list the index applies before a
-- row is locked, where a subquery would be applied after, locking every
-- row of a paused backlog it steps past.
SELECT q.id, q.job_key, q.job_type, q.params, q.priority, q.retry_times, q.max_retry, q.timeout_ms,
       q.run_at, q.attempt, q.create_time, q.has_children, q.workflow_id, q.concurrency_key
FROM job_queue AS q
WHERE q.scan_status = 'WAITING' AND q.lane = 1 AND q.run_at <= NOW(6)
  AND q.job_type IN (sqlc.slice(types))
ORDER BY q.priority DESC, q.run_at, q.id
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: JobClaimRemote :execrows
-- The write half of a worker's fetch, on the rows JobLockRemote locked: a
-- claim exactly like a replica's (JobClaimMany), owner 'worker:<id>', plus
-- the claim's lease nonce, the secret its task tokens derive from.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = 'RUNNING',
    attempt = attempt + 1,
    owner = sqlc.arg(owner),
    lease_until = NOW(6) + INTERVAL sqlc.arg(lease_us) MICROSECOND,
    started_at = NOW(6),
    finished_at = NULL,
    lease_nonce = sqlc.arg(lease_nonce),
    update_time = NOW(6)
WHERE id IN (sqlc.slice(ids)) AND status = 'WAITING';

-- name: JobClaimedLease :one
-- started_at and lease_until JobClaimRemote wrote (one NOW(6) for every row
-- of the claim), read back by primary key after its COMMIT.
SELECT started_at, lease_until FROM job_queue WHERE id = ?;

-- name: JobTokenStates :many
-- What a task token is checked against: the job's run (attempt, status),
-- the claim's nonce and what a completion needs (retry budget, due time,
-- the workflow a spawn goes to);
-- run_us is how long the run has been going on the database clock (its
-- timeout_ms is enforced against it).
SELECT id, job_type, attempt, status, lease_nonce, cancel_requested, retry_times, max_retry,
       run_at, lease_until, owner, has_children, concurrency_key, timeout_ms, workflow_id,
       CAST(COALESCE(TIMESTAMPDIFF(MICROSECOND, started_at, NOW(6)), 0) AS SIGNED) AS run_us
FROM job_queue FORCE INDEX (PRIMARY)
WHERE id IN (sqlc.slice(ids));

-- name: JobTokenStateLocked :one
-- JobTokenStates for one job, share-locked for the rest of the transaction
-- (a log append or progress report): the run cannot end while it writes.
SELECT id, job_type, attempt, status, lease_nonce
FROM job_queue FORCE INDEX (PRIMARY)
WHERE id = ?
LOCK IN SHARE MODE;

-- name: RunInfoEnsure :exec
INSERT INTO job_run_info (job_id, attempt, update_time)
VALUES (sqlc.arg(job_id), sqlc.arg(attempt), NOW(6))
ON DUPLICATE KEY UPDATE job_id = job_id;

-- name: RunInfoLock :one
SELECT log_bytes, log_lines FROM job_run_info
WHERE job_id = sqlc.arg(job_id) AND attempt = sqlc.arg(attempt)
FOR UPDATE;

-- name: RunInfoAddLog :exec
UPDATE job_run_info
SET log_bytes = log_bytes + sqlc.arg(byte_count), log_lines = log_lines + sqlc.arg(line_count), update_time = NOW(6)
WHERE job_id = sqlc.arg(job_id) AND attempt = sqlc.arg(attempt);

-- name: RunInfoSetProgress :exec
INSERT INTO job_run_info (job_id, attempt, progress, progress_message, update_time)
VALUES (sqlc.arg(job_id), sqlc.arg(attempt), sqlc.arg(progress), sqlc.narg(progress_message), NOW(6))
ON DUPLICATE KEY UPDATE progress = VALUES(progress), progress_message = VALUES(progress_message), update_time = NOW(6);

-- name: RunInfoByJob :many
SELECT * FROM job_run_info WHERE job_id = ? ORDER BY attempt;

-- name: JobLogList :many
-- One page of an attempt's log, after line seq after_seq.
SELECT seq, line, created_at FROM job_log
WHERE job_id = sqlc.arg(job_id) AND attempt = sqlc.arg(attempt) AND seq > sqlc.arg(after_seq)
ORDER BY seq
LIMIT ?;

-- name: JobLogLastAttempt :one
-- The latest attempt of a job that has log lines (0 when none).
SELECT CAST(COALESCE(MAX(attempt), 0) AS SIGNED) AS attempt FROM job_run_info WHERE job_id = ?;

-- name: JobLogDeleteByJobs :execrows
DELETE FROM job_log WHERE job_id IN (sqlc.slice(ids));

-- name: RunInfoDeleteByJobs :execrows
DELETE FROM job_run_info WHERE job_id IN (sqlc.slice(ids));

-- name: ExecutionOutput :one
-- The output of one attempt (the job's output is its successful attempt's).
SELECT output FROM job_execution WHERE job_id = sqlc.arg(job_id) AND attempt = sqlc.arg(attempt);

-- name: WorkerRunsInFlight :many
-- Runs in flight per worker, across replicas: RUNNING rows owned by a
-- worker (idx_lease bounds the read to RUNNING rows).
SELECT owner, COUNT(*) AS runs FROM job_queue FORCE INDEX (idx_lease)
WHERE index_status = 'RUNNING' AND status = 'RUNNING' AND owner LIKE 'worker:%'
GROUP BY owner;

-- name: JobLaneReconcile :execrows
-- At start: jobs of a type declared remote that were submitted before it was
-- (lane 0) and have not started move to lane 1, so no replica claims them.
UPDATE job_queue
SET lane = 1
WHERE job_type IN (sqlc.slice(types)) AND lane = 0 AND type_status IN ('WAITING', 'SCHEDULED')
  AND status IN ('WAITING', 'SCHEDULED');

-- name: TypesHeld :many
-- The paused and the limited (a concurrency or a rate limit) job types among
-- types (JobClaimRemote's first, non-locking read): the fetch's locking read
-- leaves them all out, and a limited one is claimed by the limited claim
-- instead, as a replica claims it.
SELECT job_type, paused, max_running, rate_starts FROM job_type_control
WHERE (paused = 1 OR max_running > 0 OR rate_starts > 0) AND job_type IN (sqlc.slice(types));
