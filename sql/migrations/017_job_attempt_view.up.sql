-- A first-try success writes no job_execution row: the batched success
-- completion (store.JobCompleteMany) leaves the attempt's record in the job
-- row itself (attempt, owner, started_at, run_at as due_at, finished_at,
-- status SUCCESS), which it updates anyway. That saves one row write and two
-- index entries per job on the drain path; every other attempt (failed,
-- rescued, released, stale, cancelled, and successes with an output or
-- written row by row) still has its row.
--
-- job_attempt is every attempt, as job_execution held it before: its rows,
-- plus one row per SUCCESS job whose final attempt has none (id NULL,
-- outcome SUCCESS, error and output NULL). The store's own readers
-- (executions API, console activity, stats, a retried completion's check)
-- read the job row the same way; this view is for whole-table readers: the
-- testbed's checker, demo, loadtest and bench, and SQL by hand.
CREATE VIEW job_attempt AS
SELECT e.id, e.job_id, e.attempt, e.owner, e.started_at, e.finished_at, e.outcome, e.error, e.due_at, e.output
FROM job_execution AS e
UNION ALL
SELECT NULL, q.id, q.attempt, COALESCE(q.owner, ''), COALESCE(q.started_at, q.finished_at), q.finished_at,
       'SUCCESS', NULL, q.run_at, NULL
FROM job_queue AS q
WHERE q.status = 'SUCCESS' AND q.attempt > 0
  AND NOT EXISTS (SELECT 1 FROM job_execution AS x WHERE x.job_id = q.id AND x.attempt = q.attempt);
