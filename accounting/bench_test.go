package accounting

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// benchJob is a realistic submission: a few KiB of script and a
// login-shell-sized environment.
func benchJob(id uint64, users int) *api.Job {
	u := fmt.Sprintf("user%02d", id%uint64(users))
	j := makeJob(id).user(u, 2000+uint32(id%uint64(users))).submitted(at(int(id % 1000))).obj()
	j.Script = "#!/bin/bash\n#SBATCH --gpus=8\n" + strings.Repeat("srun python train.py --epochs 10\n", 100)
	j.Environment = make([]string, 60)
	for i := range j.Environment {
		j.Environment[i] = fmt.Sprintf("VAR_%02d=%s", i, strings.Repeat("x", 40))
	}
	return j
}

// smallJob is make bench-scale's submission: a two-line script and one
// environment variable.
func smallJob(id uint64, users int) *api.Job {
	u := fmt.Sprintf("user%02d", id%uint64(users))
	j := makeJob(id).user(u, 2000+uint32(id%uint64(users))).submitted(at(int(id % 1000))).obj()
	j.Script, j.Environment = "#!/bin/sh\n# tide-emulate:60s\ntrue\n", []string{"TIDE_EMULATE=60s"}
	return j
}

// fill writes n jobs in batches of 1000; every third is finished.
func fill(b *testing.B, s *Store, n int) {
	b.Helper()
	for lo := 1; lo <= n; lo += 1000 {
		var batch Batch
		for id := lo; id < lo+1000 && id <= n; id++ {
			j := benchJob(uint64(id), 50)
			if id%3 == 0 {
				j.State, j.StartTime, j.EndTime = api.StateCompleted, at(id%1000+1), at(id%1000+30)
			}
			batch.NewJobs = append(batch.NewJobs, j)
		}
		mustWrite(b, s, &batch)
	}
}

// BenchmarkWriteNewJobs is the submission path: each batch inserts jobs
// with their spool, submit events and audit records and raises the
// high-water mark. batch=16 is 16 parallel clients coalesced into one
// commit.
//
// jobs=small are make bench-scale's submissions (smallJob), whose rows
// are small enough that the commit's own cost (some nine pages appended
// to the WAL, eighteen write calls, whatever the batch holds) decides:
// compare batch=1 with batch=16.
func BenchmarkWriteNewJobs(b *testing.B) {
	for _, bc := range []struct {
		n     int
		small bool
	}{{1, false}, {16, false}, {1, true}, {16, true}, {64, true}} {
		name := fmt.Sprintf("batch=%d", bc.n)
		if bc.small {
			name += "/jobs=small"
		}
		n, mk := bc.n, benchJob
		if bc.small {
			mk = smallJob
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s := openTest(b)
			next := uint64(1)
			batch := func() *Batch {
				var bt Batch
				for range n {
					j := mk(next, 50)
					bt.NewJobs = append(bt.NewJobs, j)
					bt.Events = append(bt.Events, api.Event{JobID: next, Time: at(0), Kind: api.EventSubmit,
						State: api.StatePending, Actor: j.User})
					bt.Audit = append(bt.Audit, api.AuditRecord{Time: at(0), UID: j.UserID, User: j.User,
						Action: "submit", Target: fmt.Sprintf("job %d", next)})
					bt.MaxJobID = next
					next++
				}
				return &bt
			}
			mustWrite(b, s, batch())
			if last, err := s.LastJobID(ctx); err != nil || last != uint64(n) {
				b.Fatalf("LastJobID = %d, %v; want %d", last, err, n)
			}
			for b.Loop() {
				if err := s.Write(ctx, batch()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/job")
		})
	}
}

// BenchmarkWriteJobUpdates is a scheduling pass: hundreds of job record
// updates plus one event each, in one batch.
func BenchmarkWriteJobUpdates(b *testing.B) {
	const n = 500
	ctx := context.Background()
	s := openTest(b)
	var jobs []*api.Job
	for id := uint64(1); id <= n; id++ {
		jobs = append(jobs, benchJob(id, 50))
	}
	mustWrite(b, s, &Batch{NewJobs: jobs})
	for _, j := range jobs {
		j.Script, j.Environment = "", nil // the controller keeps no spool in memory
	}
	pass := func(i int) *Batch {
		bt := &Batch{Jobs: jobs}
		for _, j := range jobs {
			j.LastSchedEval = at(i)
			j.ReasonDetail = fmt.Sprintf("0/64 nodes: %d InsufficientGPU", i%64)
			bt.Events = append(bt.Events, api.Event{JobID: j.ID, Time: at(i), Kind: api.EventPending,
				Reason: string(api.ReasonResources), Message: j.ReasonDetail})
		}
		return bt
	}
	mustWrite(b, s, pass(1))
	if got, err := s.QueryJobs(ctx, api.JobFilter{IDs: []uint64{n}}); err != nil || len(got) != 1 ||
		!got[0].LastSchedEval.Equal(at(1)) {
		b.Fatalf("update not stored: %+v, %v", got, err)
	}
	i := 2
	for b.Loop() {
		if err := s.Write(ctx, pass(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkQueryJobs is sacct over 10,000 jobs with typical filters.
func BenchmarkQueryJobs(b *testing.B) {
	const n = 10000
	ctx := context.Background()
	s := openTest(b)
	fill(b, s, n)
	tests := []struct {
		name string
		f    api.JobFilter
		want int
	}{
		{name: "all", want: n},
		{name: "user", f: api.JobFilter{Users: []string{"user07"}}, want: n / 50},
		{name: "state", f: api.JobFilter{States: []api.JobState{api.StateCompleted}}, want: n / 3},
		{name: "window", f: api.JobFilter{Since: at(900), Until: at(950)}, want: -1},
	}
	for _, tt := range tests {
		b.Run(fmt.Sprintf("jobs=%d/%s", n, tt.name), func(b *testing.B) {
			got, err := s.QueryJobs(ctx, tt.f)
			if err != nil || (tt.want >= 0 && len(got) != tt.want) || len(got) == 0 {
				b.Fatalf("QueryJobs = %d jobs, %v; want %d", len(got), err, tt.want)
			}
			for b.Loop() {
				if _, err := s.QueryJobs(ctx, tt.f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoadJobs is a controller restart with 10,000 pending jobs.
// Its B/op shows that scripts and environments (about 6 KiB a job here)
// are not read.
func BenchmarkLoadJobs(b *testing.B) {
	const n = 10000
	ctx := context.Background()
	s := openTest(b)
	var batch Batch
	for id := uint64(1); id <= n; id++ {
		batch.NewJobs = append(batch.NewJobs, benchJob(id, 50))
	}
	mustWrite(b, s, &batch)
	jobs, err := s.LoadJobs(ctx, at(0).Add(-time.Hour))
	if err != nil || len(jobs) != n || jobs[0].Script != "" {
		b.Fatalf("LoadJobs = %d jobs, %v", len(jobs), err)
	}
	for b.Loop() {
		if _, err := s.LoadJobs(ctx, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/job")
}
