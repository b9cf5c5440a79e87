package accounting

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
)

func TestLoadJobs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.openNew(t)
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{
			makeJob(1).obj(), // pending
			makeJob(2).running(at(1)).obj(),
			makeJob(3).ended(api.StateCompleted, at(10)).obj(),
			makeJob(4).ended(api.StateFailed, at(20)).obj(),
			makeJob(5).ended(api.StateCancelled, at(30)).obj(),
			func() *api.Job { j := makeJob(6).running(at(2)).obj(); j.State = api.StateCompleting; return j }(),
			makeJob(7).ended(api.StateOOM, at(40)).obj(),
		}})
		tests := []struct {
			name  string
			since time.Time
			want  []uint64
		}{
			{name: "zero since loads everything", want: []uint64{1, 2, 3, 4, 5, 6, 7}},
			{name: "since before every end", since: at(5), want: []uint64{1, 2, 3, 4, 5, 6, 7}},
			{name: "ended exactly at since is kept", since: at(20), want: []uint64{1, 2, 4, 5, 6, 7}},
			{name: "one nanosecond later drops it", since: at(20).Add(time.Nanosecond), want: []uint64{1, 2, 5, 6, 7}},
			{name: "after every end keeps live jobs", since: at(100), want: []uint64{1, 2, 6}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.LoadJobs(ctx, tt.since)
				if err != nil {
					t.Fatalf("LoadJobs: %v", err)
				}
				if diff := cmp.Diff(tt.want, idsOf(got)); diff != "" {
					t.Errorf("LoadJobs ids (-want +got):\n%s", diff)
				}
				for _, j := range got {
					if j.Script != "" || j.Environment != nil {
						t.Errorf("job %d loaded with its spool (script %q, env %q)", j.ID, j.Script, j.Environment)
					}
				}
			})
		}
	})
}

func TestQueryJobs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.openNew(t)
		// Timeline in minutes from t0:
		//  1 alice  gpu   research  submit 0,  ran 5–10     COMPLETED
		//  2 bob    cpu   research  submit 0,  ran 20–40    FAILED
		//  3 alice  gpu   ml        submit 30, running since 35
		//  4 carol  gpu   ml        submit 50, pending
		//  5 alice  debug research  submit 0, eligible 60 (--begin), pending
		//  6 bob    gpu   ml        submit 10, cancelled while pending at 15
		mustWrite(t, s, &Batch{NewJobs: []*api.Job{
			makeJob(1).name("train").running(at(5)).ended(api.StateCompleted, at(10)).obj(),
			makeJob(2).user("bob", 1001).partition("cpu").running(at(20)).ended(api.StateFailed, at(40)).obj(),
			makeJob(3).name("train").account("ml").submitted(at(30)).running(at(35)).obj(),
			makeJob(4).user("carol", 1002).account("ml").submitted(at(50)).obj(),
			makeJob(5).partition("debug").eligible(at(60)).obj(),
			func() *api.Job {
				j := makeJob(6).user("bob", 1001).account("ml").submitted(at(10)).obj()
				j.State, j.EndTime = api.StateCancelled, at(15)
				return j
			}(),
		}})
		tests := []struct {
			name    string
			f       api.JobFilter
			want    []uint64
			wantErr error
		}{
			{name: "no filter", want: []uint64{1, 2, 3, 4, 5, 6}},
			{name: "ids", f: api.JobFilter{IDs: []uint64{6, 2, 99}}, want: []uint64{2, 6}},
			{name: "user by name", f: api.JobFilter{Users: []string{"bob"}}, want: []uint64{2, 6}},
			{name: "user by uid", f: api.JobFilter{Users: []string{"1002"}}, want: []uint64{4}},
			{name: "users by name and uid", f: api.JobFilter{Users: []string{"carol", "1001"}}, want: []uint64{2, 4, 6}},
			{name: "unknown user", f: api.JobFilter{Users: []string{"mallory"}}, want: []uint64{}},
			{name: "names", f: api.JobFilter{Names: []string{"train"}}, want: []uint64{1, 3}},
			{name: "partitions", f: api.JobFilter{Partitions: []string{"cpu", "debug"}}, want: []uint64{2, 5}},
			{name: "accounts", f: api.JobFilter{Accounts: []string{"ml"}}, want: []uint64{3, 4, 6}},
			{name: "states", f: api.JobFilter{States: []api.JobState{api.StatePending, api.StateFailed}}, want: []uint64{2, 4, 5}},
			{name: "filters combine with and", f: api.JobFilter{Users: []string{"alice"}, Partitions: []string{"gpu"},
				States: []api.JobState{api.StateRunning}}, want: []uint64{3}},
			{name: "since drops jobs ended before", f: api.JobFilter{Since: at(12)}, want: []uint64{2, 3, 4, 5, 6}},
			{name: "since is inclusive of end", f: api.JobFilter{Since: at(10)}, want: []uint64{1, 2, 3, 4, 5, 6}},
			{name: "until drops jobs not yet eligible", f: api.JobFilter{Until: at(29)}, want: []uint64{1, 2, 6}},
			{name: "until is inclusive of submit", f: api.JobFilter{Until: at(30)}, want: []uint64{1, 2, 3, 6}},
			{name: "until uses eligible time over submit", f: api.JobFilter{Until: at(59)}, want: []uint64{1, 2, 3, 4, 6}},
			{name: "window", f: api.JobFilter{Since: at(16), Until: at(45)}, want: []uint64{2, 3}},
			{name: "point window", f: api.JobFilter{Since: at(15), Until: at(15)}, want: []uint64{2, 6}},
			{name: "window with user", f: api.JobFilter{Since: at(16), Until: at(45), Users: []string{"bob"}}, want: []uint64{2}},
			{name: "since after until", f: api.JobFilter{Since: at(20), Until: at(10)}, wantErr: api.ErrInvalidArgument},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := s.QueryJobs(ctx, tt.f)
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("QueryJobs error = %v, want %v", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("QueryJobs: %v", err)
				}
				if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
					t.Errorf("QueryJobs ids (-want +got):\n%s", diff)
				}
				// The store must agree with api.JobFilter.Match on the
				// non-time filters.
				for _, j := range got {
					if !tt.f.Match(&j) {
						t.Errorf("job %d returned but api.JobFilter.Match rejects it", j.ID)
					}
					if j.Script != "" || j.Environment != nil {
						t.Errorf("job %d returned with its spool", j.ID)
					}
				}
			})
		}
	})
}

func TestQueryJobsManyIDs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.openNew(t)
		var jobs []*api.Job
		for id := uint64(1); id <= 100; id++ {
			jobs = append(jobs, makeJob(id).obj())
		}
		mustWrite(t, s, &Batch{NewJobs: jobs})
		// More ids than the 999 parameters old SQLite versions allow.
		var f, want []uint64
		for id := uint64(3); id <= 40000; id += 3 {
			f = append(f, id)
			if id <= 100 {
				want = append(want, id)
			}
		}
		got, err := s.QueryJobs(context.Background(), api.JobFilter{IDs: f})
		if err != nil {
			t.Fatalf("QueryJobs: %v", err)
		}
		if diff := cmp.Diff(want, ids(got)); diff != "" {
			t.Errorf("QueryJobs ids (-want +got):\n%s", diff)
		}
	})
}

// TestLoadJobsSkipsSpool checks that LoadJobs does not even read the
// spool: loading jobs with 64 KiB scripts and environments must allocate
// far less than the scripts' size.
func TestLoadJobsSkipsSpool(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		const n, size = 200, 64 << 10
		ctx := context.Background()
		s := be.openNew(t)
		var b Batch
		for id := uint64(1); id <= n; id++ {
			j := makeJob(id).obj()
			j.Script = strings.Repeat("#", size)
			j.Environment = []string{"BIG=" + strings.Repeat("x", size)}
			b.NewJobs = append(b.NewJobs, j)
		}
		mustWrite(t, s, &b)

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		jobs, err := s.LoadJobs(ctx, time.Time{})
		runtime.ReadMemStats(&after)
		if err != nil || len(jobs) != n {
			t.Fatalf("LoadJobs = %d jobs, %v", len(jobs), err)
		}
		allocated := after.TotalAlloc - before.TotalAlloc
		if limit := uint64(n * size / 4); allocated > limit {
			t.Errorf("LoadJobs allocated %d bytes for %d jobs, want under %d: is it reading the spool?", allocated, n, limit)
		}
		if script, _, err := s.Spool(ctx, n); err != nil || len(script) != size {
			t.Errorf("Spool(%d) = %d bytes, %v", n, len(script), err)
		}
	})
}
