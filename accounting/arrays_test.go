package accounting

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

// arrayJobs stores array 10 as the controller leaves it after two of
// its tasks started: the meta record 10 (tasks 2-4 pending) and tasks 0
// and 1 split off as jobs 11 and 12, plus an unrelated job 13.
func arrayJobs(t *testing.T, s *Store) {
	t.Helper()
	meta := makeJob(10).obj()
	meta.Array, meta.ArrayJobID, meta.ArrayPending = "0-4", 10, api.NewTaskSet([]int{2, 3, 4})
	var tasks []*api.Job
	for i, id := range []uint64{11, 12} {
		j := makeJob(id).running(at(1)).obj()
		j.Script, j.Environment = "", nil
		j.Array, j.ArrayJobID, j.ArrayTaskID = "0-4", 10, i
		tasks = append(tasks, j)
	}
	mustWrite(t, s, &Batch{NewJobs: []*api.Job{meta, makeJob(13).obj()}})
	// Split tasks are written as updates, never with a spool.
	mustWrite(t, s, &Batch{Jobs: tasks})
}

func TestQueryArrayJobs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.openNew(t)
		arrayJobs(t, s)
		tests := []struct {
			name string
			f    api.JobFilter
			want []uint64
		}{
			{name: "array id selects every task", f: api.JobFilter{IDs: []uint64{10}}, want: []uint64{10, 11, 12}},
			{name: "task id of a split task", f: api.JobFilter{IDs: []uint64{12}}, want: []uint64{12}},
			{name: "started task", f: api.JobFilter{Tasks: []api.TaskRef{{JobID: 10, Task: 1}}}, want: []uint64{12}},
			{name: "pending task is on the meta record", f: api.JobFilter{Tasks: []api.TaskRef{{JobID: 10, Task: 3}}}, want: []uint64{10}},
			{name: "task and job", f: api.JobFilter{IDs: []uint64{13}, Tasks: []api.TaskRef{{JobID: 10, Task: 0}}}, want: []uint64{11, 13}},
			{name: "unknown task", f: api.JobFilter{Tasks: []api.TaskRef{{JobID: 10, Task: 9}}}, want: []uint64{}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.QueryJobs(context.Background(), tt.f)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
					t.Errorf("ids (-want +got):\n%s", diff)
				}
			})
		}
	})
}

func TestSpoolOfArrayTask(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.openNew(t)
		arrayJobs(t, s)
		ctx := context.Background()
		want, _, err := s.Spool(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		got, env, err := s.Spool(ctx, 12)
		if err != nil || got != want || len(env) == 0 {
			t.Fatalf("task spool = %q %v %v, want the array's %q", got, env, err, want)
		}
		if _, _, err := s.Spool(ctx, 99); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("unknown job: %v", err)
		}
	})
}

// TestArraySpoolOutlivesMeta: the meta record may end (its last task
// failed) while a task split off earlier still runs and may be
// requeued; the array's script must stay.
func TestArraySpoolOutlivesMeta(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.openNew(t)
		ctx := context.Background()
		meta := makeJob(20).ended(api.StateFailed, at(5)).obj()
		meta.ArrayJobID, meta.ArrayTaskID = 20, 1
		task := makeJob(21).running(at(1)).obj()
		task.Script, task.Environment, task.ArrayJobID = "", nil, 20
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{meta}})
		mustWrite(t, s, &Batch{Jobs: []*api.Job{task}})
		if n, err := s.PurgeSpool(ctx, at(100)); err != nil || n != 0 {
			t.Fatalf("purged %d, %v while a task runs", n, err)
		}
		if n, err := s.PurgeJobs(ctx, at(100)); err != nil || n != 0 {
			t.Fatalf("purged %d jobs, %v while a task runs", n, err)
		}
		task.State, task.EndTime = api.StateCompleted, at(6)
		mustWrite(t, s, &Batch{Jobs: []*api.Job{task}})
		if n, err := s.PurgeSpool(ctx, at(100)); err != nil || n != 1 {
			t.Fatalf("purged %d, %v after the array ended", n, err)
		}
	})
}

// TestMigrateAddsArrayColumn opens a database written by schema 1 and
// checks that its jobs gain array_job_id 0 and stay queryable.
func TestMigrateAddsArrayColumn(t *testing.T) {
	s := openOldSchema(t, 1,
		`INSERT INTO jobs (id, "user", uid, name, "partition", account, state, submit_time, eligible_time,
			start_time, end_time, record) VALUES (5, 'alice', 1000, 'old', 'gpu', '', 'COMPLETED', 1, 1, 1, 2,
			'{"job_id":5,"name":"old","state":"COMPLETED"}')`)
	got, err := s.QueryJobs(context.Background(), api.JobFilter{IDs: []uint64{5}})
	if err != nil || len(got) != 1 || got[0].Name != "old" {
		t.Fatalf("old job after migration: %+v %v", got, err)
	}
	var arr int64
	if err := s.r.QueryRow(`SELECT array_job_id FROM jobs WHERE id = 5`).Scan(&arr); err != nil || arr != 0 {
		t.Fatalf("array_job_id = %d, %v", arr, err)
	}
}

// TestMigratePlainRowids opens a database written by schema 3, whose
// events and audit numbered rows with AUTOINCREMENT, and checks that
// their rows and ids survive and that new rows follow them.
func TestMigratePlainRowids(t *testing.T) {
	s := openOldSchema(t, 3,
		`INSERT INTO events (id, job_id, time, kind, state, reason, message, actor) VALUES
			(4, 5, 1, 'submit', 'PENDING', '', '', 'alice'), (9, 5, 2, 'start', 'RUNNING', '', '', 'tidectld')`,
		`INSERT INTO audit (id, time, uid, "user", action, target, detail) VALUES (3, 1, 1000, 'alice', 'submit', 'job 5', '')`)
	ctx := context.Background()
	if err := s.Write(ctx, &Batch{
		Events: []api.Event{{JobID: 5, Time: time.Unix(0, 3), Kind: api.EventEnd, State: api.StateCompleted}},
		Audit:  []api.AuditRecord{{Time: time.Unix(0, 2), UID: 1000, User: "alice", Action: "cancel", Target: "job 5"}},
	}); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	rows, err := s.r.Query(`SELECT id FROM events WHERE job_id = 5 ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) != 3 || ids[0] != 4 || ids[1] != 9 || ids[2] <= 9 {
		t.Errorf("event ids after the migration = %v, want 4 9 and a larger one", ids)
	}
	var audit, seq int
	if err := s.r.QueryRow(`SELECT count(*) FROM audit WHERE id > 3`).Scan(&audit); err != nil || audit != 1 {
		t.Errorf("new audit rows after id 3 = %d, %v", audit, err)
	}
	if err := s.r.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if seq != 0 {
		var left int
		if err := s.r.QueryRow(`SELECT count(*) FROM sqlite_sequence`).Scan(&left); err != nil || left != 0 {
			t.Errorf("sqlite_sequence rows left = %d, %v", left, err)
		}
	}
	evs, err := s.Events(ctx, 5)
	if err != nil || len(evs) != 3 || evs[2].Kind != api.EventEnd {
		t.Errorf("Events(5) = %+v, %v", evs, err)
	}
}

// TestMigrateClusteredEvents opens a database written by schema 4:
// the trail keeps its order per job, new events number on within their
// job, and the end-time index no longer holds live jobs.
func TestMigrateClusteredEvents(t *testing.T) {
	s := openOldSchema(t, 4,
		`INSERT INTO events (id, job_id, time, kind, state, reason, message, actor) VALUES
			(4, 5, 1, 'submit', 'PENDING', '', '', 'alice'), (7, 6, 1, 'submit', 'PENDING', '', '', 'bob'),
			(9, 5, 2, 'start', 'RUNNING', '', '', 'tidectld')`)
	ctx := context.Background()
	if err := s.Write(ctx, &Batch{Events: []api.Event{
		{JobID: 5, Time: time.Unix(0, 3), Kind: api.EventEnd, State: api.StateCompleted},
		{JobID: 7, Time: time.Unix(0, 3), Kind: api.EventSubmit, State: api.StatePending},
	}}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, 5)
	if err != nil || len(evs) != 3 || evs[0].Kind != api.EventSubmit || evs[1].Kind != api.EventStart || evs[2].Kind != api.EventEnd {
		t.Errorf("Events(5) = %+v, %v; want submit, start, end", evs, err)
	}
	var id int
	if err := s.r.QueryRow(`SELECT id FROM events WHERE job_id = 7`).Scan(&id); err != nil || id != 1 {
		t.Errorf("first event of a new job has id %d, %v; want 1", id, err)
	}
	// A live job (end_time 0) has no entry in the end-time index.
	now := time.Unix(100, 0)
	live := &api.Job{ID: 8, State: api.StatePending, SubmitTime: now}
	if err := s.Write(ctx, &Batch{NewJobs: []*api.Job{live}}); err != nil {
		t.Fatal(err)
	}
	var def string
	if err := s.r.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'jobs_end_time'`).Scan(&def); err != nil ||
		!strings.Contains(def, "WHERE end_time > 0") {
		t.Errorf("jobs_end_time = %q, %v; want a partial index on ended jobs", def, err)
	}
	if jobs, err := s.LoadJobs(ctx, now.Add(-time.Hour)); err != nil || len(jobs) != 1 {
		t.Errorf("LoadJobs = %d jobs, %v; want the live one", len(jobs), err)
	}
}

// openOldSchema writes a database at schema version, runs stmts in it
// and opens it with Open, which migrates it to the newest schema.
func openOldSchema(t *testing.T, version int, stmts ...string) *Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite3", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		t.Fatal(err)
	}
	all := []string{`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`}
	for _, m := range ms[:version] {
		all = append(all, m.sql, fmt.Sprintf(`INSERT INTO schema_version VALUES (%d, 0)`, m.version))
	}
	for _, q := range append(all, stmts...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
