-- idx_due indexes the SCHEDULED side of the queue only. Since 018
-- due_status was status while SCHEDULED or WAITING, so the claim (WAITING →
-- RUNNING) still moved each job's idx_due entry, and so did an admission
-- (PARKED → WAITING). The readers of its WAITING range (the backlog gauges,
-- the oldest-due stat) read idx_scan now, whose WAITING entries are in due
-- order within each (lane, priority) group, so due_status is status while
-- SCHEDULED, else NULL: the promoter's probe and batch read idx_due by
-- due_status = 'SCHEDULED' as before, the claim writes idx_scan, idx_lease
-- and idx_type_status only (3 index entries instead of 4), an admission
-- leaves idx_due alone, and a promotion (SCHEDULED → WAITING) still moves
-- its entry (to the NULL key). One ALTER, like 018's: MariaDB copies the
-- table for it (a virtual column's expression does not change in place,
-- and an in-place drop and add of one cannot share an ALTER).
ALTER TABLE job_queue
    DROP KEY idx_due,
    MODIFY COLUMN due_status VARCHAR(16) CHARACTER SET ascii
        AS (IF(status = 'SCHEDULED', status, NULL)) VIRTUAL,
    ADD KEY idx_due (due_status, run_at);
