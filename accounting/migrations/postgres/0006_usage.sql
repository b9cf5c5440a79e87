-- PostgreSQL text of 0006_usage.sql.
CREATE TABLE usage (
	job_id  BIGINT NOT NULL,
	step_id BIGINT NOT NULL,
	node    TEXT   NOT NULL,
	final   BIGINT NOT NULL,
	record  TEXT   NOT NULL,
	PRIMARY KEY (job_id, step_id, node)
);
