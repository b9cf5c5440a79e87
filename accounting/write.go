package accounting

import (
	"bytes"
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/jsonfast"
)

// Batch is one transaction: everything in it commits together or not at
// all. The controller collects what one request or one scheduling pass
// changed into a Batch so that a crash never leaves, say, a started job
// without its start event. Write applies the parts in field order.
type Batch struct {
	// NewJobs are inserted; Job.ID is already assigned by the controller
	// (monotonic). Script and Environment go to the spool, not the jobs
	// table. A duplicate id fails the whole batch.
	NewJobs []*api.Job
	// Jobs upsert each job's current record (state change, start, end,
	// hold, update…). They never touch the spool. A job already stored
	// keeps the user, uid, submit time and array id it was first stored
	// with: those never change.
	Jobs []*api.Job
	// Events are appended to the trail.
	Events []api.Event
	// Audit is appended to the audit log.
	Audit []api.AuditRecord
	// Nodes upsert operator-set node state (drain flag, reason, reason
	// user/time), keyed by name. The whole api.Node is stored as given.
	Nodes []api.Node
	// MaxJobID, if above the stored high-water mark, replaces it; ids are
	// never reused, even after the jobs table is purged.
	MaxJobID uint64
	// Steps upsert job step records (srun), keyed by job and step id.
	Steps []api.StepRecord
	// Usage upserts what nodes measured of steps (usage.go), keyed by
	// job, step and node; a running report never replaces a final one.
	Usage []api.NodeUsage
}

// Empty reports whether b would write nothing.
func (b *Batch) Empty() bool {
	return b == nil || len(b.NewJobs) == 0 && len(b.Jobs) == 0 && len(b.Events) == 0 &&
		len(b.Audit) == 0 && len(b.Nodes) == 0 && b.MaxJobID == 0 && len(b.Steps) == 0 &&
		len(b.Usage) == 0
}

// Write commits b in one transaction; on any error nothing of b is
// stored. An empty or nil batch is a no-op.
func (s *Store) Write(ctx context.Context, b *Batch) error {
	if b.Empty() {
		return nil
	}
	if err := s.write(ctx, b); err != nil {
		return fmt.Errorf("write batch: %w", err)
	}
	return nil
}

func (s *Store) write(ctx context.Context, b *Batch) error {
	return s.inTxn(ctx, func(d *driverStmts) error { return d.apply(b) })
}

// apply writes b's parts in field order inside the open transaction.
func (d *driverStmts) apply(b *Batch) error {
	for _, j := range b.NewJobs {
		if err := d.execJob(d.insertJob, j); err != nil {
			return err
		}
		env, err := json.Marshal(j.Environment) // nil stays null
		if err != nil {
			return fmt.Errorf("encode environment of job %d: %w", j.ID, err)
		}
		var script driver.Value = j.Script
		if d.dialect == postgresDialect {
			script = []byte(j.Script) // a BYTEA column (migration 0001)
		}
		if err := d.exec(d.insertSpool, int64(j.ID), script, env); err != nil {
			return fmt.Errorf("spool job %d: %w", j.ID, err)
		}
	}
	for _, j := range b.Jobs {
		st := d.upsertJob
		// A job without an end time that was never requeued has never
		// had one stored either (requeue clears it).
		if j != nil && j.EndTime.IsZero() && j.Restarts == 0 {
			st = d.upsertLive
		}
		if err := d.execJob(st, j); err != nil {
			return err
		}
	}
	for _, e := range b.Events {
		id, err := sqlID(e.JobID)
		if err != nil {
			return fmt.Errorf("event %q: %w", e.Kind, err)
		}
		if err := d.exec(d.insertEvent, id, nanos(e.Time), e.Kind, string(e.State),
			e.Reason, e.Message, e.Actor); err != nil {
			return fmt.Errorf("append event %q of job %d: %w", e.Kind, e.JobID, err)
		}
	}
	for _, a := range b.Audit {
		if err := d.exec(d.insertAudit, nanos(a.Time), int64(a.UID), a.User, a.Action,
			a.Target, a.Detail); err != nil {
			return fmt.Errorf("append audit %q on %q: %w", a.Action, a.Target, err)
		}
	}
	for i := range b.Nodes {
		n := b.Nodes[i] // a copy: its times are normalised below
		if n.Name == "" {
			return fmt.Errorf("save node: %w", api.Invalid("node without a name"))
		}
		n.ReasonTime, n.BootTime = utc(n.ReasonTime), utc(n.BootTime)
		n.Registered, n.LastSeen = utc(n.Registered), utc(n.LastSeen)
		rec, err := json.Marshal(&n)
		if err != nil {
			return fmt.Errorf("encode node %s: %w", n.Name, err)
		}
		if err := d.exec(d.upsertNode, n.Name, rec); err != nil {
			return fmt.Errorf("save node %s: %w", n.Name, err)
		}
	}
	// The mark only matters once the job holding the largest id is
	// purged (PurgeJobs raises it then): a batch that inserts that job
	// need not write it too, which spares every submission a page.
	if b.MaxJobID > 0 && !insertsUpTo(b.NewJobs, b.MaxJobID) {
		id, err := sqlID(b.MaxJobID)
		if err != nil {
			return fmt.Errorf("high-water mark: %w", err)
		}
		if err := d.exec(d.bumpMaxID, id); err != nil {
			return fmt.Errorf("store high-water mark %d: %w", b.MaxJobID, err)
		}
	}
	if err := d.writeSteps(b.Steps); err != nil {
		return err
	}
	return d.writeUsage(b.Usage)
}

// insertsUpTo reports whether jobs holds a job with an id of at least id.
func insertsUpTo(jobs []*api.Job, id uint64) bool {
	for _, j := range jobs {
		if j != nil && j.ID >= id {
			return true
		}
	}
	return false
}

// execJob runs the insert or upsert statement st for j.
func (d *driverStmts) execJob(st driver.Stmt, j *api.Job) error {
	if j == nil {
		return fmt.Errorf("save job: %w", api.Invalid("nil job"))
	}
	id, err := sqlID(j.ID)
	if err != nil {
		return fmt.Errorf("save job: %w", err)
	}
	rec, err := appendRecord(d.rec[:0], j)
	if err != nil {
		return fmt.Errorf("encode job %d: %w", j.ID, err)
	}
	d.rec = rec
	if err := d.exec(st, id, j.User, int64(j.UserID), j.Name, j.Partition, j.Account,
		string(j.State), nanos(j.SubmitTime), nanos(j.EligibleTime), nanos(j.StartTime),
		nanos(j.EndTime), rec, int64(min(j.ArrayJobID, math.MaxInt64))); err != nil {
		return fmt.Errorf("save job %d: %w", j.ID, err)
	}
	return nil
}

// jobRecord is the JSON of the record column: the job's fields, then
// SpecPriority. It was added when api.Job's EffPriority and the embedded
// JobSpec.Priority shared the JSON name "priority", so that encoding/json
// dropped the spec's; they no longer clash, and a record now carries the
// spec's priority twice, but decodeJob still takes it from here.
type jobRecord struct {
	*api.Job
	SpecPriority uint32 `json:"spec_priority,omitempty"`
}

// encodeJob is the record column: j as JSON without the spooled script
// and environment, its times in UTC. j itself is not modified.
//
// It writes the bytes json.Marshal(jobRecord{...}) would, by hand (see
// api.Job.AppendJSON): every job's record is written at submit, start
// and end, and encoding/json's reflection over Job was a visible share
// of the controller's CPU in a storm of small jobs.
// TestEncodeJobMatchesEncodingJSON holds it to encoding/json's bytes.
func encodeJob(j *api.Job) ([]byte, error) {
	b, err := appendRecord(nil, j)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// appendRecord appends encodeJob's record of j to b (the writer reuses
// one buffer: SQLite copies what it binds).
func appendRecord(b []byte, j *api.Job) ([]byte, error) {
	c := *j
	c.Script, c.Environment = "", nil
	c.SubmitTime, c.EligibleTime = utc(c.SubmitTime), utc(c.EligibleTime)
	c.StartTime, c.EndTime = utc(c.StartTime), utc(c.EndTime)
	c.LastSchedEval, c.BeginTime = utc(c.LastSchedEval), utc(c.BeginTime)
	n0 := len(b)
	b, err := c.AppendJSON(b)
	if err != nil {
		return b[:n0], err
	}
	// jobRecord's own field follows the embedded job's: it goes inside
	// the job's closing brace.
	if c.JobSpec.Priority != 0 {
		b = append(b[:len(b)-1], `,"spec_priority":`...)
		b = strconv.AppendUint(b, uint64(c.JobSpec.Priority), 10)
		b = append(b, '}')
	}
	return b, nil
}

// decodeJob is the inverse of encodeJob, decoding into j, a zero job.
//
// A record as appendRecord writes it is read by hand (api.DecodeJobJSON):
// encoding/json's reflection was two thirds of a controller's recovery
// of 100,000 pending jobs. Anything else (a record of an older version,
// one edited by hand) goes to encoding/json whole, as before.
func decodeJob(rec []byte, j *api.Job) error {
	if readRecord(rec, j) {
		return nil
	}
	*j = api.Job{}
	r := jobRecord{Job: j}
	if err := json.Unmarshal(rec, &r); err != nil {
		return err
	}
	j.JobSpec.Priority = r.SpecPriority
	return nil
}

// readRecord decodes a record as appendRecord writes it into the zero
// *j, by hand; false leaves *j to be zeroed and the record to
// encoding/json.
func readRecord(rec []byte, j *api.Job) bool {
	body, prio, ok := splitRecord(rec)
	if !ok {
		return false
	}
	d := jsonfast.New(body)
	if !api.DecodeJobJSON(d, j) || !d.End() {
		return false
	}
	j.JobSpec.Priority = prio
	return true
}

// specPriorityKey is where appendRecord puts jobRecord's own field: last,
// inside the job's closing brace.
const specPriorityKey = `,"spec_priority":`

// splitRecord splits a record into the job's object and jobRecord's
// SpecPriority (0 when the record has none, as omitempty leaves it).
// The object is a copy when the record has the field (its bytes up to
// the field and a closing brace). ok is false when the record does not
// end as appendRecord ends it.
func splitRecord(rec []byte) (job []byte, prio uint32, ok bool) {
	if len(rec) < 2 || rec[len(rec)-1] != '}' {
		return nil, 0, false
	}
	i := len(rec) - 1
	for i > 0 && rec[i-1] >= '0' && rec[i-1] <= '9' {
		i--
	}
	digits := rec[i : len(rec)-1]
	if len(digits) == 0 || !bytes.HasSuffix(rec[:i], []byte(specPriorityKey)) {
		// No trailing field (or only something like it, which the
		// reader refuses as it would any unknown key).
		return rec, 0, true
	}
	if len(digits) > 1 && digits[0] == '0' {
		return nil, 0, false // not a number appendRecord writes
	}
	p, err := strconv.ParseUint(string(digits), 10, 32)
	if err != nil {
		return nil, 0, false
	}
	start := i - len(specPriorityKey)
	job = make([]byte, 0, start+1)
	job = append(append(job, rec[:start]...), '}')
	return job, uint32(p), true
}

// sqlID converts a job id to SQLite's signed 64-bit integer; 0 is
// refused because the controller never assigns it.
func sqlID(id uint64) (int64, error) {
	if id == 0 || id > math.MaxInt64 {
		return 0, api.Invalid("invalid job id %d", id)
	}
	return int64(id), nil
}
