-- Restores idx_scan without the covered columns.
ALTER TABLE job_queue
    DROP KEY idx_scan,
    ADD KEY idx_scan (status, priority DESC, run_at, id);
