package accounting

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

func usageOf(job uint64, step uint32, node string, final bool, cpu uint64) api.NodeUsage {
	return api.NodeUsage{JobID: job, StepID: step, Node: node, UserID: 1000, Final: final,
		Cgroup: &api.CgroupTotals{UserUsec: cpu + 5, HasIO: true, ReadBytes: 7},
		Tasks:  []api.TaskUsage{{Task: 0, UserUsec: cpu, RSS: 4 << 20, VMSize: 9 << 20}}}
}

// TestUsageRoundTrip stores node reports and reads them back by job,
// step and node; a running report replaces a running one, a final one
// replaces anything, and a late running report never replaces a final
// one.
func TestUsageRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.openNew(t)
		ctx := context.Background()
		mustWrite(t, s, &Batch{Usage: []api.NodeUsage{
			usageOf(7, api.BatchStepID, "gpu01", false, 10),
			usageOf(7, 0, "gpu02", false, 20),
			usageOf(7, 0, "gpu01", false, 30),
			usageOf(8, 1, "gpu01", true, 40),
		}})
		mustWrite(t, s, &Batch{Usage: []api.NodeUsage{usageOf(7, 0, "gpu01", false, 31)}})
		mustWrite(t, s, &Batch{Usage: []api.NodeUsage{usageOf(7, 0, "gpu02", true, 50)}})
		mustWrite(t, s, &Batch{Usage: []api.NodeUsage{usageOf(7, 0, "gpu02", false, 60)}}) // late: ignored
		got, err := s.Usage(ctx, []uint64{7, 8, 9})
		if err != nil {
			t.Fatal(err)
		}
		want := []api.NodeUsage{
			usageOf(7, 0, "gpu01", false, 31),
			usageOf(7, 0, "gpu02", true, 50),
			usageOf(7, api.BatchStepID, "gpu01", false, 10),
			usageOf(8, 1, "gpu01", true, 40),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Usage (-want +got):\n%s", diff)
		}
		if got, err := s.Usage(ctx, nil); err != nil || len(got) != 0 {
			t.Errorf("Usage of no jobs = %v, %v", got, err)
		}
		if (&Batch{Usage: []api.NodeUsage{{}}}).Empty() {
			t.Error("a batch with usage is empty")
		}
	})
}

// TestUsageRejectsNodeless: a report without its node cannot be keyed;
// the whole batch fails and nothing of it is stored.
func TestUsageRejectsNodeless(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.openNew(t)
		err := s.Write(context.Background(), &Batch{Jobs: []*api.Job{makeJob(1).obj()}, Usage: []api.NodeUsage{{JobID: 1}}})
		if err == nil {
			t.Fatal("a nodeless usage report was stored")
		}
		if js, _ := s.QueryJobs(context.Background(), api.JobFilter{All: true}); len(js) != 0 {
			t.Errorf("the failed batch stored %d jobs", len(js))
		}
	})
}

// TestPurgeTakesUsageAndSteps: purged jobs leave no steps or usage
// behind; younger jobs keep theirs.
func TestPurgeTakesUsageAndSteps(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.openNew(t)
		ctx := context.Background()
		old := makeJob(1).ended(api.StateCompleted, at(10)).obj()
		young := makeJob(2).ended(api.StateCompleted, at(100)).obj()
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{old, young},
			Steps: []api.StepRecord{{JobID: 1, StepID: 0, State: api.StateCompleted}, {JobID: 2, StepID: 0, State: api.StateCompleted}},
			Usage: []api.NodeUsage{usageOf(1, 0, "n1", true, 1), usageOf(2, 0, "n1", true, 2)}})
		if n, err := s.PurgeJobs(ctx, at(50)); err != nil || n != 1 {
			t.Fatalf("PurgeJobs = %d, %v; want 1", n, err)
		}
		us, err := s.Usage(ctx, []uint64{1, 2})
		if err != nil || len(us) != 1 || us[0].JobID != 2 {
			t.Errorf("usage after purge = %+v, %v; want job 2's only", us, err)
		}
		st, err := s.Steps(ctx, []uint64{1, 2})
		if err != nil || len(st) != 1 || st[0].JobID != 2 {
			t.Errorf("steps after purge = %+v, %v; want job 2's only", st, err)
		}
	})
}

// TestMigrateKeepsOlderDatabase builds a database file as the Tide
// before usage accounting wrote it (schema 5, with a job and a step),
// then opens it: the migration adds the usage table, the old records
// read as before, and usage can be stored for the old job.
func TestMigrateKeepsOlderDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tide.db")
	ms, err := loadMigrations(migrationFS)
	if err != nil {
		t.Fatal(err)
	}
	const oldVersion = 5
	if len(ms) <= oldVersion || ms[oldVersion].name != "0006_usage.sql" {
		t.Fatalf("migration %d is %q, want 0006_usage.sql", oldVersion+1, ms[min(oldVersion, len(ms)-1)].name)
	}
	raw, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:oldVersion] {
		if _, err := raw.Exec(m.sql); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if _, err := raw.Exec(`INSERT INTO schema_version VALUES (?, 0)`, m.version); err != nil {
			t.Fatal(err)
		}
	}
	// What the older Tide wrote: a job and its step, with the
	// statements of that schema.
	job := makeJob(3).ended(api.StateCompleted, at(5)).obj()
	rec, err := appendRecord(nil, job)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(sqlInsertJob, 3, job.User, int64(job.UserID), job.Name, job.Partition, job.Account,
		string(job.State), nanos(job.SubmitTime), nanos(job.EligibleTime), nanos(job.StartTime),
		nanos(job.EndTime), rec, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(sqlUpsertStep, 3, 0, string(api.StateCompleted), nanos(at(1)), nanos(at(2)),
		`{"job_id":3,"step_id":0,"name":"hostname","state":"COMPLETED","exit":{"code":0,"signal":0},"user_id":1000,"start":"2025-03-14T08:27:53Z","nodes":["n1"],"ntasks":1,"cpus":1}`); err != nil {
		t.Fatal(err)
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open of a schema %d database: %v", oldVersion, err)
	}
	defer s.Close()
	ctx := context.Background()
	var v int
	if err := s.r.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion() {
		t.Fatalf("schema version %d (%v), want %d", v, err, SchemaVersion())
	}
	js, err := s.QueryJobs(ctx, api.JobFilter{IDs: []uint64{3}, All: true})
	if err != nil || len(js) != 1 || js[0].Name != job.Name || js[0].State != api.StateCompleted {
		t.Fatalf("old job after migration: %+v, %v", js, err)
	}
	steps, err := s.Steps(ctx, []uint64{3})
	if err != nil || len(steps) != 1 || steps[0].Name != "hostname" {
		t.Fatalf("old step after migration: %+v, %v", steps, err)
	}
	if us, err := s.Usage(ctx, []uint64{3}); err != nil || len(us) != 0 {
		t.Fatalf("usage of an old job = %+v, %v; want none", us, err)
	}
	mustWrite(t, s, &Batch{Usage: []api.NodeUsage{usageOf(3, 0, "n1", true, 9)}})
	if us, err := s.Usage(ctx, []uint64{3}); err != nil || len(us) != 1 || us[0].Tasks[0].UserUsec != 9 {
		t.Fatalf("usage stored after migration = %+v, %v", us, err)
	}
}
