-- Workflows (store/workflow.go, docs/workflows.md). The multi-row inserts of
-- a workflow's jobs and edges are built in store/workflow.go: sqlc cannot
-- express a VALUES list of variable length.

-- name: WorkflowInsert :execlastid
INSERT INTO workflow (workflow_key, request_hash, create_time)
VALUES (sqlc.arg(workflow_key), sqlc.arg(request_hash), NOW(6));

-- name: WorkflowGetByKey :one
SELECT * FROM workflow WHERE workflow_key = ?;

-- name: WorkflowGetByID :one
SELECT * FROM workflow WHERE id = ?;

-- name: WorkflowList :many
-- Newest first, keyset-paged by id, with each workflow's job counts by state
-- (idx_workflow).
SELECT w.id, w.workflow_key, w.create_time,
       CAST(COUNT(q.id) AS SIGNED) AS jobs,
       CAST(COALESCE(SUM(q.status = 'SUCCESS'), 0) AS SIGNED) AS succeeded,
       CAST(COALESCE(SUM(q.status = 'FAILED'), 0) AS SIGNED) AS failed,
       CAST(COALESCE(SUM(q.status = 'CANCELED'), 0) AS SIGNED) AS canceled,
       CAST(COALESCE(SUM(q.status = 'RUNNING'), 0) AS SIGNED) AS running
FROM workflow AS w LEFT JOIN job_queue AS q ON q.workflow_id = w.id
WHERE w.id < sqlc.arg(before_id)
GROUP BY w.id, w.workflow_key, w.create_time
ORDER BY w.id DESC
LIMIT ?;

-- name: WorkflowJobs :many
SELECT * FROM job_queue WHERE workflow_id = ? ORDER BY id;

-- name: WorkflowJobKeys :many
-- The ids a workflow submit just inserted, by job_key (idx_workflow).
SELECT id, job_key FROM job_queue WHERE workflow_id = ?;

-- name: WorkflowEdges :many
SELECT d.parent_id, d.child_id, d.on_parent_failure
FROM job_queue AS q JOIN job_dependency AS d ON d.child_id = q.id
WHERE q.workflow_id = ?
ORDER BY d.child_id, d.parent_id;

-- name: WorkflowLockJobs :many
-- A workflow retry's first statement: every job of the workflow, locked.
SELECT id, status FROM job_queue WHERE workflow_id = ? ORDER BY id FOR UPDATE;

-- name: WorkflowCancelIdle :execrows
-- Cancels every job of a workflow no replica holds.
UPDATE job_queue
SET status = 'CANCELED', cancel_requested = 1, blocked_parents = 0,
    finished_at = NOW(6), update_time = NOW(6)
WHERE workflow_id = ? AND status IN ('BLOCKED', 'WAITING', 'SCHEDULED');

-- name: WorkflowCancelRunning :execrows
UPDATE job_queue SET cancel_requested = 1, update_time = NOW(6)
WHERE workflow_id = ? AND status = 'RUNNING';

-- name: DependencyChildCounts :many
-- For parents that just ended in a way that lets their children run: how
-- many of them each child waits for (the decrement of its counter).
SELECT child_id, CAST(COUNT(*) AS SIGNED) AS n FROM job_dependency
WHERE parent_id IN (sqlc.slice(parent_ids))
GROUP BY child_id;

-- name: DependencyEdgesFrom :many
-- The edges from these parents: a batch of parents' first read (their
-- children, and the width of the unblock each one's success writes), and
-- the children a failed or cancelled parent settles.
SELECT parent_id, child_id, on_parent_failure FROM job_dependency
WHERE parent_id IN (sqlc.slice(parent_ids));

-- name: DependencyParentsOf :many
-- The parents of jobs, with their status and the output of their current
-- attempt (a SUCCESS job's output).
SELECT d.child_id, d.parent_id, d.on_parent_failure, p.job_key, p.status, e.output
FROM job_dependency AS d
JOIN job_queue AS p ON p.id = d.parent_id
LEFT JOIN job_execution AS e ON e.job_id = p.id AND e.attempt = p.attempt
WHERE d.child_id IN (sqlc.slice(child_ids))
ORDER BY d.child_id, d.parent_id;

-- name: JobUnblock :execrows
-- Decrements by n the counters of BLOCKED children (by primary key): a child
-- whose counter reaches 0 becomes WAITING (SCHEDULED while its run_at is
-- ahead), due now at the latest. It runs in the transaction of the parents'
-- fenced completion, which holds the parents' rows, and locks each child row:
-- two parents ending at once on two replicas decrement one after the other,
-- so exactly one of them sees the counter reach 0. Assignments read only
-- columns not assigned before them (blocked_parents last), so the result is
-- the same with or without SIMULTANEOUS_ASSIGNMENT.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = IF(blocked_parents <= sqlc.arg(n), IF(run_at > NOW(6), 'SCHEDULED', 'WAITING'), status),
    run_at = IF(blocked_parents <= sqlc.arg(n), GREATEST(run_at, NOW(6)), run_at),
    update_time = NOW(6),
    blocked_parents = blocked_parents - sqlc.arg(n)
WHERE id IN (sqlc.slice(ids)) AND status = 'BLOCKED';

-- name: JobLockBlocked :many
SELECT id FROM job_queue FORCE INDEX (PRIMARY)
WHERE id IN (sqlc.slice(ids)) AND status = 'BLOCKED'
FOR UPDATE;

-- name: JobCancelBlocked :execrows
-- A parent ended FAILED or CANCELED: its BLOCKED children (on 'cancel'
-- edges) end CANCELED.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = 'CANCELED', blocked_parents = 0, last_error = sqlc.arg(last_error),
    finished_at = NOW(6), update_time = NOW(6)
WHERE id IN (sqlc.slice(ids)) AND status = 'BLOCKED';

-- name: JobEndState :one
-- A completed job's status, has_children and concurrency_key, read in its
-- completion's transaction (which holds the row).
SELECT status, has_children, concurrency_key FROM job_queue FORCE INDEX (PRIMARY) WHERE id = ?;

-- name: JobRearm :execrows
-- A workflow retry: a FAILED or CANCELED job back to WAITING (no parent
-- left to wait for) or BLOCKED (waiting for blocked_parents parents), with
-- a fresh retry budget.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = IF(sqlc.arg(blocked) > 0, 'BLOCKED', 'WAITING'), blocked_parents = sqlc.arg(blocked),
    retry_times = 0, cancel_requested = 0, run_at = NOW(6), finished_at = NULL, lease_until = NULL,
    update_time = NOW(6)
WHERE id = sqlc.arg(id) AND status IN ('FAILED', 'CANCELED');

-- name: DependencyDeleteByJobs :execrows
-- Retention: the edges of purged jobs (either end), by idx_child and the
-- primary key's parent prefix.
DELETE FROM job_dependency WHERE child_id IN (sqlc.slice(ids)) OR parent_id IN (sqlc.slice(ids));

-- name: JobReblock :execrows
-- A job a manual retry made WAITING whose parents have not all succeeded:
-- back to BLOCKED, waiting for blocked parents.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = 'BLOCKED', blocked_parents = sqlc.arg(blocked), update_time = NOW(6)
WHERE id = sqlc.arg(id) AND status = 'WAITING';

-- name: WorkflowOutputs :many
-- The outputs of a workflow's SUCCESS jobs: each one's successful attempt's
-- (idx_workflow, then uk_job_attempt).
SELECT e.job_id, e.output FROM job_queue AS q
JOIN job_execution AS e ON e.job_id = q.id AND e.attempt = q.attempt
WHERE q.workflow_id = ? AND q.status = 'SUCCESS' AND e.output IS NOT NULL;
