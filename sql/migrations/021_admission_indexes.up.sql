-- Two virtual columns key idx_lease and idx_type_status, so that the hot
-- status changes move fewer index entries:
--
--   - index_status is status, except that PARKED reads WAITING: it keys
--     idx_lease (index_status, lease_until, job_type), so a keyed job's
--     admission (PARKED → WAITING) leaves idx_lease alone; the RUNNING range
--     carries job_type, so RUNNING jobs are counted by type from it
--     (covering: they are few, one per run in flight).
--   - type_status is status, except that PARKED and RUNNING read WAITING: it
--     keys idx_type_status (job_type, type_status, id), so neither the claim
--     (WAITING → RUNNING) nor an admission moves a job's entry there.
--
-- A plain job's claim now writes idx_scan and idx_lease (2 entries instead
-- of 3) and its completion idx_lease and idx_type_status (2): 4 per job,
-- was 5. A keyed job's admission writes idx_scan and idx_key_parked only:
-- 6 per keyed job, was 9 (TestIndexWritesPerJob, TestIndexWritesPerKeyedJob
-- in testbed/bench).
--
-- Readers name the virtual column (MariaDB uses an index on a virtual
-- column only for a query that names it) and keep their status term, which
-- filters after the entry is read: a by-type read of WAITING jobs steps
-- over the type's PARKED and RUNNING ones. RUNNING jobs of a type are read
-- from idx_lease's RUNNING range, not from idx_type_status (where they sit
-- among the type's backlog). The counts by type and status take RUNNING
-- from idx_lease and PARKED from idx_key_parked, which carries job_type for
-- it (covering).
ALTER TABLE job_queue
    ADD COLUMN index_status VARCHAR(16) CHARACTER SET ascii
        AS (IF(status = 'PARKED', 'WAITING', status)) VIRTUAL,
    ADD COLUMN type_status VARCHAR(16) CHARACTER SET ascii
        AS (IF(status IN ('PARKED', 'RUNNING'), 'WAITING', status)) VIRTUAL,
    DROP KEY idx_lease,
    ADD KEY idx_lease (index_status, lease_until, job_type),
    DROP KEY idx_type_status,
    ADD KEY idx_type_status (job_type, type_status, id),
    DROP KEY idx_key_parked,
    ADD KEY idx_key_parked (parked_key, priority DESC, run_at, id, job_type);
