package accounting

import (
	"context"
	"fmt"

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
	return jobRecords[api.NodeUsage](ctx, s, "usage", "job_id, step_id, node", "usage", jobIDs)
}
