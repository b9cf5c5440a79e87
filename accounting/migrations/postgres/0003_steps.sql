-- PostgreSQL text of 0003_steps.sql.
CREATE TABLE steps (
	job_id     BIGINT NOT NULL,
	step_id    BIGINT NOT NULL,
	state      TEXT   NOT NULL,
	start_time BIGINT NOT NULL,
	end_time   BIGINT NOT NULL,
	record     TEXT   NOT NULL,
	PRIMARY KEY (job_id, step_id)
);
