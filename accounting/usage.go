package accounting

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// A final report is never replaced by a running one: a node's last
// running sample can reach the controller after the step's end (two
// syncs in flight).
const sqlUpsertUsage = `INSERT INTO usage (job_id, step_id, node, final, record)
	VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (job_id, step_id, node) DO UPDATE SET final = excluded.final, record = excluded.record
	WHERE excluded.final >= usage.final`

// writeUsage upserts node usage reports inside a Batch's transaction.
func (d *driverStmts) writeUsage(us []api.NodeUsage) error {
	for i := range us {
		u := &us[i]
		id, err := sqlID(u.JobID)
		if err != nil {
			return fmt.Errorf("save usage: %w", err)
		}
		if u.Node == "" {
			return fmt.Errorf("save usage of job %d: %w", u.JobID, api.Invalid("usage report without a node"))
		}
		rec := u.AppendJSON(nil)
		final := int64(0)
		if u.Final {
			final = 1
		}
		if err := d.exec(d.upsertUsage, id, int64(u.StepID), u.Node, final, rec); err != nil {
			return fmt.Errorf("save usage of step %d.%d on %s: %w", u.JobID, u.StepID, u.Node, err)
		}
	}
	return nil
}

// Usage returns the stored node reports of the given jobs' steps, by
// job, step and node.
func (s *Store) Usage(ctx context.Context, jobIDs []uint64) ([]api.NodeUsage, error) {
	args := make([]any, 0, len(jobIDs))
	for _, j := range jobIDs {
		id, err := sqlID(j)
		if err != nil {
			return nil, err
		}
		args = append(args, id)
	}
	var out []api.NodeUsage
	for len(args) > 0 {
		n := min(len(args), 500)
		chunk := args[:n]
		args = args[n:]
		q := `SELECT record FROM usage WHERE job_id IN (?` + strings.Repeat(",?", len(chunk)-1) + `) ORDER BY job_id, step_id, node`
		rows, err := s.r.QueryContext(ctx, q, chunk...)
		if err != nil {
			return nil, fmt.Errorf("query usage: %w", err)
		}
		for rows.Next() {
			var rec []byte
			if err := rows.Scan(&rec); err != nil {
				rows.Close()
				return nil, fmt.Errorf("query usage: %w", err)
			}
			var u api.NodeUsage
			if err := json.Unmarshal(rec, &u); err != nil {
				rows.Close()
				return nil, fmt.Errorf("decode usage: %w", err)
			}
			out = append(out, u)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("query usage: %w", err)
		}
	}
	return out, nil
}
