package sched_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
	"github.com/tide-hpc/tide/topology/topotest"
)

const gpu80G = 80 * 1024 // MB, as NVML reports an 80 GB card in MiB

// sliceJobs makes n pending slice jobs with ids from first, in id order.
func sliceJobs(first, n int, memMB int64, pct int) []*api.Job {
	jobs := make([]*api.Job, n)
	for i := range jobs {
		jobs[i] = st.MakeJob().ID(uint64(first + i)).GPUMem(memMB).GPUCompute(pct).Obj()
	}
	return jobs
}

// gpusByJob maps each started job to its GPU indices on its first node.
func gpusByJob(plan sched.Plan) map[uint64][]int {
	out := map[uint64][]int{}
	for _, s := range plan.Starts {
		out[s.JobID] = s.Alloc[0].GPUs
	}
	return out
}

// TestTwelveSlices is the acceptance case: twelve 8 GB slices on 80 GB
// GPUs fill one GPU (ten fit with ratio 1.0) before the next is touched,
// and all twelve share one GPU with ratio 1.2.
func TestTwelveSlices(t *testing.T) {
	tests := []struct {
		name  string
		ratio float64
		want  map[int]int // GPU index → slices on it
	}{
		{name: "ratio-1.0", ratio: 1.0, want: map[int]int{0: 10, 1: 2}},
		{name: "ratio-unset", ratio: 0, want: map[int]int{0: 10, 1: 2}},
		{name: "ratio-1.2", ratio: 1.2, want: map[int]int{0: 12}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := st.MakeNode("gpu01").GPUs(8).GPUMem(gpu80G).Obj()
			snap := st.MakeSnapshot().Nodes(node).
				Partitions(st.MakePartition(st.DefaultPartition, "gpu01").Oversubscribe(tt.ratio, 0).Obj()).
				Jobs(sliceJobs(1, 12, 8192, 0)...).Obj()
			plan := sched.Schedule(snap, now, sched.Config{})
			if len(plan.Starts) != 12 {
				t.Fatalf("%d starts, want 12; pending %+v", len(plan.Starts), plan.Pending)
			}
			got := map[int]int{}
			for k, s := range plan.Starts {
				a := s.Alloc[0]
				if len(a.GPUs) != 1 || a.GPUMemMB != 8192 {
					t.Fatalf("job %d: alloc %+v, want one 8192 MB slice", s.JobID, a)
				}
				got[a.GPUs[0]]++
				if k < 10 && a.GPUs[0] != 0 {
					t.Errorf("slice %d (job %d) went to GPU %d before GPU 0 was full", k+1, s.JobID, a.GPUs[0])
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("slices per GPU = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSlicePlacement(t *testing.T) {
	tests := []struct {
		name string
		node *st.NodeWrapper
		part *st.PartitionWrapper
		job  *st.JobWrapper
		// want is the GPU list of the start ("" = the job stays
		// pending), else the reason and a piece of the detail.
		want       string
		wantReason api.ReasonCode
		wantDetail string
	}{
		{
			name: "best-fit-fullest-shared-gpu",
			node: st.MakeNode("gpu01").GPUs(4).GPUMem(gpu80G).SharedGPU(0, 40960, 0, 5).SharedGPU(2, 71680, 0, 7),
			job:  st.MakeJob().GPUMem(8192),
			want: "[2]",
		},
		{
			name: "best-fit-skips-shared-gpu-too-full",
			node: st.MakeNode("gpu01").GPUs(4).GPUMem(gpu80G).SharedGPU(0, 40960, 0, 5).SharedGPU(2, 71680, 0, 7),
			job:  st.MakeJob().GPUMem(16384),
			want: "[0]",
		},
		{
			name: "no-shared-room-opens-a-free-gpu",
			node: st.MakeNode("gpu01").GPUs(4).GPUMem(gpu80G).SharedGPU(0, 81920, 0, 10),
			job:  st.MakeJob().GPUMem(8192),
			want: "[1]",
		},
		{
			name: "compute-only-slices-fill-by-compute",
			node: st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G).SharedGPU(0, 0, 60, 2).SharedGPU(1, 0, 80, 4),
			job:  st.MakeJob().GPUCompute(20),
			want: "[1]",
		},
		{
			name:       "compute-cap-turns-away",
			node:       st.MakeNode("gpu01").GPUs(1).GPUMem(gpu80G).SharedGPU(0, 8192, 90, 3),
			job:        st.MakeJob().GPUMem(8192).GPUCompute(20),
			wantReason: api.ReasonResources, wantDetail: "1 InsufficientGPUCompute",
		},
		{
			name: "compute-ratio-lets-it-in",
			node: st.MakeNode("gpu01").GPUs(1).GPUMem(gpu80G).SharedGPU(0, 8192, 90, 3),
			part: st.MakePartition(st.DefaultPartition, "gpu01").Oversubscribe(1, 1.5),
			job:  st.MakeJob().GPUMem(8192).GPUCompute(20),
			want: "[0]",
		},
		{
			name: "several-slices-on-distinct-gpus",
			node: st.MakeNode("gpu01").GPUs(4).GPUMem(gpu80G).SharedGPU(3, 8192, 0, 1),
			job:  st.MakeJob().GPUs(3).GPUMem(8192),
			want: "[0 1 3]",
		},
		{
			name:       "several-slices-never-double-up",
			node:       st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G).UsedGPUs(1),
			job:        st.MakeJob().GPUs(2).GPUMem(8192),
			wantReason: api.ReasonResources, wantDetail: "1 InsufficientGPU",
		},
		{
			name:       "whole-gpu-never-lands-on-a-shared-one",
			node:       st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G).SharedGPU(0, 8192, 0, 1),
			job:        st.MakeJob().GPUs(2),
			wantReason: api.ReasonResources, wantDetail: "1 InsufficientGPU",
		},
		{
			name: "whole-gpu-takes-the-free-one",
			node: st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G).SharedGPU(0, 8192, 0, 1),
			job:  st.MakeJob().GPUs(1),
			want: "[1]",
		},
		{
			name:       "memory-full-is-insufficient-gpu-mem",
			node:       st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G).SharedGPU(0, 78000, 0, 9).SharedGPU(1, 78000, 0, 9),
			job:        st.MakeJob().GPUMem(8192),
			wantReason: api.ReasonResources, wantDetail: "0/1 nodes available: 1 InsufficientGPUMem",
		},
		{
			name:       "oversized-slice-never-fits",
			node:       st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G),
			job:        st.MakeJob().GPUMem(96 * 1024),
			wantReason: api.ReasonBadConstraints, wantDetail: "GPU slice of 96G memory requested, GPUs of partition gpu take at most 80G",
		},
		{
			name: "oversized-slice-fits-with-ratio",
			node: st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G),
			part: st.MakePartition(st.DefaultPartition, "gpu01").Oversubscribe(1.2, 1),
			job:  st.MakeJob().GPUMem(96 * 1024),
			want: "[0]",
		},
		{
			name:       "unknown-gpu-memory-takes-no-memory-slice",
			node:       st.MakeNode("gpu01").GPUs(2),
			job:        st.MakeJob().GPUMem(1024),
			wantReason: api.ReasonBadConstraints, wantDetail: "GPU slice of 1G memory requested",
		},
		{
			name:       "slicing-off",
			node:       st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G),
			part:       st.MakePartition(st.DefaultPartition, "gpu01").NoSlicing(),
			job:        st.MakeJob().GPUMem(8192),
			wantReason: api.ReasonBadConstraints, wantDetail: "partition gpu does not allow GPU slices",
		},
		{
			name: "whole-gpus-in-partition-without-slicing",
			node: st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G),
			part: st.MakePartition(st.DefaultPartition, "gpu01").NoSlicing(),
			job:  st.MakeJob().GPUs(2),
			want: "[0 1]",
		},
		{
			name: "least-linked-free-gpu-keeps-islands-whole",
			node: st.MakeNode("gpu01").GPUs(8).GPUMem(gpu80G).Matrix(topotest.TwoIslands().Matrix).UsedGPUs(4),
			job:  st.MakeJob().GPUMem(8192),
			want: "[5]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			part := tt.part
			if part == nil {
				part = st.MakePartition(st.DefaultPartition, "gpu01")
			}
			snap := st.MakeSnapshot().Nodes(tt.node.Obj()).Partitions(part.Obj()).Jobs(tt.job.ID(1).Obj()).Obj()
			plan := sched.Schedule(snap, now, sched.Config{})
			if tt.want != "" {
				if len(plan.Starts) != 1 {
					t.Fatalf("no start, pending %+v", plan.Pending)
				}
				if got := fmt.Sprint(plan.Starts[0].Alloc[0].GPUs); got != tt.want {
					t.Errorf("GPUs %s, want %s (why: %s)", got, tt.want, plan.Starts[0].Why)
				}
				return
			}
			if len(plan.Pending) != 1 {
				t.Fatalf("started %+v, want pending", plan.Starts)
			}
			d := plan.Pending[0]
			if d.Reason != tt.wantReason || !strings.Contains(d.Detail, tt.wantDetail) {
				t.Errorf("pending %s %q, want %s containing %q", d.Reason, d.Detail, tt.wantReason, tt.wantDetail)
			}
		})
	}
}

// TestSliceNodeOrder: a slice job goes to the node whose shared GPU has
// room, even when another node has fewer free GPUs.
func TestSliceNodeOrder(t *testing.T) {
	a := st.MakeNode("gpu01").GPUs(8).GPUMem(gpu80G).SharedGPU(0, 8192, 0, 1).Obj()
	b := st.MakeNode("gpu02").GPUs(8).GPUMem(gpu80G).UsedGPUs(0, 1, 2, 3, 4).Obj()
	snap := st.MakeSnapshot().Nodes(a, b).Partitions(st.MakePartition(st.DefaultPartition, "gpu01", "gpu02").Obj()).
		Jobs(st.MakeJob().ID(1).GPUMem(8192).Obj(), st.MakeJob().ID(2).GPUs(1).Obj()).Obj()
	plan := sched.Schedule(snap, now, sched.Config{})
	if len(plan.Starts) != 2 {
		t.Fatalf("%d starts, pending %+v", len(plan.Starts), plan.Pending)
	}
	for _, s := range plan.Starts {
		got := s.Alloc[0].Node + fmt.Sprint(s.Alloc[0].GPUs)
		want := map[uint64]string{1: "gpu01[0]", 2: "gpu02[5]"}[s.JobID]
		if got != want {
			t.Errorf("job %d on %s, want %s (why: %s)", s.JobID, got, want, s.Why)
		}
	}
	if why := plan.Starts[0].Why; !strings.Contains(why, "slice 8G on GPU 0") || !strings.Contains(why, "2 slices, 16G/80G committed") {
		t.Errorf("why %q does not describe the slice", why)
	}
}

// TestSliceMultiNode: -N 2 with a slice and no count gives one slice per
// node; the allocation records the slice size on each node.
func TestSliceMultiNode(t *testing.T) {
	snap := st.Cluster("gpu", 2, 64, 256000, 4).Jobs(st.MakeJob().ID(1).Nodes(2).GPUMem(4096).GPUCompute(25).Obj()).Obj()
	for i := range snap.Nodes {
		snap.Nodes[i].GPUMemMB = gpu80G
	}
	plan := sched.Schedule(snap, now, sched.Config{})
	if len(plan.Starts) != 1 {
		t.Fatalf("pending %+v", plan.Pending)
	}
	for _, a := range plan.Starts[0].Alloc {
		if len(a.GPUs) != 1 || a.GPUMemMB != 4096 || a.GPUComputePct != 25 || !a.Sliced() {
			t.Errorf("alloc %+v, want one 4096 MB/25%% slice", a)
		}
	}
}

func TestCheckFeasibleSlices(t *testing.T) {
	nodes := []sched.NodeInfo{st.MakeNode("gpu01").GPUs(4).GPUMem(gpu80G).Obj()}
	unknown := []sched.NodeInfo{st.MakeNode("gpu01").GPUs(4).GPUMem(sched.GPUMemUnknown).Obj()}
	tests := []struct {
		name   string
		nodes  []sched.NodeInfo
		part   *st.PartitionWrapper
		spec   *st.JobWrapper
		ok     bool
		reason string
	}{
		{name: "fits", nodes: nodes, spec: st.MakeJob().GPUMem(8192), ok: true},
		{name: "four-slices", nodes: nodes, spec: st.MakeJob().GPUs(4).GPUMem(8192), ok: true},
		{name: "five-slices", nodes: nodes, spec: st.MakeJob().GPUs(5).GPUMem(8192), reason: "5 GPUs per node requested"},
		{name: "too-big", nodes: nodes, spec: st.MakeJob().GPUMem(81921), reason: "GPU slice of 81921M memory requested"},
		{name: "too-big-ratio", nodes: nodes, part: st.MakePartition(st.DefaultPartition, "gpu01").Oversubscribe(1.2, 1),
			spec: st.MakeJob().GPUMem(96 * 1024), ok: true},
		{name: "compute-over-100", nodes: nodes, spec: st.MakeJob().GPUCompute(120), reason: "GPU slice of 120% compute requested"},
		{name: "slicing-off", nodes: nodes, part: st.MakePartition(st.DefaultPartition, "gpu01").NoSlicing(),
			spec: st.MakeJob().GPUMem(8192), reason: "does not allow GPU slices"},
		{name: "unknown-memory-accepted", nodes: unknown, spec: st.MakeJob().GPUMem(200000), ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			part := tt.part
			if part == nil {
				part = st.MakePartition(st.DefaultPartition, "gpu01")
			}
			j := tt.spec.Obj()
			ok, why := sched.CheckFeasible(&j.JobSpec, part.Obj(), tt.nodes, sched.Config{})
			if ok != tt.ok || !strings.Contains(why, tt.reason) {
				t.Errorf("CheckFeasible = %v, %q; want %v containing %q", ok, why, tt.ok, tt.reason)
			}
		})
	}
}

// TestSliceSnapshotUntouched: the pass works on copies of the shared
// lists, so a snapshot scheduled twice gives the same plan.
func TestSliceSnapshotUntouched(t *testing.T) {
	snap := st.MakeSnapshot().
		Nodes(st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G).SharedGPU(0, 8192, 10, 1).Obj(),
			st.MakeNode("gpu02").GPUs(2).GPUMem(gpu80G).SharedGPU(1, 8192, 10, 1).Obj()).
		Partitions(st.MakePartition(st.DefaultPartition, "gpu01", "gpu02").Obj()).
		Jobs(sliceJobs(1, 40, 8192, 10)...).Obj()
	before := fmt.Sprint(snap.Nodes)
	p1 := sched.Schedule(snap, now, sched.Config{})
	p2 := sched.Schedule(snap, now, sched.Config{})
	if after := fmt.Sprint(snap.Nodes); after != before {
		t.Errorf("snapshot changed:\n%s\n%s", before, after)
	}
	if fmt.Sprint(gpusByJob(p1)) != fmt.Sprint(gpusByJob(p2)) {
		t.Errorf("plans differ: %v vs %v", gpusByJob(p1), gpusByJob(p2))
	}
	if !slices.ContainsFunc(p1.Pending, func(d sched.Decision) bool { return strings.Contains(d.Detail, "InsufficientGPU") }) {
		t.Errorf("40 slices of 10%% on 4 GPUs should leave some pending: %+v", p1.Pending)
	}
}

// TestSliceFirstFit pins the baseline the simulator compares best fit
// with: the first node in configuration order, and on it the lowest GPU
// that takes the slice, shared or free.
func TestSliceFirstFit(t *testing.T) {
	tests := []struct {
		name  string
		nodes []sched.NodeInfo
		job   *st.JobWrapper
		fit   sched.SliceFit
		want  string // node:GPUs
	}{
		{
			name: "first-fit-takes-lowest-free-gpu-before-a-shared-one",
			nodes: []sched.NodeInfo{
				st.MakeNode("gpu01").GPUs(4).GPUMem(gpu80G).SharedGPU(2, 0, 60, 2).Obj(),
			},
			job: st.MakeJob().GPUCompute(20), fit: sched.SliceFirstFit, want: "gpu01:[0]",
		},
		{
			name: "best-fit-fills-the-shared-gpu",
			nodes: []sched.NodeInfo{
				st.MakeNode("gpu01").GPUs(4).GPUMem(gpu80G).SharedGPU(2, 0, 60, 2).Obj(),
			},
			job: st.MakeJob().GPUCompute(20), fit: sched.SliceBestFit, want: "gpu01:[2]",
		},
		{
			name: "first-fit-takes-lowest-shared-gpu-with-room",
			nodes: []sched.NodeInfo{
				st.MakeNode("gpu01").GPUs(3).GPUMem(gpu80G).SharedGPU(0, 0, 30, 1).SharedGPU(1, 0, 70, 2).UsedGPUs(2).Obj(),
			},
			job: st.MakeJob().GPUCompute(20), fit: sched.SliceFirstFit, want: "gpu01:[0]",
		},
		{
			name: "first-fit-takes-first-node-in-order",
			nodes: []sched.NodeInfo{
				st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G).Obj(),
				st.MakeNode("gpu02").GPUs(2).GPUMem(gpu80G).SharedGPU(0, 0, 50, 1).Obj(),
			},
			job: st.MakeJob().GPUCompute(20), fit: sched.SliceFirstFit, want: "gpu01:[0]",
		},
		{
			name: "best-fit-takes-the-node-with-a-shared-gpu",
			nodes: []sched.NodeInfo{
				st.MakeNode("gpu01").GPUs(2).GPUMem(gpu80G).Obj(),
				st.MakeNode("gpu02").GPUs(2).GPUMem(gpu80G).SharedGPU(0, 0, 50, 1).Obj(),
			},
			job: st.MakeJob().GPUCompute(20), fit: sched.SliceBestFit, want: "gpu02:[0]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names := make([]string, len(tt.nodes))
			for i := range tt.nodes {
				names[i] = tt.nodes[i].Name
			}
			snap := st.MakeSnapshot().Nodes(tt.nodes...).
				Partitions(st.MakePartition(st.DefaultPartition, names...).Obj()).
				Jobs(tt.job.ID(1).Obj()).Obj()
			plan := sched.Schedule(snap, now, sched.Config{SliceFit: tt.fit})
			if len(plan.Starts) != 1 {
				t.Fatalf("no start: %+v", plan.Pending)
			}
			a := plan.Starts[0].Alloc[0]
			if got := fmt.Sprintf("%s:%v", a.Node, a.GPUs); got != tt.want {
				t.Errorf("placed on %s, want %s", got, tt.want)
			}
		})
	}
}
