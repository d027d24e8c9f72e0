-- idx_lease and idx_type_status key a job's status as index_status: status,
-- except that PARKED is indexed as WAITING. A keyed job's admission (PARKED
-- → WAITING, in the transaction of the completion that freed its key's
-- slot) moved its entries in both: four index entries per admission with
-- idx_scan and idx_key_parked, and a keyed job cost 9 entries where a
-- plain one costs 5. Now the admission writes idx_scan and idx_key_parked
-- only (TestIndexWritesPerJob in testbed/bench). Every other status change
-- moves the same entries as before.
--
-- Readers name index_status (MariaDB uses an index on a virtual column
-- only for a query that names it) and keep their status term, which tells
-- PARKED from WAITING after the entry is read: a by-type or by-status
-- read of WAITING jobs steps over the type's PARKED jobs, a read of PARKED
-- ones over its WAITING jobs. The counts by type and status count PARKED
-- jobs from idx_key_parked, which carries job_type for it (covering).
ALTER TABLE job_queue
    ADD COLUMN index_status VARCHAR(16) CHARACTER SET ascii
        AS (IF(status = 'PARKED', 'WAITING', status)) VIRTUAL,
    DROP KEY idx_lease,
    ADD KEY idx_lease (index_status, lease_until),
    DROP KEY idx_type_status,
    ADD KEY idx_type_status (job_type, index_status, id),
    DROP KEY idx_key_parked,
    ADD KEY idx_key_parked (parked_key, priority DESC, run_at, id, job_type);
