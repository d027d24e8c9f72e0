DROP VIEW IF EXISTS job_attempt;
