-- Batched success completion: the completer's fast path (store.JobCompleteMany).
-- Each row is still fenced by its own attempt: fences lists "id:attempt" of
-- every run in the batch, comma-separated (FIND_IN_SET), and a row matches
-- only when it is still RUNNING with the listed attempt. The id list reaches
-- the rows through the primary key. When fewer rows match than runs were
-- sent, some run was stale: the caller rolls the transaction back and
-- completes that batch row by row (JobCompleteFenced), so stale runs are
-- told apart exactly as before.

-- name: JobCompleteFencedMany :execrows
UPDATE job_queue
SET status = IF(cancel_requested = 1, 'CANCELED', 'SUCCESS'),
    lease_until = NULL,
    finished_at = NOW(6),
    update_time = NOW(6)
WHERE id IN (sqlc.slice(ids)) AND status = 'RUNNING'
  AND FIND_IN_SET(CONCAT(id, ':', attempt), CAST(sqlc.arg(fences) AS CHAR)) > 0;

-- name: ExecutionFinishSuccessMany :execrows
-- Closes the execution rows of the runs JobCompleteFencedMany completed:
-- SUCCESS, or CANCELED for a job that ended CANCELED (see ExecutionFinish).
UPDATE job_execution
SET finished_at = NOW(6),
    outcome = IF((SELECT q.status FROM job_queue AS q WHERE q.id = job_execution.job_id) = 'CANCELED', 'CANCELED', 'SUCCESS'),
    error = NULL
WHERE job_id IN (sqlc.slice(ids)) AND finished_at IS NULL
  AND FIND_IN_SET(CONCAT(job_id, ':', attempt), CAST(sqlc.arg(fences) AS CHAR)) > 0;
