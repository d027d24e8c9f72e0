-- Remote workers (docs/workers.md).
--
-- lane says who runs a job: 0 the replicas' own handlers, 1 remote workers
-- (its job type was declared remote, `jobq serve --remote-type`). It is set
-- at submit and leads idx_scan after status, so the replicas' scan
-- (status='WAITING' AND lane=0) and a worker's fetch (status='WAITING' AND
-- lane=1 AND job_type IN (…)) each read their own range of the index in
-- priority order, with no filesort, however many jobs wait in the other.
--
-- lease_nonce is the secret drawn when a worker's fetch claims the job: one
-- 128-bit random nonce per claim statement, stored on every row it claims.
-- A task token carries HMAC-SHA256(nonce, "id:attempt") (truncated), so one
-- worker's tokens never reveal another job's secret; it is kept after the
-- run ends so a retried completion can still be verified.
ALTER TABLE job_queue
    ADD COLUMN lane TINYINT NOT NULL DEFAULT 0,
    ADD COLUMN lease_nonce BINARY(16) NULL,
    DROP KEY idx_scan,
    ADD KEY idx_scan (status, lane, priority DESC, run_at, id, attempt, job_type);

-- output is the attempt's output (a JSON value, at most 65,536 bytes),
-- written with its outcome.
ALTER TABLE job_execution ADD COLUMN output MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;

-- job_run_info holds what a running attempt reports before its outcome is
-- known (the attempt's job_execution row is written only then): its last
-- progress report and its log's size, which bounds the log.
CREATE TABLE job_run_info (
    job_id           BIGINT UNSIGNED NOT NULL,
    attempt          INT           NOT NULL,
    progress         DOUBLE        NULL,
    progress_message VARCHAR(256)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    log_bytes        INT           NOT NULL DEFAULT 0,
    log_lines        INT           NOT NULL DEFAULT 0,
    update_time      DATETIME(6)   NOT NULL,
    PRIMARY KEY (job_id, attempt)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- job_log is each attempt's log: at most 65,536 bytes per attempt, lines of
-- at most 4,096 bytes, numbered from 1 (seq) in the order they were appended.
CREATE TABLE job_log (
    job_id     BIGINT UNSIGNED NOT NULL,
    attempt    INT           NOT NULL,
    seq        INT           NOT NULL,
    line       TEXT          CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    created_at DATETIME(6)   NOT NULL,
    PRIMARY KEY (job_id, attempt, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
