package sched_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

// shareBenchSnapshot is BenchmarkSchedule's 512×8 cluster shared by 8
// queues (guarantees 1/8 of the GPUs each, caps at twice that, some
// lending and per-user limits), with the default classes: what each
// node holds is one running job of a random queue, class and level
// (some borrowing, some old enough to be preempted) that ends at a
// staggered time, and the pending jobs get random queues, classes,
// levels, users and time limits, some submitted long enough ago to
// starve.
func shareBenchSnapshot(pending int) *sched.Snapshot {
	const nodes, gpus, queues = 512, 8, 8
	rng := rand.New(rand.NewPCG(5, uint64(pending)))
	w := benchCluster(rng, nodes, gpus)
	s := w.Obj()
	s.QOS, s.DefaultQOS = sched.DefaultQOS(), api.QOSBatch
	s.Queues = map[string]*sched.QueueInfo{}
	names := make([]string, queues)
	share := nodes * gpus / queues
	for k := range names {
		names[k] = fmt.Sprintf("team%d", k)
		q := &sched.QueueInfo{Name: names[k], Guaranteed: share, Cap: 2 * share, LendLimit: -1, BorrowLimit: -1}
		if k%3 == 0 {
			q.LendLimit = share / 2
		}
		if k%4 == 1 {
			q.MaxRunningPerUser, q.MaxGPUsPerUser = 200, 256
		}
		s.Queues[names[k]] = q
	}
	classes := []string{api.QOSTraining, api.QOSBatch, api.QOSBatch, api.QOSInference, api.QOSDebug}
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5"}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		used := n.GPUs - len(n.FreeGPUs)
		if used == 0 {
			continue
		}
		held := make([]int, 0, used)
		for g := range n.GPUs {
			if !slices.Contains(n.FreeGPUs, g) {
				held = append(held, g)
			}
		}
		n.Releases = []sched.Release{{At: now.Add(time.Duration(60+rng.IntN(7200)) * time.Second),
			CPUs: n.CPUs - n.FreeCPUs, MemMB: n.MemoryMB - n.FreeMemMB, GPUs: held}}
		s.Running = append(s.Running, sched.RunningJob{
			JobID: uint64(1000000 + i), Partition: "gpu", Queue: names[rng.IntN(queues)],
			QOS: classes[rng.IntN(len(classes))], User: users[rng.IntN(len(users))], Level: 1 + rng.IntN(6),
			Start: now.Add(-time.Duration(rng.IntN(7200)) * time.Second), Borrowing: rng.IntN(4) == 0,
			Alloc: []api.NodeAlloc{{Node: n.Name, CPUs: n.CPUs - n.FreeCPUs, MemoryMB: n.MemoryMB - n.FreeMemMB, GPUs: held}},
		})
	}
	jobs := benchJobs(rng, pending)
	for _, j := range jobs {
		j.TimeLimit = int64(60 * (1 + rng.IntN(240)))
		j.Account = names[rng.IntN(queues)]
		j.JobSpec.QOS = classes[rng.IntN(len(classes))]
		j.User = users[rng.IntN(len(users))]
		j.EffPriority = 0
		j.JobSpec.Priority = uint32(rng.IntN(11))
		j.SubmitTime = now.Add(-time.Duration(rng.IntN(3*3600)) * time.Second)
	}
	s.Pending = jobs
	return s
}

// BenchmarkScheduleShare is a full pass with levels and aging, quotas of
// 8 queues, borrowing, preemption and backfill (depth 4) over 10,000
// pending jobs on 512 nodes × 8 GPUs. Besides ns/op it reports the p50
// and p99 of the per-pass durations (sorted, nearest rank), and what a
// pass decides.
func BenchmarkScheduleShare(b *testing.B) {
	const pending = 10000
	for _, pol := range []sched.Policy{sched.PolicyPriority, sched.PolicyBackfill} {
		b.Run(fmt.Sprintf("nodes=512/gpus=8/pending=%d/queues=8/policy=%s", pending, pol), func(b *testing.B) {
			snap := shareBenchSnapshot(pending)
			cfg := sched.Config{DefMemPerCPUMB: 1000, Policy: pol}
			plan := sched.Schedule(snap, now, cfg)
			if len(plan.Starts)+len(plan.Pending) != pending {
				b.Fatalf("bad plan: %d starts, %d pending for %d jobs", len(plan.Starts), len(plan.Pending), pending)
			}
			var lat []time.Duration
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				sched.Schedule(snap, now, cfg)
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[min(len(lat)*99/100, len(lat)-1)].Microseconds()), "p99-µs")
			b.ReportMetric(float64(len(plan.Starts)), "starts/op")
			b.ReportMetric(float64(len(plan.Preemptions)), "preemptions/op")
			b.ReportMetric(float64(len(plan.Reservations)), "reservations/op")
		})
	}
}
