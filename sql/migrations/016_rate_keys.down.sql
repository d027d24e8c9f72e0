-- HELD jobs were due: back to WAITING (the per-type limit, or none, takes
-- them from there).
UPDATE job_queue SET status = 'WAITING', update_time = NOW(6) WHERE status = 'HELD';
DROP TABLE rate_hold;
ALTER TABLE rate_start
    DROP KEY idx_rate_key_window,
    DROP COLUMN rate_key;
ALTER TABLE job_queue
    DROP KEY idx_rate_held,
    DROP COLUMN held_rate_key,
    DROP COLUMN rate_key;
ALTER TABLE job_type_control
    DROP COLUMN rate_per_key;
