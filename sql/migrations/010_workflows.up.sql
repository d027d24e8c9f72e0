-- Workflows (docs/workflows.md): jobs that wait for other jobs.
--
-- workflow is one submitted graph, idempotent by workflow_key as a job is by
-- job_key: request_hash is the hash of the canonical request.
CREATE TABLE workflow (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    workflow_key VARCHAR(64)  CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    request_hash CHAR(64)     CHARACTER SET ascii NOT NULL,
    create_time  DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_workflow_key (workflow_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A workflow's job waits BLOCKED while blocked_parents (its parents that
-- have not ended in a way that lets it run) is above 0: BLOCKED is outside
-- idx_scan's WAITING range and idx_due's SCHEDULED range, so waiting jobs
-- cost the scan, the claims and the promoter nothing. A parent's fenced
-- completion decrements its children's counters in its own transaction and
-- makes the child WAITING when the counter reaches 0 (store/workflow.go).
-- has_children marks the jobs whose end must be propagated: only their
-- completions do the extra work. workflow_id is NULL outside workflows.
ALTER TABLE job_queue
    ADD COLUMN workflow_id BIGINT UNSIGNED NULL,
    ADD COLUMN blocked_parents INT NOT NULL DEFAULT 0,
    ADD COLUMN has_children TINYINT(1) NOT NULL DEFAULT 0,
    ADD KEY idx_workflow (workflow_id, id);

-- job_dependency is one edge of a workflow: child_id waits for parent_id.
-- on_parent_failure says what a parent that ends FAILED or CANCELED does to
-- the child: 'cancel' (the default) cancels it and its descendants, 'run'
-- counts the parent as done, so the child may still run.
CREATE TABLE job_dependency (
    parent_id         BIGINT UNSIGNED NOT NULL,
    child_id          BIGINT UNSIGNED NOT NULL,
    on_parent_failure VARCHAR(8) CHARACTER SET ascii NOT NULL DEFAULT 'cancel',
    PRIMARY KEY (parent_id, child_id),
    KEY idx_child (child_id, parent_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A periodic schedule may start a workflow at each instant instead of one
-- job: workflow is its template, the validated jobs as JSON (NULL for a
-- job schedule).
ALTER TABLE periodic_job ADD COLUMN workflow MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
