-- Batched success completion: the completer's fast path (store.JobCompleteMany):
-- JobCompleteFencedMany, one statement for the whole batch, then
-- ExecutionRecordKeptMany for the runs a cancel request ended CANCELED and
-- the successes of old jobs (a recent SUCCESS's record is the job row).
-- Each row is still fenced by its own attempt: the caller groups the batch
-- by attempt and sends one JobCompleteFencedMany per attempt number (nearly
-- always one: a first attempt), so a row matches only when it is still
-- RUNNING with the attempt its run was claimed at. The ids reach the rows
-- through the primary key and the fence is one integer comparison per row.
-- (It was FIND_IN_SET over one "id:attempt,…" string, a scan of the string
-- per row — O(n²) for an n-run batch: BenchmarkCompleteMany ran at 0.30× of
-- BenchmarkCompleteRawSQL's rate at 2,000-run batches, 0.49× at 250.) When fewer rows match
-- than runs were sent, some run was stale: the caller rolls the transaction
-- back and writes the batch again split by the jobs' fence states
-- (JobFenceStates): the live runs batched, the others row by row
-- (JobCompleteFenced), so stale runs are told apart exactly as before.
-- has_children is part of the fence: the runs of jobs with workflow children
-- are sent in their own group (the claim told the scheduler), whose children
-- the caller then unblocks; a run sent in the wrong group does not match and
-- the split's read (JobFenceStates) puts it right. A run with children whose
-- cancel was requested does not match either (it ends CANCELED, which
-- cancels its children): the split writes it row by row, so every run of
-- the children group ended SUCCESS and its children are unblocked without
-- reading the rows back. Whether the job has a concurrency key is part of
-- the fence the same way: the keyed group's slots are freed by the caller
-- in this transaction (store/keys.go), and a run sent in the wrong group
-- costs a split, never a slot.

-- name: JobCompleteFencedMany :execrows
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = IF(cancel_requested = 1, 'CANCELED', 'SUCCESS'),
    lease_until = NULL,
    finished_at = NOW(6),
    update_time = NOW(6)
WHERE id IN (sqlc.slice(ids)) AND status = 'RUNNING'
  AND attempt = sqlc.arg(attempt) AND has_children = sqlc.arg(has_children)
  AND (sqlc.arg(has_children) = 0 OR cancel_requested = 0)
  AND (concurrency_key IS NOT NULL) = CAST(sqlc.arg(keyed) AS SIGNED);

-- name: ExecutionRecordKeptMany :execrows
-- Writes the execution rows the batch's runs still need, after
-- JobCompleteFencedMany ended them in this transaction, from the claimed job
-- rows: the runs a cancel request ended CANCELED (the audit trail says what
-- the job row says), and the successes of jobs older than the newest
-- recent_rows job ids (jobq.StatsRecentRows: a long run, or one scheduled or
-- retried far ahead), so that the recent counts of QueueStats and Activity,
-- which read only the newest rows of each table, still see them. Every other
-- success gets no row: the job row, which the update just wrote, is its
-- attempt's record (attempt, owner, started_at, run_at as due_at,
-- finished_at; the job_attempt view and the store's readers show it as the
-- attempt's SUCCESS), which saves one row write and its two index entries
-- per job. The transaction holds the rows locked at the attempts they were
-- fenced on, so the ids alone pick exactly those rows. MAX(id) is one dive
-- into the primary key.
INSERT INTO job_execution (job_id, attempt, owner, started_at, due_at, finished_at, outcome, error)
SELECT q.id, q.attempt, COALESCE(q.owner, ''), COALESCE(q.started_at, NOW(6)), q.run_at,
       NOW(6), IF(q.cancel_requested = 1, 'CANCELED', 'SUCCESS'), NULL
FROM job_queue AS q FORCE INDEX (PRIMARY)
WHERE q.id IN (sqlc.slice(ids))
  AND (q.cancel_requested = 1 OR q.id + sqlc.arg(recent_rows) <= (SELECT MAX(m.id) FROM job_queue AS m));

-- name: JobReleaseFencedMany :execrows
-- Releases of runs whose handler never started (given back by the run queue,
-- at shutdown), one statement for the batch's releases of one attempt number,
-- each row fenced by its attempt like JobReleaseFenced: back to WAITING
-- without spending a retry (CANCELED when a cancel was requested). A run
-- queue giving back 150 jobs wrote 300 statements row by row; its peers
-- could claim none of them until the last committed.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = IF(cancel_requested = 1, 'CANCELED', 'WAITING'),
    finished_at = IF(cancel_requested = 1, NOW(6), NULL),
    lease_until = NULL,
    update_time = NOW(6)
WHERE id IN (sqlc.slice(ids)) AND status = 'RUNNING'
  AND attempt = sqlc.arg(attempt);

-- name: ExecutionRecordMany :execrows
-- ExecutionRecord for the runs JobReleaseFencedMany just released in this
-- transaction, which holds their rows: one execution row each, with the
-- batch's outcome and error (CANCELED when a cancel was requested).
INSERT INTO job_execution (job_id, attempt, owner, started_at, due_at, finished_at, outcome, error)
SELECT q.id, q.attempt, COALESCE(q.owner, ''), COALESCE(q.started_at, NOW(6)), q.run_at,
       NOW(6), IF(q.cancel_requested = 1, 'CANCELED', sqlc.arg(outcome)), sqlc.narg(error)
FROM job_queue AS q FORCE INDEX (PRIMARY)
WHERE q.id IN (sqlc.slice(ids)) AND q.attempt = sqlc.arg(attempt);
