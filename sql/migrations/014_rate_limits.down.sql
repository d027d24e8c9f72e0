DROP TABLE rate_start;
ALTER TABLE job_type_control
    DROP COLUMN rate_period_us,
    DROP COLUMN rate_starts;
