-- Concurrency keys (docs/operations.md, "Concurrency keys"): at most
-- max_running jobs of one key are admitted at once, across replicas.
--
-- A keyed job is admitted (WAITING, SCHEDULED or RUNNING: it holds one of its
-- key's slots until it ends SUCCESS, FAILED or CANCELED) or PARKED. PARKED is
-- outside idx_scan's WAITING range and idx_due's SCHEDULED range, so parked
-- jobs cost the scan, the claims and the promoter nothing. The write that
-- ends an admitted job (a fenced completion, a rescue with no retry left, a
-- cancel) frees its slot and admits the key's next parked job in the same
-- transaction, under the key row's lock (store/keys.go).
--
-- parked_key is concurrency_key while the job is PARKED, else NULL: a
-- virtual column, so idx_key_parked changes only when a keyed job parks or
-- leaves PARKED, never on the claims and completions of other jobs. It serves
-- the admission's pick: a key's parked jobs by priority DESC, run_at, id.
ALTER TABLE job_queue
    ADD COLUMN concurrency_key VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    ADD COLUMN parked_key VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
        AS (IF(status = 'PARKED', concurrency_key, NULL)) VIRTUAL,
    ADD KEY idx_key_parked (parked_key, priority DESC, run_at, id);

-- concurrency_key is one key: its limit (the newest submit's, 1..1000) and
-- how many of its jobs are admitted now. Every change of admitted holds the
-- row's lock (keys are locked in ckey order), so admissions of one key on
-- any number of replicas are serialised and never exceed max_running.
CREATE TABLE concurrency_key (
    ckey        VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    max_running INT          NOT NULL DEFAULT 1,
    admitted    INT          NOT NULL DEFAULT 0,
    update_time DATETIME(6)  NOT NULL,
    PRIMARY KEY (ckey)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
