package accounting

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/pgtest"
)

// pg is the private PostgreSQL server of the PostgreSQL pass, started
// by the first test that needs it.
var pg pgtest.Lazy

func TestMain(m *testing.M) {
	code := m.Run()
	if err := pg.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the test PostgreSQL:", err)
		code = 1
	}
	os.Exit(code)
}

// backend is a kind of database the store runs on. The tests of the
// write and query core run on each (forEachBackend); the PostgreSQL
// pass skips when PostgreSQL is not installed.
type backend struct {
	name string
	// newDB makes a fresh, empty database and returns its location: a
	// file path for SQLite, a URL for PostgreSQL.
	newDB func(t testing.TB) string
}

var backends = []backend{
	{name: "sqlite", newDB: func(t testing.TB) string { return filepath.Join(t.TempDir(), "tide.db") }},
	{name: "postgres", newDB: func(t testing.TB) string { return pg.Database(t) }},
}

// open opens the store at loc (from newDB) and closes it when the test
// ends.
func (b backend) open(t testing.TB, loc string) *Store {
	t.Helper()
	var s *Store
	var err error
	if b.name == "sqlite" {
		s, err = Open(loc)
	} else {
		s, err = OpenURL(loc)
	}
	if err != nil {
		t.Fatalf("open %s store: %v", b.name, err)
	}
	if s.dialect.String() != b.name {
		s.Close()
		t.Fatalf("the %s backend opened a %s store", b.name, s.dialect)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// openNew opens a store on a fresh database.
func (b backend) openNew(t testing.TB) *Store {
	t.Helper()
	return b.open(t, b.newDB(t))
}

// forEachBackend runs f as a subtest per backend.
func forEachBackend(t *testing.T, f func(t *testing.T, be backend)) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) { f(t, be) })
	}
}

// t0 is the tests' reference time; a non-UTC zone and nanoseconds make
// sure the store normalises and keeps sub-second precision.
var t0 = time.Date(2025, 3, 14, 9, 26, 53, 589793238, time.FixedZone("CET", 3600))

func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

// openTest opens a store in a fresh directory (a real file, so WAL is
// exercised) and closes it when the test ends.
func openTest(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "tide.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func mustWrite(t testing.TB, s *Store, b *Batch) {
	t.Helper()
	if err := s.Write(context.Background(), b); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// jobBuilder makes jobs for tests: makeJob(1).user("bob").ended(...).obj().
type jobBuilder struct{ j api.Job }

func makeJob(id uint64) *jobBuilder {
	return &jobBuilder{j: api.Job{
		ID: id,
		JobSpec: api.JobSpec{
			Name: fmt.Sprintf("job%d", id), Partition: "gpu", Account: "research",
			Script: fmt.Sprintf("#!/bin/sh\necho %d\n", id), WorkDir: "/home/alice",
			Environment: []string{"PATH=/bin", fmt.Sprintf("N=%d", id)},
		},
		UserID: 1000, GroupID: 1000, User: "alice", Group: "alice",
		State: api.StatePending, Reason: api.ReasonPriority,
		SubmitTime: t0,
	}}
}

func (b *jobBuilder) user(name string, uid uint32) *jobBuilder {
	b.j.User, b.j.UserID = name, uid
	return b
}
func (b *jobBuilder) name(n string) *jobBuilder      { b.j.Name = n; return b }
func (b *jobBuilder) partition(p string) *jobBuilder { b.j.Partition = p; return b }
func (b *jobBuilder) account(a string) *jobBuilder   { b.j.Account = a; return b }
func (b *jobBuilder) submitted(t time.Time) *jobBuilder {
	b.j.SubmitTime = t
	return b
}
func (b *jobBuilder) eligible(t time.Time) *jobBuilder { b.j.EligibleTime = t; return b }
func (b *jobBuilder) running(start time.Time) *jobBuilder {
	b.j.State, b.j.Reason, b.j.StartTime = api.StateRunning, api.ReasonNone, start
	return b
}
func (b *jobBuilder) ended(st api.JobState, end time.Time) *jobBuilder {
	if b.j.StartTime.IsZero() {
		b.j.StartTime = b.j.SubmitTime
	}
	b.j.State, b.j.EndTime = st, end
	return b
}
func (b *jobBuilder) obj() *api.Job { j := b.j; return &j }

// fullJob sets every field of api.Job to a non-zero value, so a round
// trip proves each one survives; TestFullJobSetsEveryField keeps it
// complete when api.Job grows.
func fullJob(id uint64) *api.Job {
	return &api.Job{
		ID: id,
		JobSpec: api.JobSpec{
			Name: "train", Account: "ml", Partition: "h100", QOS: "high", Comment: "a comment",
			Script: "#!/bin/bash\n#SBATCH -N2\nsrun python train.py 'quoted' \"x\"\n", WorkDir: "/w", ScriptArgs: []string{"--lr", "0.1"}, Switches: 1, SwitchWait: 600, Comm: "model",
			SubmitDir: "/s", SubmitHost: "login1",
			Environment: []string{"A=1", "MULTI=line1\nline2", "EMPTY="},
			Nodes:       2, MaxNodes: 4, Tasks: 16, TasksPerNode: 8, CPUsPerTask: 4,
			MemPerNodeMB: 1 << 20, MemPerCPUMB: 4096, MemPerGPUMB: 81920, CPUsPerGPU: 12,
			GPUs: 16, GPUsPerNode: 8, GPUsPerTask: 1, GPUType: "h100", Exclusive: true,
			GPUMemMB: 8192, GPUComputePct: 25, GPUShards: 2,
			NodeList: []string{"gpu01", "gpu02"}, Exclude: []string{"gpu03"}, Constraint: "nvlink", MinCPUs: 16, TmpDiskMB: 4096, Overcommit: true,
			TimeLimit: 3600, TimeMin: 600, BeginTime: at(-60), Hold: true, Nice: -5, Priority: 77,
			Stdout: "out-%j.txt", Stderr: "err-%j.txt", Stdin: "/dev/null", OpenMode: "append",
			Requeue:    ptr(false),
			Signal:     &api.SignalSpec{Signal: 10, Seconds: 120, BatchOnly: true},
			Dependency: "afterok:1", MailType: "END", MailUser: "alice@example.org",
			KillInvalidDep: true, Array: "0-9%2",
			Allocation:     true,
			ContainerImage: "docker.io/tide-test/bb:latest", ContainerMounts: []api.ContainerMount{{Source: "/data", Destination: "/d", ReadOnly: true}},
		},
		UserID: 1000, GroupID: 100, User: "alice", Group: "users",
		State: api.StateCompleted, Reason: api.ReasonNonZeroExit, ReasonDetail: "0/4 nodes: 4 InsufficientGPU",
		Placement:   "best fit on 2 whole nodes gpu[01-02] under leaf s1",
		HoldKind:    api.HoldAdmin,
		EffPriority: 4242,
		SubmitTime:  at(0), EligibleTime: at(1), StartTime: at(2), EndTime: at(90), LastSchedEval: at(2),
		Alloc: []api.NodeAlloc{
			{Node: "gpu01", CPUs: 32, MemoryMB: 512000, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Tasks: 8, GPUMemMB: 8192, GPUComputePct: 25, NUMA: []int{0, 1}},
			{Node: "gpu02", CPUs: 32, MemoryMB: 512000, GPUs: []int{7, 6, 5, 4, 3, 2, 1, 0}, Tasks: 8, GPUMemMB: 4096, GPUComputePct: 10, NUMA: []int{1}},
		},
		Restarts:         3,
		Exit:             api.ExitStatus{Code: 1, Signal: 9},
		CancelRequested:  true,
		TimedOut:         true,
		Launched:         true,
		LaunchFailures:   2,
		LaunchFailNodes:  []string{"gpu02", "gpu01"},
		RequeueRequested: true,
		CancelledBy:      ptr(uint32(0)), // root: a non-nil pointer to zero must survive
		Cluster:          "tide",
		PartitionList:    "a100,h100",
		ArrayJobID:       id, ArrayTaskID: 3, ArrayPending: api.TaskSet{{First: 4, Last: 9, Step: 1}}, ArrayThrottle: 2,
		SubmitToken: "0123456789abcdef0123456789abcdef",
		Share: api.Share{Level: 7, Starving: t0.Add(time.Hour), StartedStarving: true, Borrowing: true, Preemptions: 2,
			Preempting: &api.Preempting{By: id + 1, Reclaim: true, Mode: api.PreemptRequeue, Since: t0,
				Deadline: t0.Add(time.Minute), Acked: true, Why: "reclaim"},
			PrevNodes: []string{"gpu01"}, LastCheckpoint: t0.Add(2 * time.Hour), ExpectedStart: t0.Add(3 * time.Hour)},
	}
}

// zeroFields lists the paths of zero-valued fields under v, descending
// into structs, pointers and slice elements. Pointers only need to be
// non-nil and slice elements of basic types may be zero (GPU index 0).
func zeroFields(v reflect.Value, path string) []string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return []string{path}
		}
		if v.Elem().Kind() != reflect.Struct {
			return nil
		}
		return zeroFields(v.Elem(), path)
	}
	if t, ok := v.Interface().(time.Time); ok {
		if t.IsZero() {
			return []string{path}
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		var out []string
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			out = append(out, zeroFields(v.Field(i), path+"."+f.Name)...)
		}
		return out
	case reflect.Slice:
		if v.Len() == 0 {
			return []string{path}
		}
		var out []string
		for i := 0; i < v.Len(); i++ {
			if e := v.Index(i); e.Kind() == reflect.Struct {
				out = append(out, zeroFields(e, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
		return out
	}
	if v.IsZero() {
		return []string{path}
	}
	return nil
}

// withoutSpool is j as the jobs table returns it.
func withoutSpool(j *api.Job) api.Job {
	c := *j
	c.Script, c.Environment = "", nil
	return c
}

func ids(jobs []api.Job) []uint64 {
	out := []uint64{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func idsOf(jobs []*api.Job) []uint64 {
	out := []uint64{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func ptr[T any](v T) *T { return &v }
