ALTER TABLE job_queue
    DROP KEY idx_lease,
    ADD KEY idx_lease (status, lease_until),
    DROP KEY idx_type_status,
    ADD KEY idx_type_status (job_type, status, id),
    DROP COLUMN index_status,
    DROP COLUMN type_status;
