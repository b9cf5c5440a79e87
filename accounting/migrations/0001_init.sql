-- Jobs: indexed columns for sacct's filters plus the whole api.Job as JSON
-- (without script and environment, which live in spool). Times are unix
-- nanoseconds, 0 when unset.
CREATE TABLE jobs (
	id            INTEGER PRIMARY KEY,
	"user"        TEXT    NOT NULL,
	uid           INTEGER NOT NULL,
	name          TEXT    NOT NULL,
	"partition"   TEXT    NOT NULL,
	account       TEXT    NOT NULL,
	state         TEXT    NOT NULL,
	submit_time   INTEGER NOT NULL,
	eligible_time INTEGER NOT NULL,
	start_time    INTEGER NOT NULL,
	end_time      INTEGER NOT NULL,
	record        TEXT    NOT NULL
);
CREATE INDEX jobs_user ON jobs("user");
CREATE INDEX jobs_uid ON jobs(uid);
CREATE INDEX jobs_state ON jobs(state);
CREATE INDEX jobs_end_time ON jobs(end_time);
CREATE INDEX jobs_submit_time ON jobs(submit_time);

-- Spool: the batch script and environment (JSON array of KEY=VALUE), kept
-- apart so that loading jobs never reads them.
CREATE TABLE spool (
	job_id INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
	script TEXT NOT NULL,
	env    TEXT NOT NULL
);

-- Events: the per-job trail, in insertion order. No foreign key: the trail
-- may mention jobs that never made it into the jobs table.
CREATE TABLE events (
	id      INTEGER PRIMARY KEY AUTOINCREMENT,
	job_id  INTEGER NOT NULL,
	time    INTEGER NOT NULL,
	kind    TEXT    NOT NULL,
	state   TEXT    NOT NULL,
	reason  TEXT    NOT NULL,
	message TEXT    NOT NULL,
	actor   TEXT    NOT NULL
);
CREATE INDEX events_job ON events(job_id, id);

CREATE TABLE audit (
	id     INTEGER PRIMARY KEY AUTOINCREMENT,
	time   INTEGER NOT NULL,
	uid    INTEGER NOT NULL,
	"user" TEXT    NOT NULL,
	action TEXT    NOT NULL,
	target TEXT    NOT NULL,
	detail TEXT    NOT NULL
);

-- Nodes: operator-set node state (drain, reason) as api.Node JSON.
CREATE TABLE nodes (
	name   TEXT PRIMARY KEY,
	record TEXT NOT NULL
);

-- Meta: small key/value facts such as the job id high-water mark.
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value ANY
);
