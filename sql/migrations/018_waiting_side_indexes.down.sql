ALTER TABLE job_queue
    DROP KEY idx_scan,
    DROP KEY idx_due,
    ADD KEY idx_scan (status, lane, priority DESC, run_at, id, attempt, job_type),
    ADD KEY idx_due (status, run_at),
    DROP COLUMN scan_status,
    DROP COLUMN due_status;
