-- Alert notifications (docs/operations.md, "Alerts").
--
-- alert_rule is one rule: what it watches (a job type or a periodic
-- schedule's name), the condition, and where its messages go (a webhook URL,
-- the payload preset, the name of the signing secret). threshold_ms is the
-- running time of the job_running_longer condition (0 for the others).
CREATE TABLE alert_rule (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    name         VARCHAR(64)   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    job_type     VARCHAR(64)   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    schedule     VARCHAR(64)   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
    cond         VARCHAR(32)   CHARACTER SET ascii NOT NULL,
    threshold_ms BIGINT        NOT NULL DEFAULT 0,
    url          VARCHAR(2048) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    preset       VARCHAR(16)   CHARACTER SET ascii NOT NULL,
    secret       VARCHAR(64)   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    create_time  DATETIME(6)   NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_alert_rule_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- alert_delivery is the outbox: one row per incident and rule. dedupe_key
-- (UNIQUE) names the incident — "<rule>:job:<job id>:<attempt>" or
-- "<rule>:schedule:<name>:<instant>" — so however many replicas detect it,
-- it is one row and one message. A replica claims a due row (PENDING,
-- next_attempt_at reached, or SENDING with an expired lease) with FOR UPDATE
-- SKIP LOCKED, sends it, and records the outcome fenced by attempts.
-- The destination is copied from the rule at detection.
CREATE TABLE alert_delivery (
    id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    rule_id         BIGINT UNSIGNED NOT NULL,
    dedupe_key      VARCHAR(255)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    url             VARCHAR(2048) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    preset          VARCHAR(16)   CHARACTER SET ascii NOT NULL,
    secret          VARCHAR(64)   CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    incident        MEDIUMTEXT    CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    status          VARCHAR(16)   CHARACTER SET ascii NOT NULL DEFAULT 'PENDING',
    attempts        INT           NOT NULL DEFAULT 0,
    next_attempt_at DATETIME(6)   NOT NULL,
    owner           VARCHAR(128)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    lease_until     DATETIME(6)   NULL,
    last_status     INT           NOT NULL DEFAULT 0,
    last_error      VARCHAR(2048) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    create_time     DATETIME(6)   NOT NULL,
    update_time     DATETIME(6)   NOT NULL,
    delivered_at    DATETIME(6)   NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_alert_dedupe (dedupe_key),
    KEY idx_alert_due (status, next_attempt_at),
    KEY idx_alert_rule (rule_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- alert_cursor is the detection scan's position in job_execution (by id):
-- the replica that locks the row (FOR UPDATE SKIP LOCKED) scans, the others
-- skip the pass, and the outbox rows and the new position commit together.
CREATE TABLE alert_cursor (
    name        VARCHAR(32)     CHARACTER SET ascii NOT NULL,
    last_id     BIGINT UNSIGNED NOT NULL,
    update_time DATETIME(6)     NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
