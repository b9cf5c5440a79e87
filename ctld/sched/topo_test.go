package sched_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
	"github.com/tide-hpc/tide/topology"
	"github.com/tide-hpc/tide/topology/topotest"
)

// oneNode is a one-node partition "gpu" whose node gpu01 has the machine's
// GPUs (used ones taken) and matrix m (nil = no link data).
func oneNode(gpus int, m *topology.Matrix, used ...int) *st.SnapshotWrapper {
	n := st.MakeNode("gpu01").CPUs(128).GPUs(gpus).UsedGPUs(used...).Matrix(m)
	return st.MakeSnapshot().Nodes(n.Obj()).Partitions(st.MakePartition("gpu", "gpu01").Obj())
}

func TestGPUSetByLinks(t *testing.T) {
	islands, dgx, pcie8, pcie16 := topotest.TwoIslands().Matrix, topotest.DGXH100().Matrix,
		topotest.PCIeOnly(8).Matrix, topotest.PCIeOnly(16).Matrix
	tests := []struct {
		name     string
		snap     *st.SnapshotWrapper
		gpus     int
		wantGPUs []int
		wantWhy  string
	}{
		{
			name: "4 GPUs on empty two-islands take one island",
			snap: oneNode(8, islands), gpus: 4, wantGPUs: []int{0, 1, 2, 3},
			wantWhy: "best fit on gpu01: 4/8 GPUs free left; gpu01: GPUs 0-3, link score 3600/3600, NUMA 0",
		},
		{
			name: "4 GPUs on two-islands with GPU 0 used take the whole other island",
			snap: oneNode(8, islands, 0), gpus: 4, wantGPUs: []int{4, 5, 6, 7},
			wantWhy: "best fit on gpu01: 3/8 GPUs free left; gpu01: GPUs 4-7, link score 3600/3600, NUMA 1",
		},
		{
			name: "without a matrix the lowest free GPUs are taken",
			snap: oneNode(8, nil, 0), gpus: 4, wantGPUs: []int{1, 2, 3, 4},
			wantWhy: "best fit on gpu01: 3/8 GPUs free left",
		},
		{
			name: "2 GPUs on a DGX take any pair, lowest first",
			snap: oneNode(8, dgx, 0, 2), gpus: 2, wantGPUs: []int{1, 3},
			wantWhy: "best fit on gpu01: 4/8 GPUs free left; gpu01: GPUs 1,3, link score 1800/1800, NUMA 0",
		},
		{
			name: "2 GPUs on PCIe-only take a PIX pair",
			snap: oneNode(8, pcie8, 0, 3), gpus: 2, wantGPUs: []int{4, 5},
			wantWhy: "best fit on gpu01: 4/8 GPUs free left; gpu01: GPUs 4-5, link score 60/60, NUMA 1",
		},
		{
			name: "2 GPUs on two-islands stay in the partly used island",
			snap: oneNode(8, islands, 0), gpus: 2, wantGPUs: []int{1, 2},
			wantWhy: "best fit on gpu01: 5/8 GPUs free left; gpu01: GPUs 1-2, link score 600/600, NUMA 0",
		},
		{
			name: "1 GPU on two-islands does not break the whole island",
			snap: oneNode(8, islands, 4, 5, 6), gpus: 1, wantGPUs: []int{7},
			wantWhy: "best fit on gpu01: 4/8 GPUs free left; gpu01: GPU 7, the least linked free GPU, NUMA 1",
		},
		{
			name: "1 GPU on an empty two-islands node takes the lowest",
			snap: oneNode(8, islands), gpus: 1, wantGPUs: []int{0},
			wantWhy: "best fit on gpu01: 7/8 GPUs free left; gpu01: GPU 0, the least linked free GPU, NUMA 0",
		},
		{
			name: "1 GPU on PCIe-only takes the GPU whose PIX peer is gone",
			snap: oneNode(8, pcie8, 4), gpus: 1, wantGPUs: []int{5},
			wantWhy: "best fit on gpu01: 6/8 GPUs free left; gpu01: GPU 5, the least linked free GPU, NUMA 1",
		},
		{
			name: "16-GPU node grows greedily from the best pair",
			snap: oneNode(16, pcie16, 0, 2, 4), gpus: 4, wantGPUs: []int{1, 3, 6, 7},
			wantWhy: "best fit on gpu01: 9/16 GPUs free left; gpu01: GPUs 1,3,6-7, link score 210/240, NUMA 0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := tt.snap.Jobs(st.MakeJob().ID(1).GPUs(tt.gpus).Obj()).Obj()
			plan := sched.Schedule(snap, now, sched.Config{})
			got, ok := start(plan, 1)
			if !ok {
				t.Fatalf("job 1 did not start: %+v", plan.Pending)
			}
			if diff := cmp.Diff(tt.wantGPUs, got.Alloc[0].GPUs); diff != "" {
				t.Errorf("GPUs (-want +got):\n%s", diff)
			}
			if got.Why != tt.wantWhy {
				t.Errorf("Why = %q, want %q", got.Why, tt.wantWhy)
			}
		})
	}
}

// TestSmallJobsKeepIslandsWhole runs a stream through one pass: 1-GPU
// jobs fill one island so that a 4-GPU job still finds a whole one.
func TestSmallJobsKeepIslandsWhole(t *testing.T) {
	for _, tt := range []struct {
		name string
		m    *topology.Matrix
		want [][]int
	}{
		{name: "two islands", m: topotest.TwoIslands().Matrix, want: [][]int{{0}, {1}, {2}, {4, 5, 6, 7}}},
		{name: "no link data", want: [][]int{{0}, {1}, {2}, {3, 4, 5, 6}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := oneNode(8, tt.m)
			for id := uint64(1); id <= 3; id++ {
				w.Jobs(st.MakeJob().ID(id).GPUs(1).Priority(uint32(10 - id)).Obj())
			}
			w.Jobs(st.MakeJob().ID(4).GPUs(4).Priority(1).Obj())
			plan := sched.Schedule(w.Obj(), now, sched.Config{})
			var got [][]int
			for _, s := range plan.Starts {
				got = append(got, s.Alloc[0].GPUs)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("GPU sets in start order (-want +got):\n%s", diff)
			}
		})
	}
}

// fatTree is the local cluster: leaves s1 = gpu[01-02], s2 = gpu[03-04]
// under "spine", 8-GPU nodes; used[name] lists the busy GPUs of a node.
func fatTree(tree bool, used map[string][]int) *st.SnapshotWrapper {
	f := topotest.FatTree(2, 2, "gpu")
	w := st.MakeSnapshot().Partitions(st.MakePartition("gpu", f.Nodes...).Obj())
	for _, name := range f.Nodes {
		n := st.MakeNode(name).CPUs(64).GPUs(8).UsedGPUs(used[name]...)
		if len(used[name]) > 0 {
			n.UsedCPUs(len(used[name]) * 8)
		}
		w.Nodes(n.Obj())
	}
	if tree {
		w.Tree(f.Tree)
	}
	return w
}

func TestSwitchPlacement(t *testing.T) {
	half, six, all := []int{0, 1, 2, 3}, []int{0, 1, 2, 3, 4, 5}, []int{0, 1, 2, 3, 4, 5, 6, 7}
	tests := []struct {
		name      string
		snap      *st.SnapshotWrapper
		job       *st.JobWrapper
		wantNodes []string
		wantWhy   string
		// wantDetail is set when the job must stay pending.
		wantDetail string
	}{
		{
			name: "2-node job takes one leaf",
			snap: fatTree(true, map[string][]int{"gpu01": half, "gpu03": half}),
			job:  st.MakeJob().Nodes(2).GPUsPerNode(4), wantNodes: []string{"gpu01", "gpu02"},
			wantWhy: "best fit on 2 nodes gpu[01-02] under leaf s1",
		},
		{
			name: "without a tree best fit crosses leaves",
			snap: fatTree(false, map[string][]int{"gpu01": half, "gpu03": half}),
			job:  st.MakeJob().Nodes(2).GPUsPerNode(4), wantNodes: []string{"gpu01", "gpu03"},
			wantWhy: "best fit on 2 nodes gpu[01,03]",
		},
		{
			name: "the fullest leaf that fits wins",
			snap: fatTree(true, map[string][]int{"gpu01": half, "gpu03": six}),
			job:  st.MakeJob().Nodes(2).GPUsPerNode(2), wantNodes: []string{"gpu03", "gpu04"},
			wantWhy: "best fit on 2 nodes gpu[03-04] under leaf s2",
		},
		{
			name: "crosses leaves only when it must",
			snap: fatTree(true, map[string][]int{"gpu02": all, "gpu04": all}),
			job:  st.MakeJob().Nodes(2).GPUsPerNode(8), wantNodes: []string{"gpu01", "gpu03"},
			wantWhy: "best fit on 2 whole nodes gpu[01,03] under switch spine",
		},
		{
			name: "single-node job keeps the untouched leaf free",
			snap: fatTree(true, map[string][]int{"gpu04": all}),
			job:  st.MakeJob().GPUs(1), wantNodes: []string{"gpu03"},
			wantWhy: "best fit on gpu03: 7/8 GPUs free left",
		},
		{
			name: "single-node job without a tree takes the first name",
			snap: fatTree(false, map[string][]int{"gpu04": all}),
			job:  st.MakeJob().GPUs(1), wantNodes: []string{"gpu01"},
			wantWhy: "best fit on gpu01: 7/8 GPUs free left",
		},
		{
			name:       "refusal names the best leaf",
			snap:       fatTree(true, map[string][]int{"gpu02": all, "gpu03": all, "gpu04": half}),
			job:        st.MakeJob().Nodes(2).GPUsPerNode(8),
			wantDetail: "1/4 nodes available: 2 InsufficientCPU, 1 InsufficientGPU; best leaf s1 has 1/2 free nodes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := tt.snap.Jobs(tt.job.ID(1).Obj()).Obj()
			plan := sched.Schedule(snap, now, sched.Config{})
			if tt.wantDetail != "" {
				d, _ := decision(t, plan, 1)
				want := sched.Decision{JobID: 1, Reason: api.ReasonResources, Detail: tt.wantDetail}
				if diff := cmp.Diff(want, d); diff != "" {
					t.Errorf("decision (-want +got):\n%s", diff)
				}
				return
			}
			got, ok := start(plan, 1)
			if !ok {
				t.Fatalf("job 1 did not start: %+v", plan.Pending)
			}
			var nodes []string
			for _, a := range got.Alloc {
				nodes = append(nodes, a.Node)
			}
			if diff := cmp.Diff(tt.wantNodes, nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if got.Why != tt.wantWhy {
				t.Errorf("Why = %q, want %q", got.Why, tt.wantWhy)
			}
		})
	}
}

// TestSwitchAndLinks combines both layers: a 2-node job on two-islands
// nodes goes under one leaf and takes an island on each node.
func TestSwitchAndLinks(t *testing.T) {
	w := fatTree(true, map[string][]int{"gpu03": {0}}).Matrix(topotest.TwoIslands().Matrix)
	plan := sched.Schedule(w.Jobs(st.MakeJob().ID(1).Nodes(2).GPUsPerNode(4).Obj()).Obj(), now, sched.Config{})
	got, ok := start(plan, 1)
	if !ok {
		t.Fatalf("job 1 did not start: %+v", plan.Pending)
	}
	want := sched.Start{JobID: 1, TimeLimit: api.Infinite,
		Why: "best fit on 2 nodes gpu[03-04] under leaf s2; link score 7200/7200 over 2 nodes; GPUs on 1 NUMA node per node",
		Alloc: []api.NodeAlloc{
			{Node: "gpu03", CPUs: 1, GPUs: []int{4, 5, 6, 7}, Tasks: 1, NUMA: []int{1}},
			{Node: "gpu04", CPUs: 1, GPUs: []int{0, 1, 2, 3}, Tasks: 1, NUMA: []int{0}},
		}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("start (-want +got):\n%s", diff)
	}
}

// TestSwitchesLimit covers --switches=N[@wait]: within the wait a job
// holds out for a placement under at most N leaves (reason Topology),
// after it it takes what fits.
func TestSwitchesLimit(t *testing.T) {
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	submit := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	job := func() *api.Job {
		j := st.MakeJob().ID(1).Partition("gpu").Nodes(2).GPUsPerNode(8).Submit(submit).Obj()
		j.Switches, j.SwitchWait = 1, 600
		return j
	}
	// One free node per leaf: only a placement across leaves exists.
	snap := fatTree(true, map[string][]int{"gpu02": all, "gpu04": all}).Jobs(job()).Obj()
	plan := sched.Schedule(snap, submit.Add(time.Minute), sched.Config{})
	if len(plan.Starts) != 0 || len(plan.Pending) != 1 || plan.Pending[0].Reason != api.ReasonTopology {
		t.Fatalf("within the wait: %+v", plan)
	}
	if d := plan.Pending[0].Detail; !strings.Contains(d, "at most 1 leaf switches") {
		t.Fatalf("detail %q", d)
	}
	plan = sched.Schedule(snap, submit.Add(11*time.Minute), sched.Config{})
	if len(plan.Starts) != 1 {
		t.Fatalf("after the wait the job did not start: %+v", plan.Pending)
	}
	// A limit the tree can meet changes nothing.
	snap = fatTree(true, map[string][]int{"gpu03": all}).Jobs(job()).Obj()
	plan = sched.Schedule(snap, submit.Add(time.Minute), sched.Config{})
	if len(plan.Starts) != 1 || plan.Starts[0].Alloc[0].Node != "gpu01" {
		t.Fatalf("one free leaf: %+v", plan)
	}
}

// TestCommModel covers --comm=model: a job's GPUs on a node stay inside
// one NVLink island, and a node without such a set is NoNVLinkSet.
func TestCommModel(t *testing.T) {
	islands := topotest.TwoIslands().Matrix
	pcie := topotest.PCIeOnly(8).Matrix
	job := func(comm string) *api.Job {
		j := st.MakeJob().ID(1).Partition("p").GPUs(3).Obj()
		j.Comm = comm
		return j
	}
	// Islands 0-3 and 4-7; two GPUs used in each island: no island has 3 free.
	busy := st.MakeNode("n1").CPUs(64).GPUs(8).UsedGPUs(0, 1, 4, 5).Matrix(islands).Obj()
	snap := st.MakeSnapshot().Nodes(busy).Partitions(st.MakePartition("p", "n1").Obj()).Jobs(job("model")).Obj()
	plan := sched.Schedule(snap, time.Unix(0, 0), sched.Config{})
	if len(plan.Starts) != 0 || !strings.Contains(plan.Pending[0].Detail, string(api.DetailNoNVLinkSet)) {
		t.Fatalf("model job on split islands: %+v", plan)
	}
	// A data-parallel job takes the free GPUs wherever they are.
	snap = st.MakeSnapshot().Nodes(busy).Partitions(st.MakePartition("p", "n1").Obj()).Jobs(job("data")).Obj()
	if plan := sched.Schedule(snap, time.Unix(0, 0), sched.Config{}); len(plan.Starts) != 1 {
		t.Fatalf("data job: %+v", plan.Pending)
	}
	// With one island free enough, the model job stays inside it.
	one := st.MakeNode("n1").CPUs(64).GPUs(8).UsedGPUs(0).Matrix(islands).Obj()
	snap = st.MakeSnapshot().Nodes(one).Partitions(st.MakePartition("p", "n1").Obj()).Jobs(job("model")).Obj()
	plan = sched.Schedule(snap, time.Unix(0, 0), sched.Config{})
	if len(plan.Starts) != 1 {
		t.Fatalf("model job: %+v", plan.Pending)
	}
	for _, g := range plan.Starts[0].Alloc[0].GPUs {
		if g/4 != plan.Starts[0].Alloc[0].GPUs[0]/4 {
			t.Fatalf("model job got %v across islands", plan.Starts[0].Alloc[0].GPUs)
		}
	}
	// PCIe-only nodes have no NVLink island of 3.
	flat := st.MakeNode("n1").CPUs(64).GPUs(8).Matrix(pcie).Obj()
	snap = st.MakeSnapshot().Nodes(flat).Partitions(st.MakePartition("p", "n1").Obj()).Jobs(job("model")).Obj()
	if plan := sched.Schedule(snap, time.Unix(0, 0), sched.Config{}); len(plan.Starts) != 0 {
		t.Fatalf("model job on a PCIe-only node: %+v", plan.Starts)
	}
}

func TestSpreadPolicy(t *testing.T) {
	for _, tt := range []struct {
		spread bool
		want   string
	}{{false, "gpu02"}, {true, "gpu01"}} {
		part := st.MakePartition("p", "gpu01", "gpu02").Obj()
		part.Spread = tt.spread
		free := st.MakeNode("gpu01").CPUs(64).GPUs(8).Obj()
		used := st.MakeNode("gpu02").CPUs(64).GPUs(8).UsedGPUs(0, 1).UsedCPUs(4).Obj()
		snap := st.MakeSnapshot().Nodes(free, used).Partitions(part).Jobs(st.MakeJob().ID(1).Partition("p").GPUs(1).Obj()).Obj()
		plan := sched.Schedule(snap, time.Unix(0, 0), sched.Config{})
		if len(plan.Starts) != 1 || plan.Starts[0].Alloc[0].Node != tt.want {
			t.Fatalf("spread=%v: %+v, want %s", tt.spread, plan.Starts, tt.want)
		}
	}
}

// nvMesh is an n-GPU full NVLink mesh (DGX-like) with the first half of
// the GPUs on NUMA node 0 and the rest on node 1.
func nvMesh(t *testing.T, n int) *topology.Matrix {
	t.Helper()
	var links []topology.GPULink
	numa := make([]int, n)
	for i := range n {
		numa[i] = i * 2 / n
		for j := i + 1; j < n; j++ {
			links = append(links, topology.GPULink{From: i, To: j, NVLinks: 18})
		}
	}
	m, err := topology.NewMatrix(n, links)
	if err == nil {
		m, err = m.WithNUMA(numa)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGPUSetNUMA checks NUMA alignment: at equal link score a set on one
// NUMA node wins, link score still comes first, and the allocation and
// Why name the NUMA nodes the launcher binds CPUs to.
func TestGPUSetNUMA(t *testing.T) {
	// 0,1 on NUMA 0 and 2,3 on NUMA 1; only 1-2 has NVLink.
	cross, err := topology.NewMatrix(4, []topology.GPULink{
		{From: 0, To: 1, PCIePath: topology.PathPIX}, {From: 2, To: 3, PCIePath: topology.PathPIX},
		{From: 1, To: 2, NVLinks: 2, PCIePath: topology.PathSYS},
		{From: 0, To: 2, PCIePath: topology.PathSYS}, {From: 0, To: 3, PCIePath: topology.PathSYS},
		{From: 1, To: 3, PCIePath: topology.PathSYS},
	})
	if err == nil {
		cross, err = cross.WithNUMA([]int{0, 0, 1, 1})
	}
	if err != nil {
		t.Fatal(err)
	}
	noNUMA, err := topology.NewMatrix(8, topotest.DGXH100().Links)
	if err != nil {
		t.Fatal(err)
	}
	dgx := topotest.DGXH100().Matrix
	tests := []struct {
		name     string
		snap     *st.SnapshotWrapper
		gpus     int
		wantGPUs []int
		wantNUMA []int
		wantWhy  string
	}{
		{
			name: "4 GPUs on a DGX with GPU 0 used take the untouched socket",
			snap: oneNode(8, dgx, 0), gpus: 4, wantGPUs: []int{4, 5, 6, 7}, wantNUMA: []int{1},
			wantWhy: "best fit on gpu01: 3/8 GPUs free left; gpu01: GPUs 4-7, link score 10800/10800, NUMA 1",
		},
		{
			name: "without NUMA data the lowest indices win the tie",
			snap: oneNode(8, noNUMA, 0), gpus: 4, wantGPUs: []int{1, 2, 3, 4},
			wantWhy: "best fit on gpu01: 3/8 GPUs free left; gpu01: GPUs 1-4, link score 10800/10800",
		},
		{
			name: "2 GPUs on a DGX do not straddle the sockets",
			snap: oneNode(8, dgx, 0, 1, 2), gpus: 2, wantGPUs: []int{4, 5}, wantNUMA: []int{1},
			wantWhy: "best fit on gpu01: 3/8 GPUs free left; gpu01: GPUs 4-5, link score 1800/1800, NUMA 1",
		},
		{
			name: "link score beats NUMA alignment",
			snap: oneNode(4, cross), gpus: 2, wantGPUs: []int{1, 2}, wantNUMA: []int{0, 1},
			wantWhy: "best fit on gpu01: 2/4 GPUs free left; gpu01: GPUs 1-2, link score 210/210, NUMA 0-1",
		},
		{
			name: "8 GPUs span both sockets",
			snap: oneNode(8, dgx), gpus: 8, wantGPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, wantNUMA: []int{0, 1},
			wantWhy: "best fit on gpu01: 0/8 GPUs free left; gpu01: GPUs 0-7, link score 50400/50400, NUMA 0-1",
		},
		{
			name: "greedy search on 16 GPUs grows inside a NUMA node with room",
			snap: oneNode(16, nvMesh(t, 16), 0, 1, 2, 3, 4, 5), gpus: 4, wantGPUs: []int{8, 9, 10, 11}, wantNUMA: []int{1},
			wantWhy: "best fit on gpu01: 6/16 GPUs free left; gpu01: GPUs 8-11, link score 10800/10800, NUMA 1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := tt.snap.Jobs(st.MakeJob().ID(1).GPUs(tt.gpus).Obj()).Obj()
			got, ok := start(sched.Schedule(snap, now, sched.Config{}), 1)
			if !ok {
				t.Fatal("job 1 did not start")
			}
			if diff := cmp.Diff(tt.wantGPUs, got.Alloc[0].GPUs); diff != "" {
				t.Errorf("GPUs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNUMA, got.Alloc[0].NUMA); diff != "" {
				t.Errorf("NUMA (-want +got):\n%s", diff)
			}
			if got.Why != tt.wantWhy {
				t.Errorf("Why = %q, want %q", got.Why, tt.wantWhy)
			}
		})
	}
}
