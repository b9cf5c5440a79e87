-- PostgreSQL text of 0002_arrays.sql.
ALTER TABLE jobs ADD COLUMN array_job_id BIGINT NOT NULL DEFAULT 0;
CREATE INDEX jobs_array_job_id ON jobs(array_job_id) WHERE array_job_id != 0;
