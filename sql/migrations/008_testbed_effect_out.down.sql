-- Puts the testbed effect table back as migration 001 created it.
CREATE TABLE IF NOT EXISTS job_effect (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    job_id     BIGINT UNSIGNED NOT NULL,
    attempt    INT          NOT NULL,
    kind       VARCHAR(8)   CHARACTER SET ascii NOT NULL,
    owner      VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY idx_job (job_id, kind)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
