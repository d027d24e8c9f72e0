-- idx_scan and idx_due index the WAITING/SCHEDULED side of the queue only.
-- Every status change used to move a job's entries in both (their keys led
-- with status), so a completion (RUNNING → SUCCESS, FAILED or CANCELED)
-- rewrote two index entries no query reads: no scan, claim or promotion
-- looks at a RUNNING or terminal row through them. scan_status is status
-- while WAITING, else NULL (idx_scan serves the scan, both claims, the
-- limited claim and the remote fetch: WAITING only); due_status is status
-- while SCHEDULED or WAITING, else NULL (idx_due serves the promoter, the
-- backlog gauges and the oldest-due stat). Both are VIRTUAL, like
-- parked_key (011) and held_rate_key (016): an UPDATE whose computed values
-- do not change leaves their index alone, so a completion now writes
-- idx_lease and idx_type_status only. The claim (WAITING → RUNNING) still
-- moves both out. MariaDB uses an index on a virtual column only when the
-- query names the column: the queries that read these indexes say
-- scan_status = 'WAITING' and due_status = 'SCHEDULED' / 'WAITING'.
ALTER TABLE job_queue
    ADD COLUMN scan_status VARCHAR(16) CHARACTER SET ascii
        AS (IF(status = 'WAITING', status, NULL)) VIRTUAL,
    ADD COLUMN due_status VARCHAR(16) CHARACTER SET ascii
        AS (IF(status IN ('SCHEDULED', 'WAITING'), status, NULL)) VIRTUAL,
    DROP KEY idx_scan,
    ADD KEY idx_scan (scan_status, lane, priority DESC, run_at, id, attempt, job_type),
    DROP KEY idx_due,
    ADD KEY idx_due (due_status, run_at);
