package sched_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
)

// TestFragAwarePlacement pins where each placement rule puts one job
// when the workload's fragmentation and best fit disagree (and where
// they must agree).
func TestFragAwarePlacement(t *testing.T) {
	const (
		def   = sched.SliceFragAware
		best  = sched.SliceBestFit
		first = sched.SliceFirstFit
		fgd   = sched.SliceFGD
	)
	slice40 := []sched.WorkloadShape{{GPUs: 1, GPUComputePct: 40, Weight: 1}}
	fourGPUs := []sched.WorkloadShape{{GPUs: 4, Weight: 1}}
	tests := []struct {
		name     string
		nodes    []sched.NodeInfo
		spread   bool
		workload []sched.WorkloadShape
		running  []sched.RunningJob
		job      *st.JobWrapper
		want     map[sched.SliceFit]string // node:GPUs
	}{
		{
			// GPU 0 has 45% left, GPU 1 80%: best fit fills GPU 0 down to
			// 10%, which no 40% slice can use; GPU 1 keeps 45%.
			name: "slice-leaves-room-for-the-popular-slice",
			nodes: []sched.NodeInfo{
				st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G).SharedGPU(0, 0, 55, 1).SharedGPU(1, 0, 20, 1).Obj(),
			},
			workload: slice40,
			job:      st.MakeJob().GPUCompute(35),
			want:     map[sched.SliceFit]string{def: "gpu01:[1]", fgd: "gpu01:[1]", best: "gpu01:[0]", first: "gpu01:[0]"},
		},
		{
			// Two slices on different GPUs: the first on GPU 1 (as
			// above), the second on a free GPU rather than on GPU 0.
			name: "slices-of-one-job-by-fragmentation",
			nodes: []sched.NodeInfo{
				st.MakeNode("gpu01").GPUs(4).GPUMem(gpu80G).SharedGPU(0, 0, 55, 1).SharedGPU(1, 0, 20, 1).Obj(),
			},
			workload: slice40,
			job:      st.MakeJob().GPUs(2).GPUCompute(35),
			want:     map[sched.SliceFit]string{def: "gpu01:[1 2]", fgd: "gpu01:[1 2]", best: "gpu01:[0 1]"},
		},
		{
			// A 2-GPU job on gpu01 (5 free) leaves 3, too few for the
			// popular 4-GPU jobs; gpu02 (8 free) keeps room for one.
			name: "whole-job-keeps-room-for-the-popular-shape",
			nodes: []sched.NodeInfo{
				st.MakeNode("gpu01").GPUs(8).UsedGPUs(0, 1, 2).Obj(),
				st.MakeNode("gpu02").GPUs(8).Obj(),
				st.MakeNode("gpu03").GPUs(8).Obj(),
			},
			workload: fourGPUs,
			job:      st.MakeJob().GPUs(2),
			want:     map[sched.SliceFit]string{def: "gpu02:[0 1]", fgd: "gpu02:[0 1]", best: "gpu01:[3 4]"},
		},
		{
			// The same with gpu02 the last free node: the default spares
			// it for whole-node jobs (holes.go), FGD alone does not.
			name: "default-spares-the-last-free-node",
			nodes: []sched.NodeInfo{
				st.MakeNode("gpu01").GPUs(8).UsedGPUs(0, 1, 2).Obj(),
				st.MakeNode("gpu02").GPUs(8).Obj(),
			},
			workload: fourGPUs,
			job:      st.MakeJob().GPUs(2),
			want:     map[sched.SliceFit]string{def: "gpu01:[3 4]", fgd: "gpu02:[0 1]", best: "gpu01:[3 4]"},
		},
		{
			// A 12-CPU GPU job on the 16-CPU node strands its other GPU
			// (4 CPUs left): best fit takes it for its fewer free GPUs.
			name: "whole-job-does-not-strand-a-gpu-behind-its-cpus",
			nodes: []sched.NodeInfo{
				st.MakeNode("p100").GPUs(2).CPUs(16).Obj(),
				st.MakeNode("p100b").GPUs(2).CPUs(16).Obj(),
				st.MakeNode("g2").GPUs(8).CPUs(96).UsedGPUs(0, 1).Obj(),
			},
			workload: []sched.WorkloadShape{{GPUs: 1, CPUs: 12, Weight: 1}},
			job:      st.MakeJob().GPUs(1).CPUsPerGPU(12),
			want:     map[sched.SliceFit]string{def: "g2:[2]", fgd: "g2:[2]", best: "p100:[0]"},
		},
		{
			// The workload asks for A100s: a job that may run anywhere
			// leaves them for it.
			name: "gpu-model-of-the-workload",
			nodes: []sched.NodeInfo{
				st.MakeNode("a1").GPUs(8).Model("A100").UsedGPUs(0, 1, 2, 3).Obj(),
				st.MakeNode("h1").GPUs(8).Model("H100").UsedGPUs(0, 1, 2, 3).Obj(),
			},
			workload: []sched.WorkloadShape{{GPUs: 1, GPUModel: "a100", Weight: 1}},
			job:      st.MakeJob().GPUs(1),
			want:     map[sched.SliceFit]string{def: "h1:[4]", fgd: "h1:[4]", best: "a1:[4]"},
		},
		{
			// Without a Workload the running jobs are the workload.
			name: "running-jobs-are-the-workload",
			nodes: []sched.NodeInfo{
				st.MakeNode("gpu01").GPUs(8).UsedGPUs(0, 1, 2).Obj(),
				st.MakeNode("gpu02").GPUs(8).Obj(),
				st.MakeNode("gpu03").GPUs(8).Obj(),
			},
			running: []sched.RunningJob{
				{JobID: 90, Alloc: []api.NodeAlloc{{Node: "gpu09", CPUs: 1, GPUs: []int{0, 1, 2, 3}}}},
				{JobID: 91, Alloc: []api.NodeAlloc{{Node: "gpu09", CPUs: 1, GPUs: []int{4, 5, 6, 7}}}},
			},
			job:  st.MakeJob().GPUs(2),
			want: map[sched.SliceFit]string{def: "gpu02:[0 1]", fgd: "gpu02:[0 1]", best: "gpu01:[3 4]"},
		},
		{
			// Shapes without GPUs say nothing about GPU fragmentation:
			// every rule that measures it is best fit.
			name: "no-gpu-shapes-is-best-fit",
			nodes: []sched.NodeInfo{
				st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G).SharedGPU(0, 0, 55, 1).SharedGPU(1, 0, 20, 1).Obj(),
			},
			workload: []sched.WorkloadShape{{CPUs: 4, Weight: 5}},
			job:      st.MakeJob().GPUCompute(35),
			want:     map[sched.SliceFit]string{def: "gpu01:[0]", fgd: "gpu01:[0]", best: "gpu01:[0]"},
		},
		{
			// A spread partition wants headroom, not packing: no rule
			// measures fragmentation there.
			name:     "spread-partition-is-not-measured",
			nodes:    []sched.NodeInfo{st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G).SharedGPU(0, 0, 55, 1).SharedGPU(1, 0, 20, 1).Obj()},
			spread:   true,
			workload: slice40,
			job:      st.MakeJob().GPUCompute(35),
			want:     map[sched.SliceFit]string{def: "gpu01:[0]", fgd: "gpu01:[0]"},
		},
	}
	for _, tt := range tests {
		for fit, want := range tt.want {
			t.Run(fmt.Sprintf("%s/fit=%d", tt.name, fit), func(t *testing.T) {
				names := make([]string, len(tt.nodes))
				for i := range tt.nodes {
					names[i] = tt.nodes[i].Name
				}
				part := st.MakePartition(st.DefaultPartition, names...).Obj()
				part.Spread = tt.spread
				snap := st.MakeSnapshot().Nodes(tt.nodes...).Partitions(part).Jobs(tt.job.ID(1).Obj()).Obj()
				snap.Workload, snap.Running = tt.workload, tt.running
				plan := sched.Schedule(snap, now, sched.Config{SliceFit: fit})
				if len(plan.Starts) != 1 {
					t.Fatalf("no start: %+v", plan.Pending)
				}
				a := plan.Starts[0].Alloc[0]
				if got := fmt.Sprintf("%s:%v", a.Node, a.GPUs); got != want {
					t.Errorf("placed on %s, want %s", got, want)
				}
			})
		}
	}
}

// refGPU is one GPU of the reference model: free, or shared with what
// its slices commit.
type refGPU struct {
	free     bool
	pct      int
	mem      int64
	occupied bool // whole-allocated
}

// refNode is a node of the reference model.
type refNode struct {
	name   string
	model  string
	cpus   int
	mem    int64
	gpus   []refGPU
	memCap int64
	pctCap int
	usable bool
}

// refTakes reports whether GPU g takes one unit of shape w, from the
// definition: a whole GPU only when free, a slice when it fits the caps.
func refTakes(n *refNode, g refGPU, w sched.WorkloadShape) bool {
	if g.occupied {
		return false
	}
	if w.GPUMemMB == 0 && w.GPUComputePct == 0 {
		return g.free
	}
	return g.mem+w.GPUMemMB <= n.memCap && g.pct+w.GPUComputePct <= n.pctCap
}

// refLeft is a GPU's free share (0 when whole-allocated).
func refLeft(n *refNode, g refGPU) float64 {
	switch {
	case g.occupied:
		return 0
	case g.free:
		return 1
	}
	left := float64(n.pctCap-g.pct) / float64(n.pctCap)
	if n.memCap > 0 {
		left = min(left, float64(n.memCap-g.mem)/float64(n.memCap))
	}
	return left
}

// refFrag is F_n straight from its definition (fgd.go), written
// independently of the pass's incremental bookkeeping.
func refFrag(n *refNode, ws []sched.WorkloadShape) float64 {
	total := 0.0
	for _, w := range ws {
		total += w.Weight
	}
	f := 0.0
	for _, w := range ws {
		u, nonHost, hosts := 0.0, 0.0, 0
		for _, g := range n.gpus {
			u += refLeft(n, g)
			if refTakes(n, g, w) {
				hosts++
			} else {
				nonHost += refLeft(n, g)
			}
		}
		fits := hosts >= w.GPUs && n.cpus >= w.CPUs && n.mem >= w.MemMB &&
			(w.GPUModel == "" || strings.EqualFold(w.GPUModel, n.model))
		if fits {
			f += w.Weight / total * nonHost
		} else {
			f += w.Weight / total * u
		}
	}
	return f
}

// refPlacements lists every placement of a job (whole GPUs, or one
// slice) on n with the growth of F_n: the GPU sets are the indices it
// would take (for whole GPUs all sets are alike, so the lowest).
func refPlacements(n *refNode, ws []sched.WorkloadShape, gpus, pct int, gmem int64, cpus int, mem int64) map[string]float64 {
	out := map[string]float64{}
	if !n.usable || n.cpus < cpus || n.mem < mem {
		return out
	}
	before := refFrag(n, ws)
	after := func(m *refNode) float64 { m.cpus -= cpus; m.mem -= mem; return refFrag(m, ws) - before }
	clone := func() *refNode { c := *n; c.gpus = slices.Clone(n.gpus); return &c }
	if pct == 0 && gmem == 0 {
		var idx []int
		for i, g := range n.gpus {
			if g.free && len(idx) < gpus {
				idx = append(idx, i)
			}
		}
		if len(idx) < gpus {
			return out
		}
		c := clone()
		for _, i := range idx {
			c.gpus[i] = refGPU{occupied: true}
		}
		out[fmt.Sprintf("%s:%v", n.name, idx)] = after(c)
		return out
	}
	for i, g := range n.gpus {
		if !refTakes(n, g, sched.WorkloadShape{GPUs: 1, GPUComputePct: pct, GPUMemMB: gmem}) {
			continue
		}
		c := clone()
		c.gpus[i] = refGPU{pct: g.pct + pct, mem: g.mem + gmem}
		out[fmt.Sprintf("%s:[%d]", n.name, i)] = after(c)
	}
	return out
}

// TestFGDMinimizesFragmentation checks SliceFGD against the definition
// on random clusters, workloads and jobs: the placement it chooses
// makes F_n grow no more than any other feasible placement (node and
// GPU), and it starts the job whenever one exists.
func TestFGDMinimizesFragmentation(t *testing.T) {
	seeds := 400
	if testing.Short() {
		seeds = 60
	}
	placed, differs := 0, 0
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 0xf6d))
		pick := func(xs ...int) int { return xs[rng.IntN(len(xs))] }
		ratio := []float64{1, 1, 1.5}[rng.IntN(3)]
		var nodes []sched.NodeInfo
		var refs []*refNode
		for i := range 2 + rng.IntN(5) {
			name := fmt.Sprintf("n%d", i+1)
			g := pick(2, 4, 8)
			cpus := pick(16, 64, 96)
			model := []string{"a100", "h100"}[rng.IntN(2)]
			gmem := int64(pick(40960, 81920))
			nw := st.MakeNode(name).GPUs(g).CPUs(cpus).Mem(256000).GPUMem(gmem).Model(model)
			ref := &refNode{name: name, model: model, usable: true,
				memCap: int64(float64(gmem) * ratio), pctCap: int(100 * ratio)}
			for x := range g {
				switch rng.IntN(5) {
				case 0:
					nw.UsedGPUs(x)
					ref.gpus = append(ref.gpus, refGPU{occupied: true})
				case 1, 2:
					pct := 5 * rng.IntN(ref.pctCap/5+1)
					mem := int64(4096 * rng.IntN(int(ref.memCap/4096)+1))
					nw.SharedGPU(x, mem, pct, 1)
					ref.gpus = append(ref.gpus, refGPU{pct: pct, mem: mem})
				default:
					ref.gpus = append(ref.gpus, refGPU{free: true})
				}
			}
			used := rng.IntN(cpus)
			nw.UsedCPUs(used)
			ref.cpus, ref.mem = cpus-used, 256000
			if rng.IntN(8) == 0 {
				nw.Drained()
				ref.usable = false
			}
			nodes = append(nodes, nw.Obj())
			refs = append(refs, ref)
		}
		// At most five shapes, each above 5 % of the weight, so that the
		// pass keeps them all (95 % coverage).
		var ws []sched.WorkloadShape
		for range 1 + rng.IntN(5) {
			w := sched.WorkloadShape{GPUs: pick(1, 1, 2, 4, 8), CPUs: pick(0, 4, 12, 24), Weight: float64(1 + rng.IntN(3))}
			if rng.IntN(2) == 0 {
				w.GPUs = 1
				w.GPUComputePct = pick(0, 10, 25, 40, 60, 80)
				w.GPUMemMB = int64(pick(0, 8192, 20480))
				if w.GPUComputePct == 0 && w.GPUMemMB == 0 {
					w.GPUComputePct = 50
				}
			}
			if rng.IntN(4) == 0 {
				w.GPUModel = "A100"
			}
			ws = append(ws, w)
		}
		job := st.MakeJob().ID(1).CPUsPerGPU(pick(1, 8, 12)).MemPerGPU(1000)
		gpus, pct, gmem := pick(1, 1, 2, 4), 0, int64(0)
		if rng.IntN(2) == 0 {
			gpus = 1
			pct, gmem = pick(0, 10, 30, 50, 70), int64(pick(0, 8192, 30720))
			if pct == 0 && gmem == 0 {
				pct = 20
			}
			job.GPUCompute(pct).GPUMem(gmem)
		}
		job.GPUs(gpus)
		names := make([]string, len(nodes))
		for i := range nodes {
			names[i] = nodes[i].Name
		}
		snap := st.MakeSnapshot().Nodes(nodes...).
			Partitions(st.MakePartition(st.DefaultPartition, names...).Oversubscribe(ratio, ratio).Obj()).
			Jobs(job.Obj()).Obj()
		snap.Workload = ws
		cpus := gpus * snap.Pending[0].CPUsPerGPU
		all := map[string]float64{}
		for _, ref := range refs {
			for k, d := range refPlacements(ref, ws, gpus, pct, gmem, cpus, int64(gpus)*1000) {
				all[k] = d
			}
		}
		plan := sched.Schedule(snap, now, sched.Config{SliceFit: sched.SliceFGD})
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if len(plan.Starts) == 0 {
				if len(all) > 0 {
					t.Fatalf("job pending (%+v) but %d placements exist: %v", plan.Pending, len(all), all)
				}
				return
			}
			a := plan.Starts[0].Alloc[0]
			got := fmt.Sprintf("%s:%v", a.Node, a.GPUs)
			d, ok := all[got]
			if !ok {
				t.Fatalf("placed on %s, not a placement of the reference: %v", got, all)
			}
			minD := math.Inf(1)
			for _, x := range all {
				minD = min(minD, x)
			}
			if d > minD+1e-9 {
				t.Errorf("placed on %s, fragmentation +%.4f; the least is +%.4f (%v)", got, d, minD, all)
			}
			placed++
			if bf := sched.Schedule(snap, now, sched.Config{SliceFit: sched.SliceBestFit}); len(bf.Starts) == 1 {
				b := bf.Starts[0].Alloc[0]
				if fmt.Sprintf("%s:%v", b.Node, b.GPUs) != got {
					differs++
				}
			}
		})
	}
	// The generator must make FGD place jobs, and place some of them
	// where best fit would not, or the check holds vacuously.
	if placed < seeds/2 || differs < seeds/20 {
		t.Errorf("%d of %d seeds placed the job, %d of them elsewhere than best fit", placed, seeds, differs)
	}
	t.Logf("%d of %d seeds placed the job, %d elsewhere than best fit", placed, seeds, differs)
}

// runningOf lists, as the controller does in share mode, a running job
// for what each node of s holds: one for its whole GPUs (those missing
// from FreeGPUs and Shared), one per shared GPU.
func runningOf(s *sched.Snapshot) []sched.RunningJob {
	var out []sched.RunningJob
	for i := range s.Nodes {
		n := &s.Nodes[i]
		var whole []int
		for g := range n.GPUs {
			if !slices.Contains(n.FreeGPUs, g) && !slices.ContainsFunc(n.Shared, func(x sched.SharedGPU) bool { return x.Index == g }) {
				whole = append(whole, g)
			}
		}
		if len(whole) > 0 {
			out = append(out, sched.RunningJob{JobID: uint64(len(out) + 1000000),
				Alloc: []api.NodeAlloc{{Node: n.Name, CPUs: 12 * len(whole), GPUs: whole}}})
		}
		for _, sh := range n.Shared {
			out = append(out, sched.RunningJob{JobID: uint64(len(out) + 1000000),
				Alloc: []api.NodeAlloc{{Node: n.Name, CPUs: 2, GPUs: []int{sh.Index}, GPUMemMB: sh.MemMB, GPUComputePct: sh.ComputePct}}})
		}
	}
	return out
}

// BenchmarkSlicePlacement: one pass over 10,000 pending jobs on 512 nodes
// × 8 GPUs under each placement rule, with the running jobs listed (as
// in share mode) so that the default measures fragmentation against
// them. mixed is the slice bench's queue and cluster (whole-GPU jobs and
// slices, a quarter of the busy nodes' GPUs shared), whole the Schedule
// bench's (whole-GPU and multi-node jobs).
func BenchmarkSlicePlacement(b *testing.B) {
	const nodes, gpus, pending = 512, 8, 10000
	fits := []struct {
		name string
		fit  sched.SliceFit
	}{{"fragaware", sched.SliceFragAware}, {"bestfit", sched.SliceBestFit}, {"fgd", sched.SliceFGD}, {"firstfit", sched.SliceFirstFit}}
	for _, queue := range []string{"mixed", "whole"} {
		rng := rand.New(rand.NewPCG(5, pending))
		var snap *sched.Snapshot
		if queue == "mixed" {
			snap = sliceBenchCluster(rng, nodes, gpus).Jobs(sliceBenchJobs(rng, pending)...).Obj()
		} else {
			snap = benchCluster(rng, nodes, gpus).Jobs(benchJobs(rng, pending)...).Obj()
		}
		snap.Running = runningOf(snap)
		for _, f := range fits {
			b.Run(fmt.Sprintf("nodes=%d/gpus=%d/pending=%d/%s/fit=%s", nodes, gpus, pending, queue, f.name), func(b *testing.B) {
				cfg := sched.Config{DefMemPerCPUMB: 1000, SliceFit: f.fit}
				plan := sched.Schedule(snap, now, cfg)
				if len(plan.Starts) == 0 || len(plan.Starts)+len(plan.Pending) != pending {
					b.Fatalf("bad plan: %d starts, %d pending for %d jobs", len(plan.Starts), len(plan.Pending), pending)
				}
				for b.Loop() {
					sched.Schedule(snap, now, cfg)
				}
				b.ReportMetric(float64(len(plan.Starts)), "starts/op")
			})
		}
	}
}
