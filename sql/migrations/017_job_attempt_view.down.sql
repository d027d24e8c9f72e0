-- Before 017 every ended attempt had its job_execution row. A success the
-- batched completion wrote since has none (its job row is the record, shown
-- by the view): write those rows first, as the view shows them, so a binary
-- from before 017 still finds each job's successful attempt (executions,
-- workflow outputs, a retried completion's check).
INSERT INTO job_execution (job_id, attempt, owner, started_at, due_at, finished_at, outcome, error)
SELECT q.id, q.attempt, COALESCE(q.owner, ''), COALESCE(q.started_at, q.finished_at, q.update_time), q.run_at,
       q.finished_at, 'SUCCESS', NULL
FROM job_queue AS q
WHERE q.status = 'SUCCESS' AND q.attempt > 0
  AND NOT EXISTS (SELECT 1 FROM job_execution AS x WHERE x.job_id = q.id AND x.attempt = q.attempt);
DROP VIEW IF EXISTS job_attempt;
