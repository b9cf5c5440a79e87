package sched_test

import (
	"slices"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
)

// TestLaunchFailNodesComeLast: a job requeued after its launch failed
// on a node gets any other node that fits before that one, even a worse
// fit, and still that one when nothing else fits.
func TestLaunchFailNodesComeLast(t *testing.T) {
	failedOn := func(j *api.Job, nodes ...string) *api.Job {
		j.LaunchFailNodes = nodes
		return j
	}
	// gpu02 is the best fit (2 GPUs in use), gpu01 and gpu03 are free.
	partUsed := func() *st.SnapshotWrapper {
		return st.MakeSnapshot().Nodes(
			st.MakeNode("gpu01").GPUs(8).Obj(), st.MakeNode("gpu02").GPUs(8).UsedGPUs(0, 1).Obj(), st.MakeNode("gpu03").GPUs(8).Obj()).
			Partitions(st.MakePartition("gpu", "gpu01", "gpu02", "gpu03").Obj())
	}
	tests := []struct {
		name string
		snap *sched.Snapshot
		want string
	}{
		{"the best fit without failures", partUsed().Jobs(st.MakeJob().GPUs(1).Obj()).Obj(), "1 start gpu02"},
		{"the best fit failed: the next", partUsed().Jobs(failedOn(st.MakeJob().GPUs(1).Obj(), "gpu02")).Obj(), "1 start gpu01"},
		{"two failed: the third", partUsed().Jobs(failedOn(st.MakeJob().GPUs(1).Obj(), "gpu02", "gpu01")).Obj(), "1 start gpu03"},
		{"every node failed: the best fit again", partUsed().Jobs(failedOn(st.MakeJob().GPUs(1).Obj(), "gpu01", "gpu02", "gpu03")).Obj(), "1 start gpu02"},
		{"only the failed node fits", st.MakeSnapshot().Nodes(
			st.MakeNode("gpu01").GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5, 6, 7).Obj(), st.MakeNode("gpu02").GPUs(8).Obj()).
			Partitions(st.MakePartition("gpu", "gpu01", "gpu02").Obj()).
			Jobs(failedOn(st.MakeJob().GPUs(1).Obj(), "gpu02")).Obj(), "1 start gpu02"},
		{"a one-node cluster", st.Cluster("gpu", 1, 64, 256000, 8).
			Jobs(failedOn(st.MakeJob().GPUs(1).Obj(), "gpu01")).Obj(), "1 start gpu01"},
		{"a multi-node job leaves it out", st.Cluster("gpu", 3, 64, 256000, 8).
			Jobs(failedOn(st.MakeJob().Nodes(2).GPUsPerNode(8).Obj(), "gpu01")).Obj(), "1 start gpu02,gpu03"},
		{"a node not in the snapshot", st.Cluster("gpu", 2, 64, 256000, 8).
			Jobs(failedOn(st.MakeJob().GPUs(1).Obj(), "gone07")).Obj(), "1 start gpu01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shareOutcome(sched.Schedule(tt.snap, now, sched.Config{}))
			if !slices.Equal(got, []string{tt.want}) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
