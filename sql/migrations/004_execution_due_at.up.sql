-- due_at records, per attempt, when the job was due (job_queue.run_at at the
-- moment of the claim). An attempt whose started_at is before its due_at was
-- claimed early: the chaos checker reports it (the cas claim's ABA race).
-- Nullable: rows written before this migration have none.
ALTER TABLE job_execution ADD COLUMN due_at DATETIME(6) NULL;
