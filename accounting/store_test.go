package accounting

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
)

func TestFullJobSetsEveryField(t *testing.T) {
	if zero := zeroFields(reflect.ValueOf(fullJob(1)), "Job"); len(zero) > 0 {
		t.Fatalf("fullJob leaves fields zero, so the round trip does not cover them: %v", zero)
	}
}

func TestJobRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		requeueTrue := true
		tests := []struct {
			name string
			job  *api.Job
		}{
			{name: "every field set", job: fullJob(7)},
			{name: "zero times nil pointers no env", job: &api.Job{ID: 8, State: api.StatePending}},
			{name: "requeue true signal zero", job: func() *api.Job {
				j := makeJob(9).obj()
				j.Requeue, j.Signal, j.Environment = &requeueTrue, &api.SignalSpec{}, []string{}
				return j
			}()},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx := context.Background()
				s := be.openNew(t)
				orig := *tt.job // Write must not modify the caller's job
				mustWrite(t, s, &Batch{NewJobs: []*api.Job{tt.job}})
				if diff := cmp.Diff(&orig, tt.job); diff != "" {
					t.Errorf("Write modified the job (-before +after):\n%s", diff)
				}
				want := withoutSpool(tt.job)

				loaded, err := s.LoadJobs(ctx, time.Time{})
				if err != nil {
					t.Fatalf("LoadJobs: %v", err)
				}
				if len(loaded) != 1 {
					t.Fatalf("LoadJobs returned %d jobs, want 1", len(loaded))
				}
				if diff := cmp.Diff(&want, loaded[0]); diff != "" {
					t.Errorf("LoadJobs (-want +got):\n%s", diff)
				}
				for name, tm := range map[string]time.Time{"SubmitTime": loaded[0].SubmitTime,
					"EndTime": loaded[0].EndTime, "BeginTime": loaded[0].BeginTime} {
					if !tm.IsZero() && tm.Location() != time.UTC {
						t.Errorf("%s location = %v, want UTC", name, tm.Location())
					}
				}

				queried, err := s.QueryJobs(ctx, api.JobFilter{IDs: []uint64{tt.job.ID}})
				if err != nil {
					t.Fatalf("QueryJobs: %v", err)
				}
				if diff := cmp.Diff([]api.Job{want}, queried); diff != "" {
					t.Errorf("QueryJobs (-want +got):\n%s", diff)
				}

				script, env, err := s.Spool(ctx, tt.job.ID)
				if err != nil {
					t.Fatalf("Spool: %v", err)
				}
				if script != tt.job.Script {
					t.Errorf("Spool script = %q, want %q", script, tt.job.Script)
				}
				if diff := cmp.Diff(tt.job.Environment, env); diff != "" {
					t.Errorf("Spool env (-want +got):\n%s", diff)
				}
			})
		}
	})
}

func TestJobsUpsert(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.openNew(t)
		j := makeJob(1).obj()
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{j}})

		// The upsert carries no script: the spool must keep the original.
		upd := makeJob(1).running(at(5)).obj()
		upd.Script, upd.Environment = "", nil
		upd.Alloc = []api.NodeAlloc{{Node: "gpu01", CPUs: 4, GPUs: []int{2}}}
		unknown := makeJob(2).obj() // upsert of a job never inserted: inserted, without spool
		mustWrite(t, s, &Batch{Jobs: []*api.Job{upd, unknown}})

		got, err := s.LoadJobs(ctx, time.Time{})
		if err != nil {
			t.Fatalf("LoadJobs: %v", err)
		}
		want := []*api.Job{ptr(withoutSpool(upd)), ptr(withoutSpool(unknown))}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("LoadJobs (-want +got):\n%s", diff)
		}
		if script, _, err := s.Spool(ctx, 1); err != nil || script != j.Script {
			t.Errorf("Spool(1) = %q, %v; want the submitted script", script, err)
		}
		if _, _, err := s.Spool(ctx, 2); !errors.Is(err, api.ErrNotFound) {
			t.Errorf("Spool(2) error = %v, want ErrNotFound", err)
		}
	})
}

func TestWriteAtomic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		tests := []struct {
			name    string
			bad     Batch
			wantErr string
		}{
			{name: "duplicate new job id already stored",
				bad: Batch{NewJobs: []*api.Job{makeJob(2).obj(), makeJob(1).obj()}}, wantErr: "job 1"},
			{name: "duplicate new job id in the batch",
				bad: Batch{NewJobs: []*api.Job{makeJob(2).obj(), makeJob(2).obj()}}, wantErr: "job 2"},
			{name: "nil job", bad: Batch{Jobs: []*api.Job{makeJob(2).obj(), nil}}, wantErr: "nil job"},
			{name: "job id zero", bad: Batch{NewJobs: []*api.Job{makeJob(0).obj()}}, wantErr: "invalid job id 0"},
			{name: "node without name", bad: Batch{Nodes: []api.Node{{Name: "n2"}, {}}}, wantErr: "node without a name"},
			{name: "event with job id zero", bad: Batch{Events: []api.Event{{Kind: api.EventSubmit}}}, wantErr: "invalid job id 0"},
			{name: "high-water mark beyond int64", bad: Batch{MaxJobID: 1 << 63}, wantErr: "high-water mark"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx := context.Background()
				s := be.openNew(t)
				mustWrite(t, s, &Batch{
					NewJobs:  []*api.Job{makeJob(1).obj()},
					Events:   []api.Event{{JobID: 1, Time: at(0), Kind: api.EventSubmit}},
					Audit:    []api.AuditRecord{{Time: at(0), User: "alice", Action: "submit", Target: "job 1"}},
					Nodes:    []api.Node{{Name: "n1", Drain: true}},
					MaxJobID: 1,
				})
				before := dump(t, s)

				// Every bad batch also carries valid parts of every kind:
				// none of them may survive the failure.
				b := tt.bad
				b.NewJobs = append([]*api.Job{makeJob(3).obj()}, b.NewJobs...)
				b.Jobs = append([]*api.Job{makeJob(1).running(at(1)).obj()}, b.Jobs...)
				b.Events = append([]api.Event{{JobID: 1, Time: at(1), Kind: api.EventStart}}, b.Events...)
				b.Audit = append(b.Audit, api.AuditRecord{Time: at(1), User: "root", Action: "drain", Target: "n1"})
				b.Nodes = append([]api.Node{{Name: "n1", Drain: false}}, b.Nodes...)
				if b.MaxJobID == 0 {
					b.MaxJobID = 100
				}
				err := s.Write(ctx, &b)
				if err == nil {
					t.Fatal("Write succeeded, want an error")
				}
				if !strings.HasPrefix(err.Error(), "write batch: ") || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q, want prefix %q and %q", err, "write batch: ", tt.wantErr)
				}
				if diff := cmp.Diff(before, dump(t, s)); diff != "" {
					t.Errorf("failed batch changed the store (-before +after):\n%s", diff)
				}
				// The failed transaction is over: the next batch commits on
				// its own, and the failed one's parts stay out.
				mustWrite(t, s, &Batch{NewJobs: []*api.Job{makeJob(4).obj()}})
				if after := dump(t, s); len(after.Jobs) != len(before.Jobs)+1 || after.Jobs[len(after.Jobs)-1].ID != 4 {
					t.Errorf("after a good batch: jobs %d, want %d ending with job 4", len(after.Jobs), len(before.Jobs)+1)
				}
			})
		}
	})
}

// storeDump is everything a store holds, for before/after comparisons.
type storeDump struct {
	Jobs    []*api.Job
	Spool   map[uint64]string
	Events  []api.Event
	Audit   []api.AuditRecord
	Nodes   []api.Node
	LastJob uint64
}

func dump(t *testing.T, s *Store) storeDump {
	t.Helper()
	ctx := context.Background()
	var d storeDump
	var err error
	if d.Jobs, err = s.LoadJobs(ctx, time.Time{}); err != nil {
		t.Fatalf("LoadJobs: %v", err)
	}
	d.Spool = map[uint64]string{}
	for id := uint64(1); id <= 5; id++ {
		if script, _, err := s.Spool(ctx, id); err == nil {
			d.Spool[id] = script
		}
	}
	for id := uint64(1); id <= 5; id++ {
		ev, err := s.Events(ctx, id)
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		d.Events = append(d.Events, ev...)
	}
	if d.Audit, err = s.AuditLog(ctx, 0); err != nil {
		t.Fatalf("AuditLog: %v", err)
	}
	if d.Nodes, err = s.LoadNodes(ctx); err != nil {
		t.Fatalf("LoadNodes: %v", err)
	}
	if d.LastJob, err = s.LastJobID(ctx); err != nil {
		t.Fatalf("LastJobID: %v", err)
	}
	return d
}

func TestWriteEmptyBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.openNew(t)
		for _, b := range []*Batch{nil, {}} {
			if err := s.Write(context.Background(), b); err != nil {
				t.Errorf("Write(%v) = %v, want nil", b, err)
			}
		}
	})
}

func TestWriteCancelledContext(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.openNew(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := s.Write(ctx, &Batch{NewJobs: []*api.Job{makeJob(1).obj()}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Write with cancelled context = %v, want context.Canceled", err)
		}
		if d := dump(t, s); len(d.Jobs) != 0 {
			t.Errorf("cancelled write stored %d jobs", len(d.Jobs))
		}
	})
}

func TestEventsOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.openNew(t)
		// Same timestamps and interleaved jobs: only insertion order counts.
		mustWrite(t, s, &Batch{Events: []api.Event{
			{JobID: 1, Time: at(0), Kind: api.EventSubmit, State: api.StatePending, Actor: "alice"},
			{JobID: 2, Time: at(0), Kind: api.EventSubmit},
			{JobID: 1, Time: at(0), Kind: api.EventPending, Reason: "Resources", Message: "0/4 nodes: 4 InsufficientGPU"},
		}})
		mustWrite(t, s, &Batch{Events: []api.Event{
			{JobID: 1, Time: at(-10), Kind: api.EventStart, State: api.StateRunning},
			{JobID: 1, Kind: api.EventEnd, State: api.StateCompleted}, // zero time survives
		}})
		tests := []struct {
			name  string
			jobID uint64
			want  []api.Event
		}{
			{name: "job with events", jobID: 1, want: []api.Event{
				{JobID: 1, Time: at(0), Kind: api.EventSubmit, State: api.StatePending, Actor: "alice"},
				{JobID: 1, Time: at(0), Kind: api.EventPending, Reason: "Resources", Message: "0/4 nodes: 4 InsufficientGPU"},
				{JobID: 1, Time: at(-10), Kind: api.EventStart, State: api.StateRunning},
				{JobID: 1, Kind: api.EventEnd, State: api.StateCompleted},
			}},
			{name: "other job", jobID: 2, want: []api.Event{{JobID: 2, Time: at(0), Kind: api.EventSubmit}}},
			{name: "unknown job", jobID: 3, want: []api.Event{}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.Events(ctx, tt.jobID)
				if err != nil {
					t.Fatalf("Events: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Events (-want +got):\n%s", diff)
				}
			})
		}
	})
}

func TestAuditLog(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.openNew(t)
		recs := []api.AuditRecord{
			{Time: at(0), UID: 1000, User: "alice", Action: "submit", Target: "job 1"},
			{Time: at(0), UID: 0, User: "root", Action: "drain", Target: "gpu01", Detail: "bad fan"},
			{Time: at(-5), UID: 1001, User: "bob", Action: "cancel", Target: "job 1"},
		}
		mustWrite(t, s, &Batch{Audit: recs[:2]})
		mustWrite(t, s, &Batch{Audit: recs[2:]})
		newestFirst := []api.AuditRecord{recs[2], recs[1], recs[0]}
		tests := []struct {
			name  string
			limit int
			want  []api.AuditRecord
		}{
			{name: "no limit", limit: 0, want: newestFirst},
			{name: "negative means no limit", limit: -1, want: newestFirst},
			{name: "one", limit: 1, want: newestFirst[:1]},
			{name: "two", limit: 2, want: newestFirst[:2]},
			{name: "more than stored", limit: 10, want: newestFirst},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.AuditLog(ctx, tt.limit)
				if err != nil {
					t.Fatalf("AuditLog: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("AuditLog(%d) (-want +got):\n%s", tt.limit, diff)
				}
			})
		}
	})
}

func TestNodes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.openNew(t)
		mustWrite(t, s, &Batch{Nodes: []api.Node{
			{Name: "gpu02", Drain: true, Reason: "maintenance", ReasonUser: "root", ReasonTime: at(0)},
			{Name: "gpu01", Drain: true, Reason: "xid 79"},
		}})
		mustWrite(t, s, &Batch{Nodes: []api.Node{{Name: "gpu01", Drain: false}}})
		got, err := s.LoadNodes(ctx)
		if err != nil {
			t.Fatalf("LoadNodes: %v", err)
		}
		want := []api.Node{
			{Name: "gpu01"},
			{Name: "gpu02", Drain: true, Reason: "maintenance", ReasonUser: "root", ReasonTime: at(0)},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("LoadNodes (-want +got):\n%s", diff)
		}
	})
}

func TestHighWaterMark(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.openNew(t)
		steps := []struct {
			name string
			b    Batch
			want uint64
		}{
			{name: "empty store", want: 0},
			{name: "mark set", b: Batch{MaxJobID: 10}, want: 10},
			{name: "lower mark ignored", b: Batch{MaxJobID: 5}, want: 10},
			{name: "job below mark", b: Batch{NewJobs: []*api.Job{makeJob(3).ended(api.StateCompleted, at(1)).obj()}}, want: 10},
			{name: "job above mark counts", b: Batch{NewJobs: []*api.Job{makeJob(12).obj()}}, want: 12},
			{name: "mark above jobs", b: Batch{MaxJobID: 20}, want: 20},
			{name: "mark equal ignored", b: Batch{MaxJobID: 20}, want: 20},
		}
		for _, st := range steps {
			t.Run(st.name, func(t *testing.T) {
				mustWrite(t, s, &st.b)
				got, err := s.LastJobID(ctx)
				if err != nil {
					t.Fatalf("LastJobID: %v", err)
				}
				if got != st.want {
					t.Errorf("LastJobID = %d, want %d", got, st.want)
				}
			})
		}
	})
}

func TestPurgeJobsKeepsHighWaterMark(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.openNew(t)
		mustWrite(t, s, &Batch{
			NewJobs: []*api.Job{
				makeJob(1).ended(api.StateCompleted, at(10)).obj(),
				makeJob(2).running(at(5)).obj(),
				makeJob(3).ended(api.StateFailed, at(20)).obj(),
			},
			Events: []api.Event{{JobID: 3, Time: at(20), Kind: api.EventEnd}, {JobID: 2, Time: at(5), Kind: api.EventStart}},
		})
		n, err := s.PurgeJobs(ctx, at(30))
		if err != nil {
			t.Fatalf("PurgeJobs: %v", err)
		}
		if n != 2 {
			t.Errorf("PurgeJobs deleted %d jobs, want 2", n)
		}
		if last, err := s.LastJobID(ctx); err != nil || last != 3 {
			t.Errorf("LastJobID after purge = %d, %v; want 3", last, err)
		}
		d := dump(t, s)
		if diff := cmp.Diff([]uint64{2}, idsOf(d.Jobs)); diff != "" {
			t.Errorf("jobs left (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[uint64]string{2: makeJob(2).obj().Script}, d.Spool); diff != "" {
			t.Errorf("spool left (-want +got):\n%s", diff)
		}
		if len(d.Events) != 1 || d.Events[0].JobID != 2 {
			t.Errorf("events left = %+v, want only job 2's", d.Events)
		}
	})
}

// TestMarkComesWithItsJob checks that a submission's high-water mark is
// not written beside the job that holds it (the jobs table already says
// so), and that a purge of that job still keeps its id from reuse.
func TestMarkComesWithItsJob(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.openNew(t)
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{makeJob(7).ended(api.StateCompleted, at(10)).obj()}, MaxJobID: 7})
		var n int
		if err := s.r.QueryRow(s.q(`SELECT count(*) FROM meta WHERE key = ?`), metaMaxJobID).Scan(&n); err != nil || n != 0 {
			t.Fatalf("meta rows for the mark = %d, %v; want none", n, err)
		}
		if last, err := s.LastJobID(ctx); err != nil || last != 7 {
			t.Fatalf("LastJobID = %d, %v; want 7", last, err)
		}
		// A mark above every job in the batch is still written.
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{makeJob(8).obj()}, MaxJobID: 9})
		if last, err := s.LastJobID(ctx); err != nil || last != 9 {
			t.Fatalf("LastJobID = %d, %v; want 9", last, err)
		}
		s2 := be.openNew(t)
		mustWrite(t, s2, &Batch{NewJobs: []*api.Job{makeJob(7).ended(api.StateCompleted, at(10)).obj()}, MaxJobID: 7})
		if n, err := s2.PurgeJobs(ctx, at(30)); err != nil || n != 1 {
			t.Fatalf("PurgeJobs = %d, %v", n, err)
		}
		if last, err := s2.LastJobID(ctx); err != nil || last != 7 {
			t.Errorf("LastJobID after the purge = %d, %v; want 7", last, err)
		}
	})
}

// TestUpdateKeepsFixedColumns checks that an update leaves the columns
// fixed at the first insert (owner, submit time, array) and their
// indexes alone, while the rest follows the record.
func TestUpdateKeepsFixedColumns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.openNew(t)
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{makeJob(1).obj()}})
		upd := makeJob(1).ended(api.StateCompleted, at(9)).obj()
		upd.Name, upd.Account = "renamed", "other"
		mustWrite(t, s, &Batch{Jobs: []*api.Job{upd}})
		var user, name, account, state string
		var submit, end int64
		if err := s.r.QueryRow(`SELECT "user", name, account, state, submit_time, end_time FROM jobs WHERE id = 1`).
			Scan(&user, &name, &account, &state, &submit, &end); err != nil {
			t.Fatal(err)
		}
		j := makeJob(1).obj()
		if user != j.User || submit != nanos(j.SubmitTime) {
			t.Errorf("fixed columns changed: user %q submit %d", user, submit)
		}
		if name != "renamed" || account != "other" || state != string(api.StateCompleted) || end != nanos(at(9)) {
			t.Errorf("updated columns = %q %q %q %d", name, account, state, end)
		}
		got, err := s.QueryJobs(ctx, api.JobFilter{Users: []string{j.User}})
		if err != nil || len(got) != 1 || got[0].State != api.StateCompleted {
			t.Errorf("query by user after the update = %+v, %v", got, err)
		}
	})
}

// TestRequeueClearsEndTime checks the end_time column through a job's
// start (which leaves it alone), end and requeue (which clears it).
func TestRequeueClearsEndTime(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.openNew(t)
		end := func() int64 {
			t.Helper()
			var e int64
			if err := s.r.QueryRow(`SELECT end_time FROM jobs WHERE id = 1`).Scan(&e); err != nil {
				t.Fatal(err)
			}
			return e
		}
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{makeJob(1).obj()}})
		mustWrite(t, s, &Batch{Jobs: []*api.Job{makeJob(1).running(at(5)).obj()}})
		if e := end(); e != 0 {
			t.Fatalf("end_time after the start = %d", e)
		}
		mustWrite(t, s, &Batch{Jobs: []*api.Job{makeJob(1).ended(api.StateFailed, at(9)).obj()}})
		if e := end(); e != nanos(at(9)) {
			t.Fatalf("end_time after the end = %d", e)
		}
		requeued := makeJob(1).obj()
		requeued.Restarts = 1
		mustWrite(t, s, &Batch{Jobs: []*api.Job{requeued}})
		if e := end(); e != 0 {
			t.Errorf("end_time after the requeue = %d, want 0", e)
		}
	})
}

func TestPurgeSpool(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.openNew(t)
		requeued := makeJob(4).ended(api.StateNodeFail, at(5)).obj()
		requeued.State = api.StatePending // requeued: keeps the old end time
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{
			makeJob(1).ended(api.StateCompleted, at(10)).obj(),  // before: purged
			makeJob(2).ended(api.StateCancelled, at(30)).obj(),  // at the cut: kept
			makeJob(3).running(at(1)).obj(),                     // running: kept
			requeued,                                            // pending again: kept
			makeJob(5).ended(api.StateTimeout, at(29)).obj(),    // before: purged
			makeJob(6).ended(api.StateCompleted, at(100)).obj(), // after: kept
		}})
		n, err := s.PurgeSpool(ctx, at(30))
		if err != nil {
			t.Fatalf("PurgeSpool: %v", err)
		}
		if n != 2 {
			t.Errorf("PurgeSpool = %d, want 2", n)
		}
		for id, wantKept := range map[uint64]bool{1: false, 2: true, 3: true, 4: true, 5: false, 6: true} {
			_, _, err := s.Spool(ctx, id)
			if kept := err == nil; kept != wantKept {
				t.Errorf("job %d spool kept = %v (err %v), want %v", id, kept, err, wantKept)
			}
			if !wantKept && !errors.Is(err, api.ErrNotFound) {
				t.Errorf("job %d Spool error = %v, want ErrNotFound", id, err)
			}
		}
		if jobs, err := s.LoadJobs(ctx, time.Time{}); err != nil || len(jobs) != 6 {
			t.Errorf("LoadJobs after purge: %d jobs, %v; want all 6 rows kept", len(jobs), err)
		}
		if n, err := s.PurgeSpool(ctx, at(30)); err != nil || n != 0 {
			t.Errorf("second PurgeSpool = %d, %v; want 0", n, err)
		}
	})
}

func TestReopenKeepsEverything(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		loc := be.newDB(t)
		s := be.open(t, loc)
		mustWrite(t, s, &Batch{
			NewJobs:  []*api.Job{fullJob(1), makeJob(2).obj()},
			Events:   []api.Event{{JobID: 1, Time: at(0), Kind: api.EventSubmit}},
			Audit:    []api.AuditRecord{{Time: at(0), User: "alice", Action: "submit", Target: "job 1"}},
			Nodes:    []api.Node{{Name: "gpu01", Drain: true, Reason: "r"}},
			MaxJobID: 50,
		})
		mustWrite(t, s, &Batch{Jobs: []*api.Job{makeJob(2).running(at(3)).obj()}})
		before := dump(t, s)
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := s.Write(ctx, &Batch{MaxJobID: 99}); err == nil {
			t.Error("Write after Close succeeded")
		}
		if _, err := s.LoadJobs(ctx, time.Time{}); err == nil {
			t.Error("LoadJobs after Close succeeded")
		}
		if _, err := os.Stat(loc + "-wal"); be.name == "sqlite" && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("WAL file after Close: %v, want it checkpointed and removed", err)
		}

		s2 := be.open(t, loc)
		if diff := cmp.Diff(before, dump(t, s2)); diff != "" {
			t.Errorf("after reopen (-before +after):\n%s", diff)
		}
		if script, env, err := s2.Spool(ctx, 1); err != nil || script != fullJob(1).Script || len(env) != 3 {
			t.Errorf("Spool(1) after reopen = %q, %q, %v", script, env, err)
		}
	})
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("this is not a database\n", 200)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{name: "garbage file", path: garbage, want: "not a database"},
		{name: "directory", path: dir, want: "unable to open"},
		{name: "missing parent", path: filepath.Join(dir, "no", "such", "tide.db"), want: "unable to open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(tt.path)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open error %q, want it to name %s and say %q", err, tt.path, tt.want)
			}
			t.Logf("Open error: %v", err)
		})
	}
}

func TestOpenSpecialCharactersInPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a?b#c%20d&mode=ro.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	mustWrite(t, s, &Batch{NewJobs: []*api.Job{makeJob(1).obj()}})
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database not at %s: %v", path, err)
	}
	if jobs, err := s.LoadJobs(context.Background(), time.Time{}); err != nil || len(jobs) != 1 {
		t.Errorf("LoadJobs = %d jobs, %v", len(jobs), err)
	}
}

func TestLoadMigrations(t *testing.T) {
	tests := []struct {
		name    string
		files   fstest.MapFS
		want    []int
		wantErr string
	}{
		{name: "embedded", want: nil},
		{name: "ordered", files: fstest.MapFS{
			"migrations/0002_b.sql": {Data: []byte("B")}, "migrations/0001_a.sql": {Data: []byte("A")},
			"migrations/postgres/0002_b.sql": {Data: []byte("B")}, "migrations/postgres/0001_a.sql": {Data: []byte("A")},
		}, want: []int{1, 2}},
		{name: "gap", files: fstest.MapFS{
			"migrations/0001_a.sql": {Data: []byte("A")}, "migrations/0003_c.sql": {Data: []byte("C")},
			"migrations/postgres/0001_a.sql": {Data: []byte("A")}, "migrations/postgres/0003_c.sql": {Data: []byte("C")},
		}, wantErr: "expected version 2"},
		{name: "no PostgreSQL text", files: fstest.MapFS{
			"migrations/0001_a.sql": {Data: []byte("A")}, "migrations/0002_b.sql": {Data: []byte("B")},
			"migrations/postgres/0001_a.sql": {Data: []byte("A")},
		}, wantErr: "0002_b.sql has no PostgreSQL text"},
		{name: "PostgreSQL text misnamed", files: fstest.MapFS{
			"migrations/0001_a.sql":          {Data: []byte("A")},
			"migrations/postgres/0001_a.sql": {Data: []byte("A")}, "migrations/postgres/0001_init.sql": {Data: []byte("A")},
		}, wantErr: "postgres/0001_init.sql has no SQLite text"},
		{name: "bad name", files: fstest.MapFS{"migrations/init.sql": {Data: []byte("A")}}, wantErr: "NNNN_description"},
		{name: "bad number", files: fstest.MapFS{"migrations/x1_a.sql": {Data: []byte("A")}}, wantErr: "bad version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.files == nil {
				ms, err := loadMigrations(migrationFS)
				if err != nil || len(ms) == 0 || len(ms) != SchemaVersion() {
					t.Fatalf("embedded migrations: %d, %v (SchemaVersion %d)", len(ms), err, SchemaVersion())
				}
				for _, m := range ms {
					if strings.TrimSpace(m.sql) == "" || strings.TrimSpace(m.pgsql) == "" {
						t.Errorf("migration %s has an empty text", m.name)
					}
				}
				return
			}
			ms, err := loadMigrations(tt.files)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.version)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("versions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadersDoNotBlockWriter holds a read transaction open on the
// read-only pool while a batch commits. Without WAL the commit would wait
// for the reader's lock and fail after the busy timeout.
func TestReadersDoNotBlockWriter(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	mustWrite(t, s, &Batch{NewJobs: []*api.Job{makeJob(1).obj(), makeJob(2).obj()}})

	var mode string
	if err := s.w.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRow(`SELECT count(*) FROM jobs`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("count = %d, %v", n, err)
	}
	mustWrite(t, s, &Batch{NewJobs: []*api.Job{makeJob(3).obj()}})
	// The open read transaction keeps its snapshot; new reads see the commit.
	if err := tx.QueryRow(`SELECT count(*) FROM jobs`).Scan(&n); err != nil || n != 2 {
		t.Errorf("snapshot count = %d, %v; want 2", n, err)
	}
	if jobs, err := s.LoadJobs(ctx, time.Time{}); err != nil || len(jobs) != 3 {
		t.Errorf("LoadJobs = %d jobs, %v; want 3", len(jobs), err)
	}
	// The read pool refuses writes.
	if _, err := s.r.Exec(`DELETE FROM jobs`); err == nil {
		t.Error("read-only pool accepted a DELETE")
	}
}

// TestConcurrentWritersAndReaders runs writers and readers together, as
// the controller's request handlers do; with -race it also checks the
// store's own synchronisation.
func TestConcurrentWritersAndReaders(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		const writers, batches = 8, 20
		ctx := context.Background()
		s := be.openNew(t)
		errc := make(chan error, writers*2)
		for w := range writers {
			go func() {
				for i := range batches {
					id := uint64(w*batches + i + 1)
					errc <- s.Write(ctx, &Batch{
						NewJobs:  []*api.Job{makeJob(id).obj()},
						Events:   []api.Event{{JobID: id, Time: at(i), Kind: api.EventSubmit}},
						MaxJobID: id,
					})
				}
			}()
			go func() {
				for range batches {
					_, err := s.QueryJobs(ctx, api.JobFilter{Users: []string{"alice"}})
					if err == nil {
						_, err = s.LoadJobs(ctx, time.Time{})
					}
					errc <- err
				}
			}()
		}
		for range writers * batches * 2 {
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		}
		jobs, err := s.LoadJobs(ctx, time.Time{})
		if err != nil || len(jobs) != writers*batches {
			t.Fatalf("LoadJobs = %d jobs, %v; want %d", len(jobs), err, writers*batches)
		}
		if last, err := s.LastJobID(ctx); err != nil || last != writers*batches {
			t.Errorf("LastJobID = %d, %v; want %d", last, err, writers*batches)
		}
	})
}

// The writer connection checkpoints the WAL only after
// walCheckpointPages pages, not SQLite's default 1,000.
func TestWriterCheckpointInterval(t *testing.T) {
	s := openTest(t)
	var pages int
	if err := s.w.QueryRowContext(context.Background(), `PRAGMA wal_autocheckpoint`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages != walCheckpointPages {
		t.Errorf("wal_autocheckpoint = %d, want %d", pages, walCheckpointPages)
	}
}

// TestOddBytesRoundTrip: a script is any file, NUL bytes and bytes that
// are not UTF-8 included, and comes back byte for byte from either
// database; the JSON records carry NUL escaped, and a NUL in an indexed
// column (the name) does not fail the batch on PostgreSQL.
func TestOddBytesRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.openNew(t)
		j := makeJob(1).obj()
		j.Script = "#!/bin/sh\necho \x00 \xff\xfe latin-1 \xe9t\xe9\n"
		j.Comment = "a \x00 in the comment"
		j.Name = "n\x00"
		j.Environment = []string{"A=\x00b"}
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{j}})
		script, env, err := s.Spool(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if script != j.Script {
			t.Errorf("script = %q, want %q", script, j.Script)
		}
		if len(env) != 1 || env[0] != j.Environment[0] {
			t.Errorf("environment = %q, want %q", env, j.Environment)
		}
		jobs, err := s.LoadJobs(ctx, time.Time{})
		if err != nil || len(jobs) != 1 || jobs[0].Comment != j.Comment || jobs[0].Name != j.Name {
			t.Errorf("LoadJobs = %+v, %v; want the name %q and comment %q", jobs, err, j.Name, j.Comment)
		}
	})
}
