-- Job steps (srun): one row per step, with the whole api.StepRecord as
-- JSON. Steps are written when the controller grants them (RUNNING) and
-- again when srun reports their end.
CREATE TABLE steps (
	job_id     INTEGER NOT NULL,
	step_id    INTEGER NOT NULL,
	state      TEXT    NOT NULL,
	start_time INTEGER NOT NULL,
	end_time   INTEGER NOT NULL,
	record     TEXT    NOT NULL,
	PRIMARY KEY (job_id, step_id)
);
