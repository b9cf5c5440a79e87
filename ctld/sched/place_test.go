package sched_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
)

func TestPlacement(t *testing.T) {
	tests := []struct {
		name string
		snap *sched.Snapshot
		cfg  sched.Config
		want sched.Start // of job 1
	}{
		{
			name: "defaults with DefMemPerCPU",
			snap: fourNodes().Jobs(st.MakeJob().Obj()).Obj(),
			cfg:  sched.Config{DefMemPerCPUMB: 2000},
			want: sched.Start{JobID: 1, TimeLimit: 86400, Why: "best fit on gpu01: 8/8 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 1, MemoryMB: 2000, Tasks: 1}}},
		},
		{
			name: "tasks, cpus per task and memory per cpu",
			snap: fourNodes().Jobs(st.MakeJob().Tasks(4).CPUsPerTask(3).MemPerCPU(100).TimeLimit(600).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: 600, Why: "best fit on gpu01: 8/8 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 12, MemoryMB: 1200, Tasks: 4}}},
		},
		{
			name: "gpus with cpus and memory per gpu",
			snap: fourNodes().Jobs(st.MakeJob().GPUs(3).CPUsPerGPU(4).MemPerGPU(1000).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: 86400, Why: "best fit on gpu01: 5/8 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 12, MemoryMB: 3000, GPUs: []int{0, 1, 2}, Tasks: 1}}},
		},
		{
			name: "gpus per task",
			snap: fourNodes().Jobs(st.MakeJob().Tasks(2).GPUsPerTask(2).Mem(100).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: 86400, Why: "best fit on gpu01: 4/8 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 2, MemoryMB: 100, GPUs: []int{0, 1, 2, 3}, Tasks: 2}}},
		},
		{
			name: "multi-node: tasks and gpus split, remainder first",
			snap: fourNodes().Jobs(st.MakeJob().Nodes(3).Tasks(7).GPUs(10).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: 86400, Why: "best fit on 3 nodes gpu[01-03]",
				Alloc: []api.NodeAlloc{
					{Node: "gpu01", CPUs: 3, GPUs: []int{0, 1, 2, 3}, Tasks: 3},
					{Node: "gpu02", CPUs: 2, GPUs: []int{0, 1, 2}, Tasks: 2},
					{Node: "gpu03", CPUs: 2, GPUs: []int{0, 1, 2}, Tasks: 2},
				}},
		},
		{
			name: "multi-node: tasks per node and gpus per node",
			snap: fourNodes().Jobs(st.MakeJob().Nodes(2).TasksPerNode(8).GPUsPerNode(8).Exclude("gpu01").Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: 86400, Why: "best fit on 2 whole nodes gpu[02-03]",
				Alloc: []api.NodeAlloc{
					{Node: "gpu02", CPUs: 8, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Tasks: 8},
					{Node: "gpu03", CPUs: 8, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Tasks: 8},
				}},
		},
		{
			name: "multi-node: the larger slot goes to a node that can hold it",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5).Obj(), // 2 free: only the small slot
				st.MakeNode("gpu02").GPUs(8).UsedGPUs(0, 1, 2, 3, 4).Obj(),    // 3 free
			).Partitions(st.MakePartition("gpu", "gpu01", "gpu02").Obj()).
				Jobs(st.MakeJob().Nodes(2).GPUs(5).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: api.Infinite, Why: "best fit on 2 nodes gpu[01-02]",
				Alloc: []api.NodeAlloc{
					{Node: "gpu02", CPUs: 1, GPUs: []int{5, 6, 7}, Tasks: 1},
					{Node: "gpu01", CPUs: 1, GPUs: []int{6, 7}, Tasks: 1},
				}},
		},
		{
			name: "exclusive takes the whole idle node",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).UsedGPUs(7).Obj(),
				st.MakeNode("gpu02").CPUs(32).Mem(1000).GPUs(4).Obj(),
			).Partitions(st.MakePartition("gpu", "gpu01", "gpu02").Obj()).
				Jobs(st.MakeJob().Exclusive().GPUs(1).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: api.Infinite, Why: "exclusive on gpu02: 0/4 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "gpu02", CPUs: 32, MemoryMB: 1000, GPUs: []int{0, 1, 2, 3}, Tasks: 1}}},
		},
		{
			name: "gpu type matches case-insensitively",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("a01").GPUs(8).UsedGPUs(0).Obj(),
				st.MakeNode("h01").GPUs(8).Model("H100").Obj(),
			).Partitions(st.MakePartition("gpu", "a01", "h01").Obj()).
				Jobs(st.MakeJob().GPUs(2).GPUType("H100").Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: api.Infinite, Why: "best fit on h01: 6/8 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "h01", CPUs: 1, GPUs: []int{0, 1}, Tasks: 1}}},
		},
		{
			name: "required nodes come first, best fit fills the rest",
			snap: fourNodes().Jobs(st.MakeJob().Nodes(3).NodeList("gpu04", "gpu03", "gpu04").GPUsPerNode(1).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: 86400, Why: "best fit on 3 nodes gpu[01,03-04]",
				Alloc: []api.NodeAlloc{
					{Node: "gpu04", CPUs: 1, GPUs: []int{0}, Tasks: 1},
					{Node: "gpu03", CPUs: 1, GPUs: []int{0}, Tasks: 1},
					{Node: "gpu01", CPUs: 1, GPUs: []int{0}, Tasks: 1},
				}},
		},
		{
			name: "required nodes only",
			snap: fourNodes().Jobs(st.MakeJob().NodeList("gpu03").GPUs(1).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: 86400, Why: "required on gpu03: 7/8 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "gpu03", CPUs: 1, GPUs: []int{0}, Tasks: 1}}},
		},
		{
			name: "excluded nodes are skipped",
			snap: fourNodes().Jobs(st.MakeJob().Exclude("gpu01", "gpu02").Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: 86400, Why: "best fit on gpu03: 8/8 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "gpu03", CPUs: 1, Tasks: 1}}},
		},
		{
			name: "down and drained nodes are skipped",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5).Down().Obj(),
				st.MakeNode("gpu02").GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5).Drained().Obj(),
				st.MakeNode("gpu03").GPUs(8).Obj(),
			).Partitions(st.MakePartition("gpu", "gpu01", "gpu02", "gpu03").Obj()).
				Jobs(st.MakeJob().GPUs(1).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: api.Infinite, Why: "best fit on gpu03: 7/8 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "gpu03", CPUs: 1, GPUs: []int{0}, Tasks: 1}}},
		},
		{
			name: "best fit: fewest free GPUs that still fit",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).Obj(),
				st.MakeNode("gpu02").GPUs(8).UsedGPUs(0, 2, 4, 6, 7).Obj(), // 3 free: 1, 3, 5
				st.MakeNode("gpu03").GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5, 6).Obj(),
			).Partitions(st.MakePartition("gpu", "gpu01", "gpu02", "gpu03").Obj()).
				Jobs(st.MakeJob().GPUs(2).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: api.Infinite, Why: "best fit on gpu02: 1/8 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "gpu02", CPUs: 1, GPUs: []int{1, 3}, Tasks: 1}}},
		},
		{
			name: "best fit: then fewest free CPUs",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).UsedGPUs(0).Obj(),
				st.MakeNode("gpu02").GPUs(8).UsedGPUs(0).UsedCPUs(10).Obj(),
			).Partitions(st.MakePartition("gpu", "gpu01", "gpu02").Obj()).
				Jobs(st.MakeJob().GPUs(1).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: api.Infinite, Why: "best fit on gpu02: 6/8 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "gpu02", CPUs: 1, GPUs: []int{1}, Tasks: 1}}},
		},
		{
			name: "best fit: then natural name order",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu10").GPUs(8).Obj(),
				st.MakeNode("gpu9").GPUs(8).Obj(),
			).Partitions(st.MakePartition("gpu", "gpu10", "gpu9").Obj()).
				Jobs(st.MakeJob().GPUs(1).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: api.Infinite, Why: "best fit on gpu9: 7/8 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "gpu9", CPUs: 1, GPUs: []int{0}, Tasks: 1}}},
		},
		{
			name: "cpu-only job prefers nodes without free GPUs",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("gpu01").GPUs(8).Obj(),
				st.MakeNode("cpu01").CPUs(128).Obj(),
			).Partitions(st.MakePartition("gpu", "gpu01", "cpu01").Obj()).
				Jobs(st.MakeJob().Tasks(4).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: api.Infinite, Why: "best fit on cpu01: 124/128 CPUs free left",
				Alloc: []api.NodeAlloc{{Node: "cpu01", CPUs: 4, Tasks: 4}}},
		},
		{
			name: "unsorted free gpus in the snapshot are taken lowest first",
			snap: st.MakeSnapshot().Nodes(func() sched.NodeInfo {
				n := st.MakeNode("gpu01").GPUs(8).UsedGPUs(0, 1).Obj()
				n.FreeGPUs = []int{7, 3, 2, 6, 5, 4}
				return n
			}()).Partitions(st.MakePartition("gpu", "gpu01").Obj()).
				Jobs(st.MakeJob().GPUs(2).Obj()).Obj(),
			want: sched.Start{JobID: 1, TimeLimit: api.Infinite, Why: "best fit on gpu01: 4/8 GPUs free left",
				Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 1, GPUs: []int{2, 3}, Tasks: 1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := sched.Schedule(tt.snap, now, tt.cfg)
			got, ok := start(plan, 1)
			if !ok {
				d, _ := decision(t, plan, 1)
				t.Fatalf("job 1 did not start: %+v", d)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("start (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPassSubtractsWhatItPlaced(t *testing.T) {
	snap := st.MakeSnapshot().Nodes(st.MakeNode("gpu01").CPUs(16).Mem(1000).GPUs(4).UsedGPUs(0).Obj()).
		Partitions(st.MakePartition("gpu", "gpu01").Obj()).
		Jobs(
			st.MakeJob().ID(1).GPUs(2).Tasks(4).Mem(400).Obj(),
			st.MakeJob().ID(2).GPUs(1).Tasks(4).Mem(400).Obj(),
			st.MakeJob().ID(3).GPUs(1).Obj(),              // no GPU left
			st.MakeJob().ID(4).Tasks(8).Mem(300).Obj(),    // no memory left
			st.MakeJob().ID(5).Exclusive().Tasks(1).Obj(), // node no longer idle
		).Obj()
	plan := sched.Schedule(snap, now, sched.Config{})
	wantStarts := []sched.Start{
		{JobID: 1, TimeLimit: api.Infinite, Why: "best fit on gpu01: 1/4 GPUs free left",
			Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 4, MemoryMB: 400, GPUs: []int{1, 2}, Tasks: 4}}},
		{JobID: 2, TimeLimit: api.Infinite, Why: "best fit on gpu01: 0/4 GPUs free left",
			Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 4, MemoryMB: 400, GPUs: []int{3}, Tasks: 4}}},
	}
	if diff := cmp.Diff(wantStarts, plan.Starts); diff != "" {
		t.Errorf("starts (-want +got):\n%s", diff)
	}
	wantPending := []sched.Decision{
		{JobID: 3, Reason: api.ReasonResources, Detail: "0/1 nodes available: 1 InsufficientGPU"},
		{JobID: 4, Reason: api.ReasonPriority, Detail: "waiting for higher-priority jobs"},
		{JobID: 5, Reason: api.ReasonPriority, Detail: "waiting for higher-priority jobs"},
	}
	if diff := cmp.Diff(wantPending, plan.Pending); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
}

func TestCheckFeasible(t *testing.T) {
	nodes := []sched.NodeInfo{
		st.MakeNode("gpu01").GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5, 6, 7).Obj(),
		st.MakeNode("gpu02").GPUs(8).Down().Obj(),
		st.MakeNode("gpu03").CPUs(128).Mem(512000).GPUs(4).Model("h100").Obj(),
		st.MakeNode("cpu01").Obj(),
	}
	part := st.MakePartition("gpu", "gpu01", "gpu02", "gpu03").MaxNodes(1).MaxTime(60).Obj()
	tests := []struct {
		name    string
		spec    api.JobSpec
		noPart  bool
		nilSpec bool
		wantOK  bool
		wantWhy string
	}{
		{name: "busy and down nodes still count", spec: api.JobSpec{Nodes: 2, GPUsPerNode: 8}, wantOK: true},
		{name: "limits are not checked", spec: api.JobSpec{Nodes: 3, TimeLimit: 3600}, wantOK: true},
		{name: "largest node", spec: api.JobSpec{Tasks: 128, MemPerNodeMB: 512000, GPUs: 4, GPUType: "H100"}, wantOK: true},
		{name: "no partition", spec: api.JobSpec{Partition: "x"}, noPart: true, wantWhy: "partition x does not exist"},
		{name: "too many GPUs per node", spec: api.JobSpec{GPUsPerNode: 9}, wantWhy: "9 GPUs per node requested, nodes of partition gpu have at most 8"},
		{name: "gpu model", spec: api.JobSpec{GPUs: 1, GPUType: "v100"}, wantWhy: "no node of partition gpu has GPU model v100"},
		{name: "cpus and gpus on different nodes", spec: api.JobSpec{Nodes: 1, Tasks: 128, GPUs: 8},
			wantWhy: "1 nodes with 128 CPUs, 8 GPUs requested, partition gpu has 0 that can hold it"},
		{name: "too many nodes", spec: api.JobSpec{Nodes: 4}, wantWhy: "4 nodes requested, partition gpu has 3"},
		{name: "required node outside", spec: api.JobSpec{NodeList: []string{"cpu01"}}, wantWhy: "required node cpu01 is not in partition gpu"},
		{name: "required node too small", spec: api.JobSpec{NodeList: []string{"gpu03"}, GPUs: 8},
			wantWhy: "required node gpu03 can never hold 1 CPUs, 8 GPUs: InsufficientGPU"},
		{name: "nil spec", nilSpec: true, wantWhy: "no job specification"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, spec := part, &tt.spec
			if tt.noPart {
				p = nil
			}
			if tt.nilSpec {
				spec = nil
			}
			before := cloneSnapshot(&sched.Snapshot{Nodes: nodes})
			ok, why := sched.CheckFeasible(spec, p, nodes, sched.Config{})
			if ok != tt.wantOK || why != tt.wantWhy {
				t.Errorf("CheckFeasible = %v, %q; want %v, %q", ok, why, tt.wantOK, tt.wantWhy)
			}
			if diff := cmp.Diff(before.Nodes, nodes); diff != "" {
				t.Errorf("nodes mutated (-before +after):\n%s", diff)
			}
		})
	}
}

func TestWholeNodeMemory(t *testing.T) {
	busy := st.MakeNode("n1").CPUs(8).Mem(1000).UsedMem(100).Obj()
	free := st.MakeNode("n2").CPUs(8).Mem(1000).Obj()
	snap := st.MakeSnapshot().Nodes(busy, free).Partitions(st.MakePartition("p", "n1", "n2").Obj()).
		Jobs(st.MakeJob().ID(1).Partition("p").Mem(api.MemWholeNode).Obj()).Obj()
	plan := sched.Schedule(snap, time.Unix(0, 0), sched.Config{})
	if len(plan.Starts) != 1 || plan.Starts[0].Alloc[0].Node != "n2" || plan.Starts[0].Alloc[0].MemoryMB != 1000 {
		t.Fatalf("plan = %+v", plan)
	}
}
