ALTER TABLE job_queue
    DROP KEY idx_due,
    MODIFY COLUMN due_status VARCHAR(16) CHARACTER SET ascii
        AS (IF(status IN ('SCHEDULED', 'WAITING'), status, NULL)) VIRTUAL,
    ADD KEY idx_due (due_status, run_at);
