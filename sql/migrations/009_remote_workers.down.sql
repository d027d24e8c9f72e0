DROP TABLE IF EXISTS job_log;
DROP TABLE IF EXISTS job_run_info;
ALTER TABLE job_execution DROP COLUMN output;
ALTER TABLE job_queue
    DROP KEY idx_scan,
    ADD KEY idx_scan (status, priority DESC, run_at, id, attempt, job_type),
    DROP COLUMN lease_nonce,
    DROP COLUMN lane;
