package sched_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
	"github.com/tide-hpc/tide/topology"
	"github.com/tide-hpc/tide/topology/topotest"
)

// reasonCluster is FatTree(leaves, perLeaf) of 8-GPU nodes with matrix
// m; used[name] lists a node's busy GPUs (7 CPUs each).
func reasonCluster(leaves, perLeaf int, m *topology.Matrix, used map[string][]int) *st.SnapshotWrapper {
	f := topotest.FatTree(leaves, perLeaf, "gpu")
	w := st.MakeSnapshot().Partitions(st.MakePartition("gpu", f.Nodes...).Obj()).Tree(f.Tree)
	for _, name := range f.Nodes {
		w.Nodes(st.MakeNode(name).CPUs(64).GPUs(8).UsedGPUs(used[name]...).UsedCPUs(7 * len(used[name])).Matrix(m).Obj())
	}
	return w
}

// TestReasons pins the words a placement and a refusal are explained
// with (issue 4, item 5): where the job went and how well linked, or
// what is missing, in numbers.
func TestReasons(t *testing.T) {
	dgx, islands := topotest.DGXH100().Matrix, topotest.TwoIslands().Matrix
	all, split := []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{0, 4}
	comm := func(j *st.JobWrapper, c string) *api.Job {
		o := j.ID(1).Obj()
		o.Comm = c
		return o
	}
	tests := []struct {
		name       string
		snap       *st.SnapshotWrapper
		job        *api.Job
		wantWhy    string
		wantReason api.ReasonCode
		wantDetail string
	}{
		{
			name:    "two whole nodes under one leaf",
			snap:    reasonCluster(2, 2, dgx, map[string][]int{"gpu03": {0}}),
			job:     st.MakeJob().ID(1).Nodes(2).GPUsPerNode(8).Obj(),
			wantWhy: "best fit on 2 whole nodes gpu[01-02] under leaf s1; link score 100800/100800 over 2 nodes; GPUs on up to 2 NUMA nodes per node",
		},
		{
			name:    "half nodes keep to one island and socket each",
			snap:    reasonCluster(2, 2, islands, nil),
			job:     comm(st.MakeJob().Nodes(2).GPUsPerNode(4), "model"),
			wantWhy: "best fit on 2 nodes gpu[01-02] under leaf s1; link score 7200/7200 over 2 nodes; GPUs on 1 NUMA node per node",
		},
		{
			name:    "single GPU names the NUMA node",
			snap:    reasonCluster(1, 2, islands, map[string][]int{"gpu02": {4, 5, 6}}),
			job:     st.MakeJob().ID(1).GPUs(1).Obj(),
			wantWhy: "best fit on gpu02: 4/8 GPUs free left; gpu02: GPU 7, the least linked free GPU, NUMA 1",
		},
		{
			name: "model-parallel refusal counts missing NVLink sets and names the best leaf",
			snap: reasonCluster(2, 4, islands, map[string][]int{
				"gpu01": split, "gpu02": split, "gpu03": all, "gpu05": split, "gpu06": all, "gpu07": all, "gpu08": all,
			}),
			job:        comm(st.MakeJob().Nodes(3).GPUsPerNode(4), "model"),
			wantReason: api.ReasonResources,
			wantDetail: "1/8 nodes available: 4 InsufficientGPU, 3 NoNVLinkSet; best leaf s1 has 1/4 free nodes",
		},
		{
			name: "a data-parallel job crosses islands where a model-parallel one waits",
			snap: reasonCluster(2, 4, islands, map[string][]int{
				"gpu01": split, "gpu02": split, "gpu03": all, "gpu05": split, "gpu06": all, "gpu07": all, "gpu08": all,
			}),
			job:     comm(st.MakeJob().Nodes(3).GPUsPerNode(4), "data"),
			wantWhy: "best fit on 3 nodes gpu[01-02,04] under leaf s1; link score 7260/10800 over 3 nodes; GPUs on up to 2 NUMA nodes per node",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := sched.Schedule(tt.snap.Jobs(tt.job).Obj(), now, sched.Config{})
			if tt.wantDetail != "" {
				d, _ := decision(t, plan, 1)
				want := sched.Decision{JobID: 1, Reason: tt.wantReason, Detail: tt.wantDetail}
				if diff := cmp.Diff(want, d); diff != "" {
					t.Errorf("decision (-want +got):\n%s", diff)
				}
				return
			}
			got, ok := start(plan, 1)
			if !ok {
				t.Fatalf("job 1 did not start: %+v", plan.Pending)
			}
			if got.Why != tt.wantWhy {
				t.Errorf("Why = %q\nwant  %q", got.Why, tt.wantWhy)
			}
		})
	}
}
