DROP TABLE IF EXISTS periodic_job;
DROP TABLE IF EXISTS job_type_control;
