-- job_queue is the queue: one row per job. Times are UTC, written from the
-- database clock (UTC_TIMESTAMP(6)), never from a replica's clock.
CREATE TABLE job_queue (
    id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    job_key          VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    job_type         VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    params           MEDIUMTEXT   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    request_hash     CHAR(64)     CHARACTER SET ascii NOT NULL,
    status           VARCHAR(16)  CHARACTER SET ascii NOT NULL DEFAULT 'WAITING',
    priority         INT          NOT NULL DEFAULT 0,
    retry_times      INT          NOT NULL DEFAULT 0,
    max_retry        INT          NOT NULL DEFAULT 3,
    timeout_ms       INT          NOT NULL DEFAULT 0,
    run_at           DATETIME(6)  NOT NULL,
    attempt          INT          NOT NULL DEFAULT 0,
    owner            VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    lease_until      DATETIME(6)  NULL,
    last_error       VARCHAR(2048) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    started_at       DATETIME(6)  NULL,
    finished_at      DATETIME(6)  NULL,
    cancel_requested TINYINT(1)   NOT NULL DEFAULT 0,
    create_time      DATETIME(6)  NOT NULL,
    update_time      DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_job_key (job_key),
    -- Serves the scan and both claims: equality on status, order by
    -- priority DESC, run_at, id straight from the index (no filesort), run_at
    -- filtered inside the index.
    KEY idx_scan (status, priority DESC, run_at, id),
    -- Serves the rescuer: RUNNING rows with an expired lease.
    KEY idx_lease (status, lease_until),
    -- Serves list by type and status with keyset pagination.
    KEY idx_type_status (job_type, status, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- job_execution is the audit trail: one row per attempt (claim). It is the
-- testbed's ground truth; UNIQUE (job_id, attempt) makes a double claim of one
-- attempt impossible to record.
CREATE TABLE job_execution (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    job_id      BIGINT UNSIGNED NOT NULL,
    attempt     INT          NOT NULL,
    owner       VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    started_at  DATETIME(6)  NOT NULL,
    finished_at DATETIME(6)  NULL,
    outcome     VARCHAR(16)  CHARACTER SET ascii NULL,
    error       VARCHAR(2048) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_job_attempt (job_id, attempt)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- job_effect is the testbed's effect table: the built-in `effect` job type
-- writes one 'tx' row inside its transactional completion and one 'non_tx' row
-- outside it, so both kinds of duplicate can be counted.
CREATE TABLE job_effect (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    job_id     BIGINT UNSIGNED NOT NULL,
    attempt    INT          NOT NULL,
    kind       VARCHAR(8)   CHARACTER SET ascii NOT NULL,
    owner      VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY idx_job (job_id, kind)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
