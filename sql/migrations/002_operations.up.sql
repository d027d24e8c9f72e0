-- job_type_control holds per-job-type operations state. A job type without a
-- row is neither paused nor limited. The scan excludes every type with
-- paused = 1 or max_running > 0 in the same statement (a subquery on this
-- small table), so an idle replica pays no extra query; limited types are
-- claimed only by the limited claim, which locks the type's row FOR UPDATE,
-- counts its RUNNING jobs (idx_type_status) and claims at most the rest.
CREATE TABLE job_type_control (
    job_type    VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    paused      TINYINT(1)  NOT NULL DEFAULT 0,
    max_running INT         NOT NULL DEFAULT 0,
    update_time DATETIME(6) NOT NULL,
    PRIMARY KEY (job_type)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- periodic_job holds cron schedules. next_run_at is the cursor: the first
-- scheduled instant (UTC) not yet enqueued. A replica that fires a schedule
-- locks its row FOR UPDATE, enqueues the due instants as jobs keyed
-- '<name>@<instant>' and moves the cursor past NOW(6), so each instant becomes
-- exactly one job however many replicas fire it.
CREATE TABLE periodic_job (
    name        VARCHAR(40)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    cron_expr   VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    job_type    VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    params      MEDIUMTEXT   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    priority    INT          NOT NULL DEFAULT 0,
    max_retry   INT          NOT NULL DEFAULT 3,
    timeout_ms  INT          NOT NULL DEFAULT 0,
    misfire     VARCHAR(8)   CHARACTER SET ascii NOT NULL DEFAULT 'skip',
    source      VARCHAR(8)   CHARACTER SET ascii NOT NULL DEFAULT 'api',
    next_run_at DATETIME(6)  NOT NULL,
    last_run_at DATETIME(6)  NULL,
    create_time DATETIME(6)  NOT NULL,
    update_time DATETIME(6)  NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
