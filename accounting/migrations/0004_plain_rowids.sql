-- The trail and the audit log number their rows with plain rowids.
-- AUTOINCREMENT kept a counter row in sqlite_sequence that every commit
-- appending an event rewrote: one more page in the log per commit, and a
-- job's life is three such commits. Ids stay increasing: a new row gets
-- the largest id plus one, and purges delete the oldest rows, never the
-- newest. Events are only ever ordered within one job, whose events a
-- purge removes together.
CREATE TABLE events_plain (
	id      INTEGER PRIMARY KEY,
	job_id  INTEGER NOT NULL,
	time    INTEGER NOT NULL,
	kind    TEXT    NOT NULL,
	state   TEXT    NOT NULL,
	reason  TEXT    NOT NULL,
	message TEXT    NOT NULL,
	actor   TEXT    NOT NULL
);
INSERT INTO events_plain (id, job_id, time, kind, state, reason, message, actor)
	SELECT id, job_id, time, kind, state, reason, message, actor FROM events;
DROP TABLE events;
ALTER TABLE events_plain RENAME TO events;
CREATE INDEX events_job ON events(job_id, id);

CREATE TABLE audit_plain (
	id     INTEGER PRIMARY KEY,
	time   INTEGER NOT NULL,
	uid    INTEGER NOT NULL,
	"user" TEXT    NOT NULL,
	action TEXT    NOT NULL,
	target TEXT    NOT NULL,
	detail TEXT    NOT NULL
);
INSERT INTO audit_plain (id, time, uid, "user", action, target, detail)
	SELECT id, time, uid, "user", action, target, detail FROM audit;
DROP TABLE audit;
ALTER TABLE audit_plain RENAME TO audit;
