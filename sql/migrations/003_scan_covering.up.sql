-- idx_scan becomes a covering index for the scan: the idle probe and the cas
-- claim's read (SELECT id, attempt … WHERE status='WAITING' AND run_at <= NOW(6)
-- ORDER BY priority DESC, run_at, id) read the index alone ("Using index"),
-- never the rows, so large params cost the scan nothing. job_type rides along
-- so a scan that filters paused or limited job types stays index-only too.
ALTER TABLE job_queue
    DROP KEY idx_scan,
    ADD KEY idx_scan (status, priority DESC, run_at, id, attempt, job_type);
