-- Rate limits per job type (docs/operations.md "Rate limits"): at most
-- rate_starts starts of the type in any window of rate_period_us
-- microseconds, on the database clock, across replicas. 0 = no rate limit.
-- A rate-limited type is left out of the ordinary scan like a paused or
-- concurrency-limited one (job_type_control, same subquery) and claimed only
-- by the limited claim, which locks the type's control row FOR UPDATE.
ALTER TABLE job_type_control
    ADD COLUMN rate_starts    INT    NOT NULL DEFAULT 0,
    ADD COLUMN rate_period_us BIGINT NOT NULL DEFAULT 0;

-- rate_start is the sliding window's record: one row per start (claim) of a
-- rate-limited job, written in the claim's transaction under the type's
-- control row lock with the started_at the claim stamped on the job (the
-- same instant job_execution.started_at later records). The limited claim
-- counts the rows of the last rate_period_us (idx_rate_window) and deletes
-- the older ones of its type, so the table holds about one window of starts
-- per rate-limited type.
CREATE TABLE rate_start (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    job_type   VARCHAR(64)     CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    started_at DATETIME(6)     NOT NULL,
    job_id     BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (id),
    KEY idx_rate_window (job_type, started_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
