-- The leader lease (issue 26): controllers sharing a store take turns
-- as primary. One row, name 'primary'. holder is the controller_name of
-- the controller that holds it, epoch the fencing token (raised by
-- every change of holder; every write checks it), expires the instant
-- it lapses in unix nanoseconds of the store's clock (never the
-- controllers', which may disagree). addr, api_addr and step_key tell
-- standbys and clients where the primary is and which step key it
-- signs with.
CREATE TABLE leases (
	name     TEXT    PRIMARY KEY,
	holder   TEXT    NOT NULL,
	epoch    INTEGER NOT NULL,
	expires  INTEGER NOT NULL,
	addr     TEXT    NOT NULL DEFAULT '',
	api_addr TEXT    NOT NULL DEFAULT '',
	step_key TEXT    NOT NULL DEFAULT ''
);
