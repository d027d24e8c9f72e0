ALTER TABLE periodic_job
    DROP COLUMN queued_job_id,
    DROP COLUMN active_job_id,
    DROP COLUMN overlap;
DROP TABLE periodic_fire;
