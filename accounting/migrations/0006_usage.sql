-- Usage of job steps (issue 22): one row per job, step and node with
-- what the node measured of its part of the step (api.NodeUsage as
-- JSON). step_id is the srun step id, or 4294967291 (Slurm's
-- SLURM_BATCH_SCRIPT) for the batch step. Rows are replaced while the
-- step runs (its running values) and by the node's final report. A
-- database of an older Tide simply has no rows: its steps print blank
-- usage fields, as Slurm's do for steps it did not measure.
CREATE TABLE usage (
	job_id  INTEGER NOT NULL,
	step_id INTEGER NOT NULL,
	node    TEXT    NOT NULL,
	final   INTEGER NOT NULL,
	record  TEXT    NOT NULL,
	PRIMARY KEY (job_id, step_id, node)
) WITHOUT ROWID;
