-- Fewer pages written per job. A job's life is three commits (submit,
-- start, end), and SQLite writes every page a commit touches to the log
-- in full: about twenty pages a job, most of them index pages.
--
-- The trail is clustered by job: a table keyed by (job_id, id) without a
-- rowid, so an event is one entry in one b-tree instead of a row plus an
-- events_job index entry (one page a commit less). Only a job's own
-- events are ever read, in order, and a purge deletes them by job. An
-- event's id now counts within its job (the writer takes the job's
-- largest id plus one); the old global ids keep their order.
CREATE TABLE events_by_job (
	job_id  INTEGER NOT NULL,
	id      INTEGER NOT NULL,
	time    INTEGER NOT NULL,
	kind    TEXT    NOT NULL,
	state   TEXT    NOT NULL,
	reason  TEXT    NOT NULL,
	message TEXT    NOT NULL,
	actor   TEXT    NOT NULL,
	PRIMARY KEY (job_id, id)
) WITHOUT ROWID;
INSERT INTO events_by_job (job_id, id, time, kind, state, reason, message, actor)
	SELECT job_id, id, time, kind, state, reason, message, actor FROM events;
DROP TABLE events;
ALTER TABLE events_by_job RENAME TO events;

-- The end-time index holds ended jobs only. Every live job had an entry
-- under 0, written at submit and moved at the end (two pages); the
-- queries that use the index (purges, the controller's load of recently
-- ended jobs) ask for end_time > 0 themselves.
DROP INDEX jobs_end_time;
CREATE INDEX jobs_end_time ON jobs(end_time) WHERE end_time > 0;
