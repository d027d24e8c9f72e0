ALTER TABLE periodic_job DROP COLUMN workflow;
DROP TABLE job_dependency;
UPDATE job_queue SET status = 'CANCELED', finished_at = NOW(6), update_time = NOW(6) WHERE status = 'BLOCKED';
ALTER TABLE job_queue
    DROP KEY idx_workflow,
    DROP COLUMN has_children,
    DROP COLUMN blocked_parents,
    DROP COLUMN workflow_id;
DROP TABLE workflow;
