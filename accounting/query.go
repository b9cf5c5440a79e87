package accounting

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// terminalStates is the SQL list of terminal state words, derived from
// api so that a new state cannot be forgotten here.
var terminalStates = func() string {
	var q []string
	for _, s := range api.AllJobStates {
		if s.Terminal() {
			q = append(q, "'"+strings.ReplaceAll(string(s), "'", "''")+"'")
		}
	}
	return strings.Join(q, ", ")
}()

// LastJobID returns the highest job id ever used: the larger of the
// stored high-water mark and the largest id in the jobs table. The
// controller continues numbering after it.
func (s *Store) LastJobID(ctx context.Context) (uint64, error) {
	var id int64
	q := `SELECT max(
		COALESCE((SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?), 0),
		COALESCE((SELECT max(id) FROM jobs), 0))`
	if s.dialect == postgresDialect {
		q = `SELECT GREATEST(
		COALESCE((SELECT CAST(value AS BIGINT) FROM meta WHERE key = $1), 0),
		COALESCE((SELECT max(id) FROM jobs), 0))`
	}
	err := s.r.QueryRowContext(ctx, q, metaMaxJobID).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("last job id: %w", err)
	}
	return uint64(id), nil
}

// LoadJobs returns every non-terminal job plus the terminal jobs that
// ended at or after since (the controller shows recently finished jobs in
// squeue for a while), sorted by id. A zero since loads every job. Script
// and Environment are not loaded, to keep the controller's memory small;
// use Spool for them.
func (s *Store) LoadJobs(ctx context.Context, since time.Time) ([]*api.Job, error) {
	// "end_time > 0" lets the partial end-time index serve the second
	// half; with no since, every job loads.
	q := `SELECT record FROM jobs
		WHERE state NOT IN (` + terminalStates + `) OR (end_time > 0 AND end_time >= ?)
		ORDER BY id`
	args := []any{nanos(since)}
	if since.IsZero() {
		q, args = `SELECT record FROM jobs ORDER BY id`, nil
	}
	rows, err := s.r.QueryContext(ctx, s.q(q), args...)
	if err != nil {
		return nil, fmt.Errorf("load jobs: %w", err)
	}
	var out []*api.Job
	err = scanJobs(rows, func() *api.Job {
		j := new(api.Job)
		out = append(out, j)
		return j
	})
	if err != nil {
		return nil, fmt.Errorf("load jobs: %w", err)
	}
	return out, nil
}

// QueryJobs serves sacct: the jobs matching f's ids, users (name or
// numeric uid), names, partitions, accounts and current states whose life
// overlaps [f.Since, f.Until] (a zero bound is open), sorted by job id.
// A job's life starts when it became eligible (its submit time if the
// controller never set EligibleTime) and lasts until its end time, or
// forever while it has none; both bounds are inclusive. f.All is ignored:
// accounting always includes finished jobs. Script and Environment are
// not included.
func (s *Store) QueryJobs(ctx context.Context, f api.JobFilter) ([]api.Job, error) {
	return s.queryJobs(ctx, "jobs", f)
}

// queryJobs is QueryJobs on table: the store's jobs, or another
// cluster's schema-qualified jobs table (QueryClusters).
func (s *Store) queryJobs(ctx context.Context, table string, f api.JobFilter) ([]api.Job, error) {
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		return nil, fmt.Errorf("query jobs: %w", api.Invalid("start time %s comes after end time %s",
			f.Since.UTC().Format(time.RFC3339), f.Until.UTC().Format(time.RFC3339)))
	}
	where, args := jobWhere(f, s.dialect)
	// Counting first sizes the slice: growing a slice of 10,000 large
	// structs 25% at a time would allocate five times its final size. The
	// count is only a hint; a commit in between does no harm.
	var n int
	if err := s.r.QueryRowContext(ctx, s.q(`SELECT count(*) FROM `+table+where), args...).Scan(&n); err != nil {
		return nil, fmt.Errorf("query jobs: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT record FROM `+table+where+` ORDER BY id`), args...)
	if err != nil {
		return nil, fmt.Errorf("query jobs: %w", err)
	}
	// Decoding straight into the slice avoids a copy of every record.
	out := make([]api.Job, 0, n)
	err = scanJobs(rows, func() *api.Job {
		out = append(out, api.Job{})
		return &out[len(out)-1]
	})
	if err != nil {
		return nil, fmt.Errorf("query jobs: %w", err)
	}
	if len(f.Tasks) > 0 {
		// The SQL selected whole arrays; keep the named tasks.
		out = slices.DeleteFunc(out, func(j api.Job) bool { return !f.MatchID(&j) })
	}
	return out, nil
}

// jobWhere translates f into a WHERE clause in SQLite's spelling of
// dialect dl. Lists are passed as one JSON array each (dialect.inList),
// so the statement has a fixed, small number of parameters however many
// ids sacct -j names.
func jobWhere(f api.JobFilter, dl dialect) (string, []any) {
	var conds []string
	var args []any
	in := func(col string, list string) {
		conds = append(conds, dl.inList(col, false))
		args = append(args, list)
	}
	if len(f.IDs) > 0 || len(f.Tasks) > 0 {
		// An id names a job or every task of an array; tasks narrow
		// down to their arrays here and to the task in QueryJobs.
		ids, arrays := make([]int64, 0, len(f.IDs)), make([]int64, 0, len(f.IDs)+len(f.Tasks))
		for _, id := range f.IDs {
			if id <= math.MaxInt64 { // larger ids cannot be stored
				ids = append(ids, int64(id))
				arrays = append(arrays, int64(id))
			}
		}
		for _, t := range f.Tasks {
			if t.JobID <= math.MaxInt64 {
				arrays = append(arrays, int64(t.JobID))
			}
		}
		conds = append(conds, `(`+dl.inList("id", true)+` OR `+dl.inList("array_job_id", true)+`)`)
		args = append(args, jsonList(ids), jsonList(arrays))
	}
	if len(f.Users) > 0 {
		uids := []int64{}
		for _, u := range f.Users {
			if n, err := strconv.ParseUint(u, 10, 32); err == nil {
				uids = append(uids, int64(n))
			}
		}
		conds = append(conds, `(`+dl.inList(`"user"`, false)+` OR `+dl.inList("uid", true)+`)`)
		args = append(args, jsonList(f.Users), jsonList(uids))
	}
	if len(f.Names) > 0 {
		in("name", jsonList(f.Names))
	}
	if len(f.Partitions) > 0 {
		in(`"partition"`, jsonList(f.Partitions))
	}
	if len(f.Accounts) > 0 {
		in("account", jsonList(f.Accounts))
	}
	if len(f.States) > 0 {
		in("state", jsonList(f.States))
	}
	if !f.Until.IsZero() {
		// The submit_time test is implied by the next one (a job is
		// never eligible before it is submitted) but can use the index.
		conds = append(conds, `submit_time <= ?`,
			`(CASE WHEN eligible_time > 0 THEN eligible_time ELSE submit_time END) <= ?`)
		args = append(args, nanos(f.Until), nanos(f.Until))
	}
	if !f.Since.IsZero() {
		conds = append(conds, `(end_time = 0 OR (end_time > 0 AND end_time >= ?))`)
		args = append(args, nanos(f.Since))
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// jsonList encodes a slice of strings or integers for json_each; such
// slices always encode.
func jsonList[T ~string | ~int64](xs []T) string {
	b, _ := json.Marshal(xs)
	return string(b)
}

// scanJobs decodes each row's record column into the job that next
// returns.
func scanJobs(rows *sql.Rows, next func() *api.Job) error {
	defer rows.Close()
	for rows.Next() {
		var rec sql.RawBytes
		if err := rows.Scan(&rec); err != nil {
			return err
		}
		if err := decodeJob(rec, next()); err != nil {
			return fmt.Errorf("decode job record: %w", err)
		}
	}
	return rows.Err()
}

// Spool returns the script and environment a job was submitted with. It
// fails with api.ErrNotFound when the job is unknown or its spool was
// purged.
func (s *Store) Spool(ctx context.Context, id uint64) (script string, env []string, err error) {
	var envJSON []byte
	// An array task split off its meta record runs the array's script.
	err = s.r.QueryRowContext(ctx, s.q(`SELECT script, env FROM spool WHERE job_id = COALESCE(
		(SELECT array_job_id FROM jobs WHERE id = ?1 AND array_job_id != 0), ?1)`), int64(id)).
		Scan(&script, &envJSON)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, fmt.Errorf("spool of job %d: %w", id, api.ErrNotFound)
	}
	if err != nil {
		return "", nil, fmt.Errorf("spool of job %d: %w", id, err)
	}
	if err := json.Unmarshal(envJSON, &env); err != nil {
		return "", nil, fmt.Errorf("spool of job %d: decode environment: %w", id, err)
	}
	return script, env, nil
}

// Events returns a job's trail in the order it was written (an empty
// slice for a job without events).
func (s *Store) Events(ctx context.Context, jobID uint64) ([]api.Event, error) {
	rows, err := s.r.QueryContext(ctx, s.q(`SELECT time, kind, state, reason, message, actor
		FROM events WHERE job_id = ? ORDER BY id`), int64(jobID))
	if err != nil {
		return nil, fmt.Errorf("events of job %d: %w", jobID, err)
	}
	defer rows.Close()
	out := []api.Event{}
	for rows.Next() {
		e := api.Event{JobID: jobID}
		var t int64
		var state string
		if err := rows.Scan(&t, &e.Kind, &state, &e.Reason, &e.Message, &e.Actor); err != nil {
			return nil, fmt.Errorf("events of job %d: %w", jobID, err)
		}
		e.Time, e.State = fromNanos(t), api.JobState(state)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events of job %d: %w", jobID, err)
	}
	return out, nil
}

// AuditLog returns the newest limit audit records, newest first; limit
// <= 0 returns them all.
func (s *Store) AuditLog(ctx context.Context, limit int) ([]api.AuditRecord, error) {
	q, args := `SELECT time, uid, "user", action, target, detail FROM audit ORDER BY id DESC`, []any(nil)
	if limit > 0 {
		q, args = q+` LIMIT ?`, []any{limit}
	}
	rows, err := s.r.QueryContext(ctx, s.q(q), args...)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	out := []api.AuditRecord{}
	for rows.Next() {
		var a api.AuditRecord
		var t, uid int64
		if err := rows.Scan(&t, &uid, &a.User, &a.Action, &a.Target, &a.Detail); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		a.Time, a.UID = fromNanos(t), uint32(uid)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return out, nil
}

// LoadNodes returns the node records saved via Batch.Nodes, sorted by
// name.
func (s *Store) LoadNodes(ctx context.Context) ([]api.Node, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT record FROM nodes ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("load nodes: %w", err)
	}
	defer rows.Close()
	out := []api.Node{}
	for rows.Next() {
		var rec sql.RawBytes
		if err := rows.Scan(&rec); err != nil {
			return nil, fmt.Errorf("load nodes: %w", err)
		}
		var n api.Node
		if err := json.Unmarshal(rec, &n); err != nil {
			return nil, fmt.Errorf("load nodes: decode record: %w", err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load nodes: %w", err)
	}
	return out, nil
}

// PurgeSpool deletes the scripts and environments of terminal jobs that
// ended before t, keeping their job rows for sacct, and returns how many
// it deleted. A requeued job is not terminal, so its script survives.
func (s *Store) PurgeSpool(ctx context.Context, before time.Time) (int, error) {
	// An array's script stays while any of its tasks may still run it
	// (a requeued task is launched again).
	res, err := s.w.ExecContext(ctx, s.q(`DELETE FROM spool WHERE job_id IN (
		SELECT id FROM jobs WHERE state IN (`+terminalStates+`) AND end_time > 0 AND end_time < ?
		AND NOT EXISTS (SELECT 1 FROM jobs t WHERE t.array_job_id = jobs.id
			AND t.state NOT IN (`+terminalStates+`)))`),
		nanos(before))
	if err != nil {
		return 0, fmt.Errorf("purge spool: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("purge spool: %w", err)
	}
	return int(n), nil
}

// PurgeJobs deletes terminal jobs that ended before t, with their spool,
// events, steps and usage, and returns how many jobs it deleted. It first raises the
// high-water mark to the largest id deleted, so ids are never reused.
func (s *Store) PurgeJobs(ctx context.Context, before time.Time) (int, error) {
	n, err := s.purgeJobs(ctx, nanos(before))
	if err != nil {
		return 0, fmt.Errorf("purge jobs: %w", err)
	}
	return n, nil
}

func (s *Store) purgeJobs(ctx context.Context, before int64) (int, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	old := `SELECT id FROM jobs WHERE state IN (` + terminalStates + `) AND end_time > 0 AND end_time < ?
		AND NOT EXISTS (SELECT 1 FROM jobs t WHERE t.array_job_id = jobs.id
			AND t.state NOT IN (` + terminalStates + `))`
	var maxID sql.NullInt64
	// PostgreSQL wants the subquery named.
	if err := tx.QueryRowContext(ctx, s.q(`SELECT max(id) FROM (`+old+`) AS old`), before).Scan(&maxID); err != nil {
		return 0, err
	}
	if !maxID.Valid {
		return 0, nil
	}
	if _, err := tx.ExecContext(ctx, s.dialect.bumpMaxID(), maxID.Int64); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM events WHERE job_id IN (`+old+`)`), before); err != nil {
		return 0, err
	}
	// Their steps and the steps' usage go with them (issue 22).
	for _, table := range []string{"steps", "usage"} {
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM `+table+` WHERE job_id IN (`+old+`)`), before); err != nil {
			return 0, err
		}
	}
	res, err := tx.ExecContext(ctx, s.q(`DELETE FROM jobs WHERE id IN (`+old+`)`), before)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return int(n), tx.Commit()
}
