-- Batched success completion: the completer's fast path (store.JobCompleteMany):
-- JobCompleteFencedMany then ExecutionRecordSuccessMany, one statement per
-- table for the whole batch.
-- Each row is still fenced by its own attempt: fences lists "id:attempt" of
-- every run in the batch, comma-separated (FIND_IN_SET), and a row matches
-- only when it is still RUNNING with the listed attempt. The id list reaches
-- the rows through the primary key. When fewer rows match than runs were
-- sent, some run was stale: the caller rolls the transaction back and
-- completes that batch row by row (JobCompleteFenced), so stale runs are
-- told apart exactly as before.

-- name: JobCompleteFencedMany :execrows
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = IF(cancel_requested = 1, 'CANCELED', 'SUCCESS'),
    lease_until = NULL,
    finished_at = NOW(6),
    update_time = NOW(6)
WHERE id IN (sqlc.slice(ids)) AND status = 'RUNNING'
  AND FIND_IN_SET(CONCAT(id, ':', attempt), CAST(sqlc.arg(fences) AS CHAR)) > 0;

-- name: ExecutionRecordSuccessMany :execrows
-- Writes the execution rows of the runs JobCompleteFencedMany just completed
-- in this transaction (the only write of job_execution per attempt), from
-- the claimed job rows, which the update holds; it runs only when the
-- update matched every run, so id:attempt picks exactly those rows. A job
-- whose cancel was requested ended CANCELED, and so does its attempt's row:
-- the audit trail says what the job row says.
INSERT INTO job_execution (job_id, attempt, owner, started_at, due_at, finished_at, outcome, error)
SELECT q.id, q.attempt, COALESCE(q.owner, ''), COALESCE(q.started_at, NOW(6)), q.run_at,
       NOW(6), IF(q.cancel_requested = 1, 'CANCELED', 'SUCCESS'), NULL
FROM job_queue AS q FORCE INDEX (PRIMARY)
WHERE q.id IN (sqlc.slice(ids))
  AND FIND_IN_SET(CONCAT(q.id, ':', q.attempt), CAST(sqlc.arg(fences) AS CHAR)) > 0;
