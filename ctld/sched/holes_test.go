package sched_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
	"github.com/tide-hpc/tide/topology/topotest"
)

// hole describes one node of a holes test: its GPU count (0 = 8) and
// what running jobs hold on it.
type hole struct {
	gpus     int
	usedGPUs int // the lowest indices
	usedCPUs int
	usedMem  int64
}

// holeCluster builds nodes gpu01..gpuNN (64 CPUs, 512 GB) in one
// partition "gpu", optionally under fabric f's tree.
func holeCluster(f *topotest.Fabric, spread bool, nodes ...hole) *st.SnapshotWrapper {
	w := st.MakeSnapshot()
	var names []string
	for k, h := range nodes {
		name := "gpu0" + string(rune('1'+k))
		names = append(names, name)
		if h.gpus == 0 {
			h.gpus = 8
		}
		used := make([]int, h.usedGPUs)
		for g := range used {
			used[g] = g
		}
		n := st.MakeNode(name).CPUs(64).Mem(512000).GPUs(h.gpus).UsedGPUs(used...).UsedCPUs(h.usedCPUs).UsedMem(h.usedMem)
		w.Nodes(n.Obj())
	}
	part := st.MakePartition("gpu", names...).Obj()
	part.Spread = spread
	w.Partitions(part)
	if f != nil {
		w.Tree(f.Tree)
	}
	return w
}

// TestWholeNodeHoles covers issue 4's hole rule: a job smaller than a
// node does not take the last fully free node of a leaf while a partly
// used node holds it; it does take a free node that is not the last, or
// the last one when nothing partly used fits.
func TestWholeNodeHoles(t *testing.T) {
	local := topotest.FatTree(2, 2, "gpu") // s1 = gpu[01-02], s2 = gpu[03-04]
	oneLeaf := topotest.FatTree(1, 3, "gpu")
	full := hole{usedGPUs: 8, usedCPUs: 64}
	small := hole{gpus: 4}
	tests := []struct {
		name      string
		snap      *st.SnapshotWrapper
		job       *st.JobWrapper
		wantNodes []string
	}{
		{
			name: "1 GPU goes to a partly used node, not the last free node of s1",
			snap: holeCluster(&local, false, small, full, hole{usedGPUs: 2, usedCPUs: 2}, full),
			job:  st.MakeJob().GPUs(1), wantNodes: []string{"gpu03"},
		},
		{
			name: "the last free node is taken when no partly used node fits",
			snap: holeCluster(&local, false, small, full, hole{usedGPUs: 2, usedCPUs: 62}, full),
			job:  st.MakeJob().GPUs(1).CPUsPerTask(4), wantNodes: []string{"gpu01"},
		},
		{
			name: "a free node that is not the last of its leaf is fair game",
			snap: holeCluster(&local, false, small, small, hole{usedGPUs: 2, usedCPUs: 2}, full),
			job:  st.MakeJob().GPUs(1), wantNodes: []string{"gpu01"},
		},
		{
			name: "a node used only by memory beats the last free node of the same leaf",
			snap: holeCluster(&local, false, hole{}, hole{usedMem: 1000}, full, full),
			job:  st.MakeJob().GPUs(1), wantNodes: []string{"gpu02"},
		},
		{
			name: "spread partitions are exempt",
			snap: holeCluster(&local, true, hole{}, hole{usedMem: 1000}, full, full),
			job:  st.MakeJob().GPUs(1), wantNodes: []string{"gpu01"},
		},
		{
			name: "a whole-node job takes the last free node",
			snap: holeCluster(&local, false, hole{}, hole{usedMem: 1000}, full, full),
			job:  st.MakeJob().GPUs(8), wantNodes: []string{"gpu01"},
		},
		{
			name: "multi-node job under one leaf spares its last free node",
			snap: holeCluster(&oneLeaf, false, small, hole{usedGPUs: 2, usedCPUs: 2}, hole{usedGPUs: 2, usedCPUs: 2}),
			job:  st.MakeJob().Nodes(2).GPUsPerNode(2), wantNodes: []string{"gpu02", "gpu03"},
		},
		{
			name: "without a tree the cluster is one leaf",
			snap: holeCluster(nil, false, small, hole{usedGPUs: 2, usedCPUs: 2}),
			job:  st.MakeJob().GPUs(1), wantNodes: []string{"gpu02"},
		},
		{
			name: "without a tree a second free node is fair game",
			snap: holeCluster(nil, false, small, small, hole{usedGPUs: 2, usedCPUs: 2}),
			job:  st.MakeJob().GPUs(1), wantNodes: []string{"gpu01"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := sched.Schedule(tt.snap.Jobs(tt.job.ID(1).Obj()).Obj(), now, sched.Config{})
			got, ok := start(plan, 1)
			if !ok {
				t.Fatalf("job 1 did not start: %+v", plan.Pending)
			}
			var nodes []string
			for _, a := range got.Alloc {
				nodes = append(nodes, a.Node)
			}
			if diff := cmp.Diff(tt.wantNodes, nodes); diff != "" {
				t.Errorf("nodes (-want +got):\n%s\nWhy: %s", diff, got.Why)
			}
		})
	}
}

// TestHolesFollowThePass runs small jobs through one pass on the local
// cluster with a free 4-GPU node and a partly used 8-GPU node per leaf:
// best fit alone would fill the 4-GPU nodes first; the hole rule keeps
// them free until the partly used nodes are full.
func TestHolesFollowThePass(t *testing.T) {
	f := topotest.FatTree(2, 2, "gpu")
	w := holeCluster(&f, false, hole{gpus: 4}, hole{usedGPUs: 2, usedCPUs: 2}, hole{gpus: 4}, hole{usedGPUs: 2, usedCPUs: 2})
	for id := uint64(1); id <= 13; id++ {
		w.Jobs(st.MakeJob().ID(id).GPUs(1).Priority(uint32(100 - id)).Obj())
	}
	plan := sched.Schedule(w.Obj(), now, sched.Config{})
	var got []string
	for _, s := range plan.Starts {
		got = append(got, s.Alloc[0].Node)
	}
	var want []string
	for range 6 {
		want = append(want, "gpu02")
	}
	for range 6 {
		want = append(want, "gpu04")
	}
	// The partly used nodes are full: the thirteenth job breaks a hole.
	want = append(want, "gpu01")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes in start order (-want +got):\n%s", diff)
	}
}
