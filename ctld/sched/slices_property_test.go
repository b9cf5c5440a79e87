package sched_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
	"github.com/tide-hpc/tide/topology"
	"github.com/tide-hpc/tide/topology/topotest"
)

// randomSliceSnapshot builds a reproducible cluster with GPUs of two
// sizes (and a few of unknown memory), some whole-allocated, some
// already shared by slices, partitions with different oversubscription
// ratios (one without slicing) and a queue that mixes whole-GPU and
// slice requests of every shape.
func randomSliceSnapshot(seed int64, nodes, jobs int) *sched.Snapshot {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x736c69636573))
	pick := func(xs ...int) int { return xs[rng.IntN(len(xs))] }

	w := st.MakeSnapshot()
	var names []string
	for i := range nodes {
		name := fmt.Sprintf("n%03d", i+1)
		names = append(names, name)
		g := pick(0, 4, 8, 8)
		nw := st.MakeNode(name).CPUs(pick(16, 64)).Mem(256000).GPUs(g)
		if g > 0 {
			mem := int64(pick(40960, 81920, 81920, 0))
			nw.GPUMem(mem)
			if g == 8 && rng.IntN(3) == 0 {
				nw.Matrix([]*topology.Matrix{topotest.DGXH100().Matrix, topotest.TwoIslands().Matrix}[rng.IntN(2)])
			}
			for x := range g {
				switch rng.IntN(6) {
				case 0:
					nw.UsedGPUs(x)
				case 1, 2:
					// Shared, with what it commits within its capacity.
					m := rng.Int64N(mem + 1)
					nw.SharedGPU(x, m-m%1024, rng.IntN(101), 1+rng.IntN(6))
				}
			}
		}
		if rng.IntN(10) == 0 {
			nw.Drained()
		}
		w.Nodes(nw.Obj())
	}
	subset := func(p int) []string { return randomSubset(rng, names, p) }
	w.Partitions(
		st.MakePartition("all", names...).Obj(),
		st.MakePartition("over", subset(60)...).Oversubscribe([]float64{1.2, 1.5}[rng.IntN(2)], 1.2).Obj(),
		st.MakePartition("whole", subset(30)...).NoSlicing().Obj(),
	)
	parts := []string{"all", "all", "over", "over", "whole"}
	for i := range jobs {
		jw := st.MakeJob().ID(uint64(i + 1)).Partition(parts[rng.IntN(len(parts))]).
			Priority(uint32(rng.IntN(3))).Submit(st.Epoch.Add(time.Duration(rng.IntN(50)) * time.Second))
		if rng.IntN(4) == 0 {
			jw.Nodes(pick(1, 2, 3))
		}
		if rng.IntN(3) == 0 {
			// Whole GPUs.
			switch rng.IntN(2) {
			case 0:
				jw.GPUs(pick(1, 2, 4, 8))
			case 1:
				jw.GPUsPerNode(pick(1, 2))
			}
		} else {
			switch rng.IntN(4) {
			case 0:
				jw.GPUMem(int64(pick(4096, 8192, 8192, 20480, 40960, 92160)))
			case 1:
				jw.GPUCompute(pick(10, 25, 50, 100))
			default:
				jw.GPUMem(int64(pick(4096, 8192, 16384))).GPUCompute(pick(5, 10, 30))
			}
			switch rng.IntN(4) {
			case 0:
				jw.GPUs(pick(2, 3))
			case 1:
				jw.GPUsPerNode(2)
			}
		}
		if rng.IntN(12) == 0 {
			jw.Exclusive()
		}
		if rng.IntN(10) == 0 {
			jw.NodeList(names[rng.IntN(len(names))])
		}
		w.Jobs(jw.Obj())
	}
	return w.Obj()
}

// gpuUse is one node's GPUs while a plan is replayed.
type gpuUse struct {
	info   *sched.NodeInfo
	whole  map[int]uint64 // GPU → job
	shared map[int]*sched.SharedGPU
}

// checkSlicePlan replays the plan's starts in order over the snapshot's
// GPU state and checks the GPU invariants: no GPU is whole-allocated
// twice or both whole and shared, slices land only on free or shared
// GPUs, committed memory and compute stay within capacity × the job's
// partition ratio, a job's slices on one node are on different GPUs,
// and no slice starts in a partition without slicing. It returns how
// many slices landed on GPUs that were already shared.
func checkSlicePlan(t *testing.T, snap *sched.Snapshot, plan sched.Plan) (onShared int) {
	t.Helper()
	use := map[string]*gpuUse{}
	for i := range snap.Nodes {
		n := &snap.Nodes[i]
		u := &gpuUse{info: n, whole: map[int]uint64{}, shared: map[int]*sched.SharedGPU{}}
		for _, sh := range n.Shared {
			u.shared[sh.Index] = &sched.SharedGPU{Index: sh.Index, MemMB: sh.MemMB, ComputePct: sh.ComputePct, Slices: sh.Slices}
		}
		for g := range n.GPUs {
			if !slices.Contains(n.FreeGPUs, g) && u.shared[g] == nil {
				u.whole[g] = 0 // held by a running job
			}
		}
		use[n.Name] = u
	}
	jobs := map[uint64]*api.Job{}
	for _, j := range snap.Pending {
		jobs[j.ID] = j
	}
	for _, s := range plan.Starts {
		j := jobs[s.JobID]
		part := snap.Partitions[j.Partition]
		for _, a := range s.Alloc {
			u := use[a.Node]
			if a.Sliced() != (j.Sliced() && len(a.GPUs) > 0) {
				t.Errorf("job %d on %s: alloc %+v does not match the request's kind", j.ID, a.Node, a)
			}
			if !a.Sliced() {
				for _, g := range a.GPUs {
					if u.shared[g] != nil {
						t.Errorf("job %d: whole GPU %d of %s is shared by slices", j.ID, g, a.Node)
					}
					if other, dup := u.whole[g]; dup {
						t.Errorf("job %d: whole GPU %d of %s already held by job %d", j.ID, g, a.Node, other)
					}
					u.whole[g] = j.ID
				}
				continue
			}
			if part.NoGPUSlicing {
				t.Errorf("job %d: slices in partition %s without slicing", j.ID, part.Name)
			}
			if !slices.IsSorted(a.GPUs) || len(slices.Compact(slices.Clone(a.GPUs))) != len(a.GPUs) {
				t.Errorf("job %d: slices on %s not on distinct ascending GPUs: %v", j.ID, a.Node, a.GPUs)
			}
			memCap := int64(float64(u.info.GPUMemMB) * ratio(part.GPUMemRatio))
			pctCap := int(100 * ratio(part.GPUComputeRatio))
			for _, g := range a.GPUs {
				if other, whole := u.whole[g]; whole {
					t.Errorf("job %d: slice on GPU %d of %s, which job %d holds whole", j.ID, g, a.Node, other)
					continue
				}
				sh := u.shared[g]
				switch {
				case sh != nil:
					onShared++
				case g < 0 || g >= u.info.GPUs:
					t.Errorf("job %d: slice on GPU %d of %s, which has %d GPUs", j.ID, g, a.Node, u.info.GPUs)
					continue
				default:
					sh = &sched.SharedGPU{Index: g}
					u.shared[g] = sh
				}
				sh.MemMB += a.GPUMemMB
				sh.ComputePct += a.GPUComputePct
				sh.Slices++
				if sh.MemMB > memCap || sh.ComputePct > pctCap {
					t.Errorf("job %d: GPU %d of %s commits %d MB/%d%%, caps %d MB/%d%% (partition %s)",
						j.ID, g, a.Node, sh.MemMB, sh.ComputePct, memCap, pctCap, part.Name)
				}
			}
		}
	}
	return onShared
}

func ratio(r float64) float64 {
	if r <= 0 {
		return 1
	}
	return r
}

func TestSliceProperties(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 40
	}
	var sliceStarts, wholeStarts, onShared int
	details := map[string]int{}
	for seed := range seeds {
		snap := randomSliceSnapshot(int64(seed), 3+seed%20, 10+seed%120)
		// The seeds take turns over the placement rules: each must keep
		// the same invariants. The rules that measure fragmentation get
		// the queue's own shapes as their workload.
		fits := []sched.SliceFit{sched.SliceFragAware, sched.SliceBestFit, sched.SliceFirstFit, sched.SliceFGD}
		cfg := sched.Config{SliceFit: fits[seed%len(fits)]}
		for _, j := range snap.Pending {
			snap.Workload = append(snap.Workload, sched.JobShape(&j.JobSpec, 8, 0))
		}
		plan := sched.Schedule(snap, now, cfg)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			checkPlan(t, snap, plan)
			onShared += checkSlicePlan(t, snap, plan)
		})
		for _, s := range plan.Starts {
			if s.Alloc[0].Sliced() {
				sliceStarts++
			} else {
				wholeStarts++
			}
		}
		for _, d := range plan.Pending {
			for _, code := range []string{string(api.DetailInsufficientGPUMem), string(api.DetailInsufficientGPUCompute), "does not allow GPU slices", "GPU slice of"} {
				if strings.Contains(d.Detail, code) {
					details[code]++
				}
			}
		}
	}
	// The generator must reach every path, or the invariants hold
	// vacuously.
	if sliceStarts < seeds || wholeStarts < seeds/2 || onShared < seeds {
		t.Errorf("too few starts: %d slice, %d whole, %d slices onto shared GPUs", sliceStarts, wholeStarts, onShared)
	}
	for _, code := range []string{string(api.DetailInsufficientGPUMem), string(api.DetailInsufficientGPUCompute), "does not allow GPU slices", "GPU slice of"} {
		if details[code] == 0 {
			t.Errorf("no pending job with %q over %d seeds", code, seeds)
		}
	}
	t.Logf("%d slice starts (%d slices onto shared GPUs), %d whole starts, pending details %v",
		sliceStarts, onShared, wholeStarts, details)
}
