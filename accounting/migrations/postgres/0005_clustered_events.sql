-- PostgreSQL text of 0005_clustered_events.sql. An event's id now
-- counts within its job (the writer takes the job's largest id plus
-- one), so the trail is keyed by (job_id, id) and its identity goes; the
-- old global ids keep their order. PostgreSQL has no WITHOUT ROWID: the
-- primary key's index serves the per-job reads and replaces events_job.
ALTER TABLE events ALTER COLUMN id DROP IDENTITY;
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events ADD PRIMARY KEY (job_id, id);
DROP INDEX events_job;

-- The end-time index holds ended jobs only, as in SQLite.
DROP INDEX jobs_end_time;
CREATE INDEX jobs_end_time ON jobs(end_time) WHERE end_time > 0;
