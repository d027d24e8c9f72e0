-- Statements of the web console's overview (package console). Each reads
-- only the newest rows by primary key (id > min_id), so its cost does not
-- grow with the table.

-- name: ActivityStarted :many
-- Per minute of the last `minutes` (0 = the minute ending now), attempts
-- started and their pickup latency in microseconds: average and maximum.
-- Pickup is measured from when the job was due and submitted, started_at −
-- GREATEST(due_at, create_time): due_at is the job's run_at at the claim,
-- which a submit may set in the past (due at once) — started_at − due_at
-- alone then counted the days before the submit. A purged job's attempt
-- (no job row) counts from due_at.
SELECT CAST(TIMESTAMPDIFF(MINUTE, e.started_at, NOW(6)) AS SIGNED) AS minutes_ago,
       COUNT(*) AS started,
       CAST(COALESCE(AVG(GREATEST(TIMESTAMPDIFF(MICROSECOND, GREATEST(e.due_at, COALESCE(q.create_time, e.due_at)), e.started_at), 0)), 0) AS SIGNED) AS pickup_avg_us,
       CAST(COALESCE(MAX(GREATEST(TIMESTAMPDIFF(MICROSECOND, GREATEST(e.due_at, COALESCE(q.create_time, e.due_at)), e.started_at), 0)), 0) AS SIGNED) AS pickup_max_us
FROM job_execution AS e
LEFT JOIN job_queue AS q ON q.id = e.job_id
WHERE e.id > sqlc.arg(min_id) AND e.started_at >= NOW(6) - INTERVAL sqlc.arg(minutes) MINUTE
GROUP BY minutes_ago
ORDER BY minutes_ago;

-- name: ActivityFinished :many
-- Per minute of the last `minutes`, attempts finished by outcome.
SELECT CAST(TIMESTAMPDIFF(MINUTE, finished_at, NOW(6)) AS SIGNED) AS minutes_ago,
       COALESCE(outcome, '') AS outcome, COUNT(*) AS n
FROM job_execution
WHERE id > sqlc.arg(min_id) AND finished_at >= NOW(6) - INTERVAL sqlc.arg(minutes) MINUTE
GROUP BY minutes_ago, outcome
ORDER BY minutes_ago, outcome;

-- name: ActivityOwners :many
-- Replicas (owners) that started attempts in the last `minutes`: how many,
-- and the latest start and finish (the latest start when none finished).
SELECT owner, COUNT(*) AS attempts,
       CAST(MAX(started_at) AS DATETIME(6)) AS last_started,
       CAST(COALESCE(MAX(finished_at), MAX(started_at)) AS DATETIME(6)) AS last_finished
FROM job_execution
WHERE id > sqlc.arg(min_id) AND started_at >= NOW(6) - INTERVAL sqlc.arg(minutes) MINUTE
GROUP BY owner
ORDER BY owner;

-- name: ActivityStartedSucceeded :many
-- ActivityStarted for the attempts whose record is their job row (a batched
-- success writes no execution row, see ExecutionRecordKeptMany), among
-- the newest jobs (id > min_id): same columns, merged by the caller.
SELECT CAST(TIMESTAMPDIFF(MINUTE, q.started_at, NOW(6)) AS SIGNED) AS minutes_ago,
       COUNT(*) AS started,
       CAST(COALESCE(AVG(GREATEST(TIMESTAMPDIFF(MICROSECOND, GREATEST(q.run_at, q.create_time), q.started_at), 0)), 0) AS SIGNED) AS pickup_avg_us,
       CAST(COALESCE(MAX(GREATEST(TIMESTAMPDIFF(MICROSECOND, GREATEST(q.run_at, q.create_time), q.started_at), 0)), 0) AS SIGNED) AS pickup_max_us
FROM job_queue AS q
WHERE q.id > sqlc.arg(min_id) AND q.status = 'SUCCESS' AND q.attempt > 0
  AND q.started_at >= NOW(6) - INTERVAL sqlc.arg(minutes) MINUTE
  AND NOT EXISTS (SELECT 1 FROM job_execution AS x WHERE x.job_id = q.id AND x.attempt = q.attempt)
GROUP BY minutes_ago
ORDER BY minutes_ago;

-- name: ActivityFinishedSucceeded :many
-- ActivityFinished's SUCCESS count for the attempts whose record is their
-- job row, among the newest jobs (id > min_id).
SELECT CAST(TIMESTAMPDIFF(MINUTE, q.finished_at, NOW(6)) AS SIGNED) AS minutes_ago, COUNT(*) AS n
FROM job_queue AS q
WHERE q.id > sqlc.arg(min_id) AND q.status = 'SUCCESS' AND q.attempt > 0
  AND q.finished_at >= NOW(6) - INTERVAL sqlc.arg(minutes) MINUTE
  AND NOT EXISTS (SELECT 1 FROM job_execution AS x WHERE x.job_id = q.id AND x.attempt = q.attempt)
GROUP BY minutes_ago
ORDER BY minutes_ago;

-- name: ActivityOwnersSucceeded :many
-- ActivityOwners for the attempts whose record is their job row, among the
-- newest jobs (id > min_id).
SELECT COALESCE(q.owner, '') AS owner, COUNT(*) AS attempts,
       CAST(MAX(q.started_at) AS DATETIME(6)) AS last_started,
       CAST(COALESCE(MAX(q.finished_at), MAX(q.started_at)) AS DATETIME(6)) AS last_finished
FROM job_queue AS q
WHERE q.id > sqlc.arg(min_id) AND q.status = 'SUCCESS' AND q.attempt > 0
  AND q.started_at >= NOW(6) - INTERVAL sqlc.arg(minutes) MINUTE
  AND NOT EXISTS (SELECT 1 FROM job_execution AS x WHERE x.job_id = q.id AND x.attempt = q.attempt)
GROUP BY owner
ORDER BY owner;

-- name: ActivityRunningOwners :many
-- Replicas holding RUNNING jobs now (idx_lease): how many, and the latest
-- lease end (every heartbeat renews all of a replica's leases at once, so
-- lease_until − lease is its last heartbeat).
SELECT COALESCE(owner, '') AS owner, COUNT(*) AS running,
       CAST(MAX(lease_until) AS DATETIME(6)) AS lease_until
FROM job_queue
WHERE index_status = 'RUNNING' AND status = 'RUNNING'
GROUP BY owner
ORDER BY owner;
