-- Job arrays: the array id of each record (0 for jobs that are not array
-- tasks), so that sacct -j N finds every task of array N with the
-- index. Split-off tasks have no spool of their own; Spool reads the
-- array's.
ALTER TABLE jobs ADD COLUMN array_job_id INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_array_job_id ON jobs(array_job_id) WHERE array_job_id != 0;
