package sched_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
	"github.com/tide-hpc/tide/topology/topotest"
)

// benchCluster builds nodes × gpus nodes in one partition with half the
// cluster busy: every other node has all its GPUs and most CPUs taken,
// the others a random few.
func benchCluster(rng *rand.Rand, nodes, gpus int) *st.SnapshotWrapper {
	w := st.Cluster("gpu", nodes, 128, 1024000, gpus)
	s := w.Obj()
	for i := range s.Nodes {
		n := &s.Nodes[i]
		var used int
		if i%2 == 0 {
			used = gpus
		} else {
			used = rng.IntN(gpus/2 + 1)
		}
		if used > 0 {
			n.FreeGPUs = n.FreeGPUs[used:]
			n.FreeCPUs -= used * 12
			n.FreeMemMB -= int64(used) * 100000
			n.Idle = false
		}
	}
	return w
}

// benchJobs makes pending mixed-size jobs: mostly single-node 1–8 GPU
// jobs, some multi-node 8-GPU-per-node jobs, a few CPU-only ones.
func benchJobs(rng *rand.Rand, n int) []*api.Job {
	jobs := make([]*api.Job, n)
	for i := range jobs {
		jw := st.MakeJob().ID(uint64(i + 1)).Priority(uint32(rng.IntN(1000))).
			Submit(st.Epoch.Add(time.Duration(i) * time.Second)).TimeLimit(3600)
		switch r := rng.IntN(100); {
		case r < 85:
			jw.GPUs([]int{1, 1, 2, 4, 8}[rng.IntN(5)]).CPUsPerGPU(8).MemPerGPU(64000)
		case r < 95:
			jw.Nodes(2 + rng.IntN(3)).GPUsPerNode(8).TasksPerNode(8).CPUsPerTask(12)
		default:
			jw.Tasks(1 + rng.IntN(16)).MemPerCPU(4000)
		}
		jobs[i] = jw.Obj()
	}
	return jobs
}

// withTopology gives a 512-node bench cluster the 3-level tree
// ThreeLevel(4, 8, 16) and GPU link matrices: even nodes a DGX H100,
// odd ones two NVLink islands.
func withTopology(w *st.SnapshotWrapper) *st.SnapshotWrapper {
	s := w.Obj()
	dgx, islands := topotest.DGXH100().Matrix, topotest.TwoIslands().Matrix
	for i := range s.Nodes {
		s.Nodes[i].Matrix = dgx
		if i%2 == 1 {
			s.Nodes[i].Matrix = islands
		}
	}
	return w.Tree(topotest.ThreeLevel(4, 8, 16, "gpu").Tree)
}

func BenchmarkSchedule(b *testing.B) {
	for _, bc := range []struct {
		pending int
		topo    bool
	}{{1000, false}, {10000, false}, {100000, false}, {1000, true}, {10000, true}, {100000, true}} {
		const nodes, gpus = 512, 8
		pending := bc.pending
		name := fmt.Sprintf("nodes=%d/gpus=%d/pending=%d", nodes, gpus, pending)
		if bc.topo {
			name += "/topology"
		}
		b.Run(name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, uint64(pending)))
			w := benchCluster(rng, nodes, gpus)
			if bc.topo {
				withTopology(w)
			}
			snap := w.Jobs(benchJobs(rng, pending)...).Obj()
			plan := sched.Schedule(snap, now, sched.Config{DefMemPerCPUMB: 1000})
			if len(plan.Starts) == 0 || len(plan.Starts)+len(plan.Pending) != pending {
				b.Fatalf("bad plan: %d starts, %d pending for %d jobs", len(plan.Starts), len(plan.Pending), pending)
			}
			b.ResetTimer()
			for b.Loop() {
				sched.Schedule(snap, now, sched.Config{DefMemPerCPUMB: 1000})
			}
			b.ReportMetric(float64(len(plan.Starts)), "starts/op")
		})
	}
}

// BenchmarkScheduleUnblocked is the worst case of the main loop: every
// job fits, so each one scans and scores every node of the partition.
func BenchmarkScheduleUnblocked(b *testing.B) {
	const nodes, gpus, pending = 512, 8, 2048
	for _, topo := range []bool{false, true} {
		name := fmt.Sprintf("nodes=%d/gpus=%d/pending=%d", nodes, gpus, pending)
		if topo {
			name += "/topology"
		}
		b.Run(name, func(b *testing.B) {
			jobs := make([]*api.Job, pending)
			for i := range jobs {
				jobs[i] = st.MakeJob().ID(uint64(i + 1)).GPUs(1).CPUsPerGPU(4).Obj()
			}
			w := st.Cluster("gpu", nodes, 128, 1024000, gpus)
			if topo {
				withTopology(w)
			}
			snap := w.Jobs(jobs...).Obj()
			plan := sched.Schedule(snap, now, sched.Config{})
			if len(plan.Starts) != pending {
				b.Fatalf("%d starts, want %d", len(plan.Starts), pending)
			}
			b.ResetTimer()
			for b.Loop() {
				sched.Schedule(snap, now, sched.Config{})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pending), "ns/job")
		})
	}
}

// BenchmarkPlace measures the placement of one job on a fragmented
// 512-node cluster: each pass places jobs jobs of one shape, all of which
// fit, and ns/job divides the pass by them (pass setup, about 40µs here,
// amortized).
func BenchmarkPlace(b *testing.B) {
	shapes := []struct {
		name string
		jobs int
		job  *st.JobWrapper
	}{
		{"gpus=1", 256, st.MakeJob().GPUs(1).CPUsPerGPU(4)},
		{"gpus=8", 32, st.MakeJob().GPUs(8)},
		{"gpus=2", 128, st.MakeJob().GPUs(2).CPUsPerGPU(4)},
		{"nodes=4/gpus=32", 8, st.MakeJob().Nodes(4).GPUsPerNode(8)},
	}
	for _, sh := range shapes {
		for _, topo := range []bool{false, true} {
			s, name := sh, "nodes=512/"+sh.name
			if topo {
				name += "/topology"
			}
			b.Run(name, func(b *testing.B) {
				rng := rand.New(rand.NewPCG(2, 2))
				w := benchCluster(rng, 512, 8)
				if topo {
					withTopology(w)
				}
				for i := range s.jobs {
					w.Jobs(s.job.ID(uint64(i + 1)).Obj())
				}
				snap := w.Obj()
				if plan := sched.Schedule(snap, now, sched.Config{}); len(plan.Starts) != s.jobs {
					b.Fatalf("%d of %d jobs started: %+v", len(plan.Starts), s.jobs, plan.Pending)
				}
				b.ResetTimer()
				for b.Loop() {
					sched.Schedule(snap, now, sched.Config{})
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*s.jobs), "ns/job")
			})
		}
	}
}

// BenchmarkSchedulePolicy is BenchmarkSchedule's 10k-job pass under each
// policy. Running jobs end at staggered times (NodeInfo.Releases) so
// that backfill has a plan in time to reserve in and EASY scans the
// queue for jobs that leave its one reservation alone. Backfill runs at
// its default test limit (500) and at others, for the cost per tested
// job; reservations/op counts the jobs reserved.
func BenchmarkSchedulePolicy(b *testing.B) {
	const nodes, gpus, pending = 512, 8, 10000
	cases := []struct {
		pol  sched.Policy
		test int
	}{{sched.PolicyPriority, 0}, {sched.PolicyFIFO, 0}, {sched.PolicyEASY, 0}, {sched.PolicyBackfill, 0},
		{sched.PolicyBackfill, 100}, {sched.PolicyBackfill, 2000}, {sched.PolicyBackfill, pending}}
	for _, bc := range cases {
		name := fmt.Sprintf("nodes=%d/gpus=%d/pending=%d/policy=%s", nodes, gpus, pending, bc.pol)
		if bc.test > 0 {
			name += fmt.Sprintf(",max_job_test=%d", bc.test)
		}
		b.Run(name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, pending))
			w := benchCluster(rng, nodes, gpus)
			s := w.Obj()
			for i := range s.Nodes {
				n := &s.Nodes[i]
				if used := n.GPUs - len(n.FreeGPUs); used > 0 {
					held := make([]int, 0, used)
					for g := range n.GPUs {
						if !slices.Contains(n.FreeGPUs, g) {
							held = append(held, g)
						}
					}
					n.Releases = []sched.Release{{At: now.Add(time.Duration(60+rng.IntN(7200)) * time.Second),
						CPUs: n.CPUs - n.FreeCPUs, MemMB: n.MemoryMB - n.FreeMemMB, GPUs: held}}
				}
			}
			jobs := benchJobs(rng, pending)
			for _, j := range jobs {
				j.TimeLimit = int64(60 * (1 + rng.IntN(240)))
			}
			snap := w.Jobs(jobs...).Obj()
			cfg := sched.Config{DefMemPerCPUMB: 1000, Policy: bc.pol, Backfill: sched.BackfillConfig{MaxJobTest: bc.test}}
			plan := sched.Schedule(snap, now, cfg)
			if len(plan.Starts)+len(plan.Pending) != pending {
				b.Fatalf("bad plan: %d starts, %d pending for %d jobs", len(plan.Starts), len(plan.Pending), pending)
			}
			b.ResetTimer()
			for b.Loop() {
				sched.Schedule(snap, now, cfg)
			}
			b.ReportMetric(float64(len(plan.Starts)), "starts/op")
			b.ReportMetric(float64(len(plan.Reservations)), "reservations/op")
		})
	}
}

// BenchmarkScheduleFull is make bench-scale's pass: 2,000 nodes, each
// full with one 8-GPU job ending at a staggered time, and a backlog of
// 1-GPU jobs under the default policy. Nothing starts; the pass orders
// the backlog, reserves for the first jobs and gives every job its
// reason.
func BenchmarkScheduleFull(b *testing.B) {
	const nodes, gpus = 2000, 8
	for _, pending := range []int{20000, 100000} {
		b.Run(fmt.Sprintf("nodes=%d/pending=%d", nodes, pending), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(4, uint64(pending)))
			w := st.Cluster("gpu", nodes, 128, 1024000, gpus)
			s := w.Obj()
			for i := range s.Nodes {
				n := &s.Nodes[i]
				held := slices.Clone(n.FreeGPUs)
				n.FreeGPUs, n.FreeCPUs, n.FreeMemMB, n.Idle = nil, n.FreeCPUs-96, n.FreeMemMB-800000, false
				n.Releases = []sched.Release{{At: now.Add(time.Duration(600+rng.IntN(86400)) * time.Second),
					CPUs: 96, MemMB: 800000, GPUs: held}}
			}
			jobs := make([]*api.Job, pending)
			for i := range jobs {
				jobs[i] = st.MakeJob().ID(uint64(i + 1)).GPUs(1).CPUsPerGPU(4).TimeLimit(int64(600 * (1 + rng.IntN(12)))).
					Submit(st.Epoch.Add(time.Duration(i) * time.Millisecond)).Obj()
			}
			snap := w.Jobs(jobs...).Obj()
			cfg := sched.Config{DefMemPerCPUMB: 1000, Policy: sched.PolicyTide}
			plan := sched.Schedule(snap, now, cfg)
			if len(plan.Starts) != 0 || len(plan.Pending) != pending {
				b.Fatalf("bad plan: %d starts, %d pending for %d jobs", len(plan.Starts), len(plan.Pending), pending)
			}
			// The controller's passes reuse their memory (sched.Scratch).
			var sc sched.Scratch
			b.ResetTimer()
			for b.Loop() {
				sc.Schedule(snap, now, cfg)
			}
		})
	}
}
