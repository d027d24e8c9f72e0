-- Back to one WAITING state: scheduled jobs wait in idx_scan again, filtered
-- by run_at <= NOW(6) at every scan.
UPDATE job_queue SET status = 'WAITING', update_time = NOW(6) WHERE status = 'SCHEDULED';
ALTER TABLE job_queue DROP KEY idx_due;
