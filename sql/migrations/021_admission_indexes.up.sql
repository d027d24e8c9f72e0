-- Two virtual columns key idx_lease and idx_type_status, so that the hot
-- status changes move fewer index entries:
--
--   - index_status is status, except that PARKED reads WAITING: it keys
--     idx_lease (index_status, lease_until, job_type), so a keyed job's
--     admission (PARKED → WAITING) leaves idx_lease alone; the RUNNING range
--     carries job_type, so RUNNING jobs are counted by type from it
--     (covering: they are few, one per run in flight).
--   - type_status is status, except that RUNNING reads WAITING: it keys
--     idx_type_status (job_type, type_status, id), so the claim (WAITING →
--     RUNNING) does not move a job's entry there. PARKED stays apart: a
--     limited type's by-type reads of its WAITING jobs step over its RUNNING
--     jobs (at most what runs at once) but never over a parked backlog.
--
-- A plain job's claim now writes idx_scan and idx_lease (2 entries instead
-- of 3) and its completion idx_lease and idx_type_status (2): 4 per job,
-- was 5. A keyed job's admission writes idx_scan, idx_key_parked and
-- idx_type_status: 7 per keyed job, was 9 (TestIndexWritesPerJob,
-- TestIndexWritesPerKeyedJob in testbed/bench).
--
-- Readers name the virtual column (MariaDB uses an index on a virtual
-- column only for a query that names it) and keep their status term, which
-- filters after the entry is read. RUNNING jobs of a type are read from
-- idx_lease's RUNNING range, not from idx_type_status (where they sit among
-- the type's WAITING jobs); the counts by type and status take them from
-- there.
ALTER TABLE job_queue
    ADD COLUMN index_status VARCHAR(16) CHARACTER SET ascii
        AS (IF(status = 'PARKED', 'WAITING', status)) VIRTUAL,
    ADD COLUMN type_status VARCHAR(16) CHARACTER SET ascii
        AS (IF(status = 'RUNNING', 'WAITING', status)) VIRTUAL,
    DROP KEY idx_lease,
    ADD KEY idx_lease (index_status, lease_until, job_type),
    DROP KEY idx_type_status,
    ADD KEY idx_type_status (job_type, type_status, id);
