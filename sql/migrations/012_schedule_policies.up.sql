-- Schedule policies (docs/operations.md "Fire ledger"): the fire ledger and
-- the columns of the overlap policy of periodic schedules.
--
-- periodic_fire is the fire ledger: one row per instant a schedule was due,
-- written in the transaction that fired (or skipped) it, under the
-- schedule's row lock; the primary key (name, instant) makes it one row per
-- instant across replicas and failovers. fate is 'fired' (job_id, or
-- workflow_id for a workflow schedule), 'late' (fired after the misfire
-- threshold: the catch-up of misfire 'once'; late_ms says how late) or
-- 'skipped' (reason 'misfire' or 'overlap'). covers is the number of
-- instants the row stands for: 1, except for one summary row of a fire that
-- skipped more instants than it lists one by one (from instant up to the
-- next row). late_ms is NOW(6) − instant when the row was written, in ms.
CREATE TABLE periodic_fire (
    name        VARCHAR(40)     CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    instant     DATETIME(6)     NOT NULL,
    fate        VARCHAR(8)      CHARACTER SET ascii NOT NULL,
    reason      VARCHAR(16)     CHARACTER SET ascii NULL,
    job_id      BIGINT UNSIGNED NULL,
    workflow_id BIGINT UNSIGNED NULL,
    late_ms     BIGINT          NOT NULL DEFAULT 0,
    covers      BIGINT          NOT NULL DEFAULT 1,
    record_time DATETIME(6)     NOT NULL,
    PRIMARY KEY (name, instant)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- overlap is the schedule's overlap policy: 'allow' (every instant fires),
-- 'skip' (an instant is skipped while the previous run is not terminal),
-- 'queue_one' (it waits, parked, behind the running one; at most one waits)
-- or 'cancel_previous' (the previous run is cancelled, then the instant
-- fires). active_job_id is the schedule's latest run that was let run;
-- queued_job_id the parked run of 'queue_one' (SCHEDULED at the far-future
-- run_at until the active run ends).
ALTER TABLE periodic_job
    ADD COLUMN overlap VARCHAR(16) CHARACTER SET ascii NOT NULL DEFAULT 'allow',
    ADD COLUMN active_job_id BIGINT UNSIGNED NULL,
    ADD COLUMN queued_job_id BIGINT UNSIGNED NULL;
