-- Rate limits per key (docs/operations.md "Rate limits"): a job type's rate
-- limit may apply to each rate key of the type on its own (rate_per_key = 1):
-- at most rate_starts starts of the jobs with one rate_key in any window of
-- rate_period_us, on the database clock, across replicas. Jobs of the type
-- without a rate key share the key ''. A per-key type is claimed by the
-- limited claim, as any rate-limited type, under its control row lock.
ALTER TABLE job_type_control
    ADD COLUMN rate_per_key TINYINT(1) NOT NULL DEFAULT 0;

-- rate_key is the job's rate key (NULL for none; only a per-key limit reads
-- it). A job of a per-key type whose key's window is full when the limited
-- claim meets it is HELD: outside idx_scan's WAITING range, so the key's
-- backlog costs the claims of the type's other keys nothing. held_rate_key
-- is its key while HELD, else NULL (virtual, like parked_key: idx_rate_held
-- changes only when a job is held or released) and serves the release's
-- pick, a key's held jobs by priority DESC, run_at, id.
ALTER TABLE job_queue
    ADD COLUMN rate_key VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    ADD COLUMN held_rate_key VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
        AS (IF(status = 'HELD', COALESCE(rate_key, ''), NULL)) VIRTUAL,
    ADD KEY idx_rate_held (held_rate_key, job_type, priority DESC, run_at, id);

-- rate_start records each start's key ('' for a per-type limit and for
-- jobs without one); idx_rate_key_window counts one key's window.
ALTER TABLE rate_start
    ADD COLUMN rate_key VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '' AFTER job_type,
    ADD KEY idx_rate_key_window (job_type, rate_key, started_at);

-- rate_hold is one row per key of a per-key type that has HELD jobs: when
-- its window next has room (the oldest start in it plus the period, on the
-- database clock). The limited claim releases a key's held jobs — as many
-- as its window has room for — once opens_at has passed, and deletes the
-- row when none is left; the probe reads MIN(opens_at) to arm the wake.
-- Written only under the type's control row lock.
CREATE TABLE rate_hold (
    job_type VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    rate_key VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    opens_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (job_type, rate_key),
    KEY idx_rate_hold_open (job_type, opens_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
