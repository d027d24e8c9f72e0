-- Uniqueness windows (docs/api.md "Uniqueness windows"): a submit may hold
-- its job_key only for a period (unique_until, on the database clock) or
-- only while the job is not terminal (unique_while_active); after that a
-- submit of the same key releases it and creates a new job.
--
-- key_release is 0 while the job holds its key and the job's own id once
-- released, so UNIQUE (job_key, key_release) keeps at most one holder per
-- key while released jobs keep their keys (GET by key returns the newest).
-- Every existing row and every insert that does not name the column hold
-- their key (DEFAULT 0): the permanent key stays the default. A key is
-- released only by a submit of the same key, in its own transaction, when
-- the holder's window has passed — there is no background sweep.
ALTER TABLE job_queue
    ADD COLUMN key_release BIGINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN unique_until DATETIME(6) NULL,
    ADD COLUMN unique_while_active TINYINT(1) NOT NULL DEFAULT 0,
    DROP INDEX uk_job_key,
    ADD UNIQUE KEY uk_job_key (job_key, key_release);
