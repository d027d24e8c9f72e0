ALTER TABLE job_execution DROP COLUMN due_at;
