-- The leader lease (issue 26): see the SQLite text. The integers are
-- BIGINT (epoch, unix nanoseconds).
CREATE TABLE leases (
	name     TEXT   PRIMARY KEY,
	holder   TEXT   NOT NULL,
	epoch    BIGINT NOT NULL,
	expires  BIGINT NOT NULL,
	addr     TEXT   NOT NULL DEFAULT '',
	api_addr TEXT   NOT NULL DEFAULT '',
	step_key TEXT   NOT NULL DEFAULT ''
);
