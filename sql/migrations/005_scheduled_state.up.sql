-- SCHEDULED holds jobs whose run_at is still ahead (delayed submits, retry
-- backoff): the promoter moves them to WAITING once run_at <= NOW(6), so the
-- scan and every claim walk only due WAITING rows in idx_scan, however many
-- jobs are parked in the future. idx_due serves the promoter: the earliest
-- SCHEDULED run_at is one index-only read ("Select tables optimized away"),
-- and the promotion walks the due SCHEDULED rows in run_at order.
ALTER TABLE job_queue ADD KEY idx_due (status, run_at);
UPDATE job_queue SET status = 'SCHEDULED', update_time = NOW(6)
WHERE status = 'WAITING' AND run_at > NOW(6);
