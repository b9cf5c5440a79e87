package accounting

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

const sqlUpsertStep = `INSERT INTO steps (job_id, step_id, state, start_time, end_time, record)
	VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (job_id, step_id) DO UPDATE SET state = excluded.state,
		start_time = excluded.start_time, end_time = excluded.end_time, record = excluded.record`

// writeSteps upserts step records inside a Batch's transaction.
func (d *driverStmts) writeSteps(steps []api.StepRecord) error {
	for i := range steps {
		s := steps[i]
		id, err := sqlID(s.JobID)
		if err != nil {
			return fmt.Errorf("save step: %w", err)
		}
		s.Start, s.End = utc(s.Start), utc(s.End)
		rec, err := json.Marshal(&s)
		if err != nil {
			return fmt.Errorf("encode step %d.%d: %w", s.JobID, s.StepID, err)
		}
		if err := d.exec(d.upsertStep, id, int64(s.StepID), string(s.State), nanos(s.Start), nanos(s.End), rec); err != nil {
			return fmt.Errorf("save step %d.%d: %w", s.JobID, s.StepID, err)
		}
	}
	return nil
}

// NextStepID returns the id the job's next step gets: one above its
// highest stored step, 0 for its first.
func (s *Store) NextStepID(ctx context.Context, jobID uint64) (uint32, error) {
	id, err := sqlID(jobID)
	if err != nil {
		return 0, err
	}
	var next int64
	if err := s.w.QueryRowContext(ctx, s.q(`SELECT COALESCE(MAX(step_id) + 1, 0) FROM steps WHERE job_id = ?`), id).Scan(&next); err != nil {
		return 0, fmt.Errorf("next step id of job %d: %w", jobID, err)
	}
	return uint32(next), nil
}

// Step returns one step (api.ErrNotFound when unknown).
func (s *Store) Step(ctx context.Context, jobID uint64, stepID uint32) (api.StepRecord, error) {
	id, err := sqlID(jobID)
	if err != nil {
		return api.StepRecord{}, err
	}
	var rec []byte
	err = s.w.QueryRowContext(ctx, s.q(`SELECT record FROM steps WHERE job_id = ? AND step_id = ?`), id, int64(stepID)).Scan(&rec)
	if err == sql.ErrNoRows {
		return api.StepRecord{}, api.Errorf(api.ErrNotFound, "Invalid job step specified: %d.%d", jobID, stepID)
	}
	if err != nil {
		return api.StepRecord{}, fmt.Errorf("load step %d.%d: %w", jobID, stepID, err)
	}
	var st api.StepRecord
	if err := json.Unmarshal(rec, &st); err != nil {
		return api.StepRecord{}, fmt.Errorf("decode step %d.%d: %w", jobID, stepID, err)
	}
	return st, nil
}

// Steps returns the steps of the given jobs, by job and step id.
func (s *Store) Steps(ctx context.Context, jobIDs []uint64) ([]api.StepRecord, error) {
	return jobRecords[api.StepRecord](ctx, s, "steps", "job_id, step_id", "step", jobIDs)
}

// jobRecords reads the JSON records that table holds for jobIDs, in
// order, decoded as T; what names one record in errors. SQLite allows
// 32766 parameters; callers ask for far fewer jobs, but it chunks anyway.
func jobRecords[T any](ctx context.Context, s *Store, table, order, what string, jobIDs []uint64) ([]T, error) {
	if len(jobIDs) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(jobIDs))
	for _, j := range jobIDs {
		id, err := sqlID(j)
		if err != nil {
			return nil, err
		}
		args = append(args, id)
	}
	var out []T
	for len(args) > 0 {
		n := min(len(args), 500)
		chunk := args[:n]
		args = args[n:]
		q := `SELECT record FROM ` + table + ` WHERE job_id IN (?` + strings.Repeat(",?", len(chunk)-1) + `) ORDER BY ` + order
		// Not cached: the text differs with the chunk's length.
		if s.dialect == postgresDialect {
			q = rebind(q)
		}
		rows, err := s.r.QueryContext(ctx, q, chunk...)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", table, err)
		}
		for rows.Next() {
			var rec []byte
			if err := rows.Scan(&rec); err != nil {
				rows.Close()
				return nil, fmt.Errorf("query %s: %w", table, err)
			}
			var v T
			if err := json.Unmarshal(rec, &v); err != nil {
				rows.Close()
				return nil, fmt.Errorf("decode %s: %w", what, err)
			}
			out = append(out, v)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", table, err)
		}
	}
	return out, nil
}
