UPDATE job_queue SET status = IF(run_at > NOW(6), 'SCHEDULED', 'WAITING'), update_time = NOW(6)
WHERE status = 'PARKED';
DROP TABLE concurrency_key;
ALTER TABLE job_queue
    DROP KEY idx_key_parked,
    DROP COLUMN parked_key,
    DROP COLUMN concurrency_key;
