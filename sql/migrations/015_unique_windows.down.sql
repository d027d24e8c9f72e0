-- Back to a permanent UNIQUE job_key. It fails with a duplicate-key error
-- (and changes nothing) while a key has more than one job, i.e. while
-- released jobs exist: purge them first
-- (DELETE FROM job_queue WHERE key_release <> 0, or jobq purge).
ALTER TABLE job_queue
    DROP INDEX uk_job_key,
    ADD UNIQUE KEY uk_job_key (job_key),
    DROP COLUMN unique_while_active,
    DROP COLUMN unique_until,
    DROP COLUMN key_release;
