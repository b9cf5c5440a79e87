package sched_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
)

// sliceBenchCluster is benchCluster with 80 GB GPUs and, on the busy
// half, a quarter of the GPUs shared by a few slices instead of whole.
func sliceBenchCluster(rng *rand.Rand, nodes, gpus int) *st.SnapshotWrapper {
	w := benchCluster(rng, nodes, gpus)
	s := w.Obj()
	for i := range s.Nodes {
		n := &s.Nodes[i]
		n.GPUMemMB = 80 * 1024
		if i%4 == 1 && len(n.FreeGPUs) > 2 {
			for _, g := range n.FreeGPUs[:2] {
				k := 1 + rng.IntN(5)
				n.Shared = append(n.Shared, sched.SharedGPU{Index: g, MemMB: int64(k) * 8192, ComputePct: k * 10, Slices: k})
			}
			n.FreeGPUs = n.FreeGPUs[2:]
			n.Idle = false
		}
	}
	return w
}

// sliceBenchJobs mixes whole-GPU jobs (1–8 GPUs) with slices of 4–40 GB
// and 10–50% compute, some of them two slices.
func sliceBenchJobs(rng *rand.Rand, n int) []*api.Job {
	jobs := make([]*api.Job, n)
	for i := range jobs {
		jw := st.MakeJob().ID(uint64(i + 1)).Priority(uint32(rng.IntN(1000))).
			Submit(st.Epoch.Add(time.Duration(i) * time.Second)).TimeLimit(3600)
		switch r := rng.IntN(100); {
		case r < 40:
			jw.GPUs([]int{1, 2, 4, 8}[rng.IntN(4)]).CPUsPerGPU(8).MemPerGPU(64000)
		case r < 90:
			jw.GPUMem(int64([]int{4, 8, 8, 16, 40}[rng.IntN(5)]) * 1024).GPUCompute([]int{10, 10, 25, 50}[rng.IntN(4)]).CPUsPerTask(2)
		default:
			jw.GPUs(2).GPUMem(16 * 1024).CPUsPerTask(4)
		}
		jobs[i] = jw.Obj()
	}
	return jobs
}

// BenchmarkScheduleMixedSlices: one pass over a mixed queue of whole-GPU
// and slice jobs on 512 nodes × 8 GPUs; decisions/s counts the jobs
// decided (started or given a reason) per second of pass.
func BenchmarkScheduleMixedSlices(b *testing.B) {
	const nodes, gpus = 512, 8
	for _, pending := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d/gpus=%d/pending=%d", nodes, gpus, pending), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, uint64(pending)))
			snap := sliceBenchCluster(rng, nodes, gpus).Jobs(sliceBenchJobs(rng, pending)...).Obj()
			plan := sched.Schedule(snap, now, sched.Config{DefMemPerCPUMB: 1000})
			slices := 0
			for _, s := range plan.Starts {
				if s.Alloc[0].Sliced() {
					slices++
				}
			}
			if slices == 0 || len(plan.Starts)+len(plan.Pending) != pending {
				b.Fatalf("bad plan: %d starts (%d sliced), %d pending for %d jobs", len(plan.Starts), slices, len(plan.Pending), pending)
			}
			b.ResetTimer()
			for b.Loop() {
				sched.Schedule(snap, now, sched.Config{DefMemPerCPUMB: 1000})
			}
			b.ReportMetric(float64(b.N*pending)/b.Elapsed().Seconds(), "decisions/s")
			b.ReportMetric(float64(slices), "slice-starts/op")
			b.ReportMetric(float64(len(plan.Starts)-slices), "whole-starts/op")
		})
	}
}

// BenchmarkPlaceSlices is the unblocked worst case for slices: every job
// is a slice that fits, so each one scans and orders every node.
func BenchmarkPlaceSlices(b *testing.B) {
	const nodes, jobs = 512, 2048
	rng := rand.New(rand.NewPCG(4, 4))
	w := sliceBenchCluster(rng, nodes, 8)
	for i := range jobs {
		w.Jobs(st.MakeJob().ID(uint64(i + 1)).GPUMem(8192).GPUCompute(10).Obj())
	}
	snap := w.Obj()
	if plan := sched.Schedule(snap, now, sched.Config{}); len(plan.Starts) != jobs {
		b.Fatalf("%d of %d slices started", len(plan.Starts), jobs)
	}
	b.ResetTimer()
	for b.Loop() {
		sched.Schedule(snap, now, sched.Config{})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*jobs), "ns/job")
}
