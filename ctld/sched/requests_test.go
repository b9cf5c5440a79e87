package sched_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
)

// shape is a start's allocation as (node, GPUs, tasks) per node.
type shape struct {
	Node  string
	GPUs  int
	Tasks int
}

func shapeOf(a []api.NodeAlloc) []shape {
	out := make([]shape, len(a))
	for i, x := range a {
		out[i] = shape{x.Node, len(x.GPUs), x.Tasks}
	}
	return out
}

// TestGPURequests: Slurm's GPU options as the scheduler reads them once
// the controller resolved them (api.ResolveGPUs): totals without -N span
// the fewest nodes that hold them, -N splits them, per-task GPUs follow
// the task layout.
func TestGPURequests(t *testing.T) {
	mixed := func() *sched.Snapshot {
		return st.MakeSnapshot().Nodes(
			st.MakeNode("a01").CPUs(64).Mem(256000).GPUs(8).Model("a100").Obj(),
			st.MakeNode("a02").CPUs(64).Mem(256000).GPUs(8).Model("a100").Obj(),
			st.MakeNode("v01").CPUs(32).Mem(128000).GPUs(4).Model("v100").Obj(),
			st.MakeNode("v02").CPUs(32).Mem(128000).GPUs(4).Model("v100").Obj(),
		).Partitions(st.MakePartition(st.DefaultPartition, "a01", "a02", "v01", "v02").Obj()).Obj()
	}
	maxNodes := func(n int) *sched.Snapshot {
		s := fourNodes().Obj()
		s.Partitions[st.DefaultPartition].MaxNodes = n
		return s
	}
	tests := []struct {
		name string
		snap *sched.Snapshot
		spec api.JobSpec
		want []shape // nil: stays pending
	}{
		{name: "--gpus=16 spans two 8-GPU nodes", snap: fourNodes().Obj(), spec: api.JobSpec{GPUs: 16},
			want: []shape{{"gpu01", 8, 1}, {"gpu02", 8, 1}}},
		{name: "--gpus=12 splits evenly over the fewest nodes", snap: fourNodes().Obj(), spec: api.JobSpec{GPUs: 12},
			want: []shape{{"gpu01", 6, 1}, {"gpu02", 6, 1}}},
		{name: "--gpus=32 takes the whole partition", snap: fourNodes().Obj(), spec: api.JobSpec{GPUs: 32},
			want: []shape{{"gpu01", 8, 1}, {"gpu02", 8, 1}, {"gpu03", 8, 1}, {"gpu04", 8, 1}}},
		{name: "--gpus=33 never fits", snap: fourNodes().Obj(), spec: api.JobSpec{GPUs: 33}},
		{name: "--gpus=8 stays on one node", snap: fourNodes().Obj(), spec: api.JobSpec{GPUs: 8},
			want: []shape{{"gpu01", 8, 1}}},
		{name: "-N3 --gpus=7 distributes, the remainder first", snap: fourNodes().Obj(), spec: api.JobSpec{Nodes: 3, GPUs: 7},
			want: []shape{{"gpu01", 3, 1}, {"gpu02", 2, 1}, {"gpu03", 2, 1}}},
		{name: "-N2 --gpus=16", snap: fourNodes().Obj(), spec: api.JobSpec{Nodes: 2, GPUs: 16},
			want: []shape{{"gpu01", 8, 1}, {"gpu02", 8, 1}}},
		{name: "-n4 --gpus-per-task=1: one GPU per task on one node", snap: fourNodes().Obj(), spec: api.JobSpec{Tasks: 4, GPUsPerTask: 1},
			want: []shape{{"gpu01", 4, 4}}},
		{name: "-n16 --gpus-per-task=1 spans two nodes", snap: fourNodes().Obj(), spec: api.JobSpec{Tasks: 16, GPUsPerTask: 1},
			want: []shape{{"gpu01", 8, 8}, {"gpu02", 8, 8}}},
		{name: "-N3 -n4 --gpus-per-task=2 follows the tasks", snap: fourNodes().Obj(), spec: api.JobSpec{Nodes: 3, Tasks: 4, GPUsPerTask: 2},
			want: []shape{{"gpu01", 4, 2}, {"gpu02", 2, 1}, {"gpu03", 2, 1}}},
		{name: "--gpus=8 --gpus-per-task=2 (resolved: -n4)", snap: fourNodes().Obj(), spec: api.JobSpec{GPUs: 8, GPUsPerTask: 2, Tasks: 4},
			want: []shape{{"gpu01", 8, 4}}},
		{name: "-n128 spans 64-CPU nodes", snap: fourNodes().Obj(), spec: api.JobSpec{Tasks: 128},
			want: []shape{{"gpu01", 0, 64}, {"gpu02", 0, 64}}},
		{name: "--gpus-per-node=4 with -n80 spans, 4 GPUs on each", snap: fourNodes().Obj(), spec: api.JobSpec{Tasks: 80, GPUsPerNode: 4},
			want: []shape{{"gpu01", 4, 40}, {"gpu02", 4, 40}}},
		{name: "--gpus=v100:8 counts v100 nodes only", snap: mixed(), spec: api.JobSpec{GPUs: 8, GPUType: "v100"},
			want: []shape{{"v01", 4, 1}, {"v02", 4, 1}}},
		{name: "--gpus=a100:8 fits one a100 node", snap: mixed(), spec: api.JobSpec{GPUs: 8, GPUType: "A100"},
			want: []shape{{"a01", 8, 1}}},
		{name: "--gpus=16 on mixed nodes: two a100", snap: mixed(), spec: api.JobSpec{GPUs: 16},
			want: []shape{{"a01", 8, 1}, {"a02", 8, 1}}},
		{name: "-N1-4 --gpus=16: within the range", snap: fourNodes().Obj(), spec: api.JobSpec{Nodes: 1, MaxNodes: 4, GPUs: 16},
			want: []shape{{"gpu01", 8, 1}, {"gpu02", 8, 1}}},
		{name: "-N3-4 --gpus=16: the range's minimum first", snap: fourNodes().Obj(), spec: api.JobSpec{Nodes: 3, MaxNodes: 4, GPUs: 16},
			want: []shape{{"gpu01", 6, 1}, {"gpu02", 5, 1}, {"gpu03", 5, 1}}},
		{name: "-N1-2 --gpus=24: not beyond the range", snap: fourNodes().Obj(), spec: api.JobSpec{Nodes: 1, MaxNodes: 2, GPUs: 24}},
		{name: "spanning stops at the partition's MaxNodes", snap: maxNodes(2), spec: api.JobSpec{GPUs: 24}},
		{name: "... and spans up to it", snap: maxNodes(2), spec: api.JobSpec{GPUs: 16},
			want: []shape{{"gpu01", 8, 1}, {"gpu02", 8, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			job := st.MakeJob().ID(1).Obj()
			part := job.Partition
			job.JobSpec = spec
			job.Partition = part
			tt.snap.Pending = []*api.Job{job}
			plan := sched.Schedule(tt.snap, now, sched.Config{})
			var got []shape
			if len(plan.Starts) == 1 {
				got = shapeOf(plan.Starts[0].Alloc)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("allocation (-want +got):\n%s\npending: %+v", diff, plan.Pending)
			}
			ok, why := sched.CheckFeasible(&job.JobSpec, tt.snap.Partitions[part], tt.snap.Nodes, sched.Config{})
			if ok != (tt.want != nil) {
				t.Errorf("CheckFeasible = %v (%s), want %v", ok, why, tt.want != nil)
			}
		})
	}
}

// TestGPUSpanningWaitsForTheFewestNodes: a spanning job waits for its
// node count rather than scatter over more, busier nodes.
func TestGPUSpanningWaitsForTheFewestNodes(t *testing.T) {
	snap := st.MakeSnapshot().Nodes(
		st.MakeNode("gpu01").CPUs(64).Mem(256000).GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5).Obj(),
		st.MakeNode("gpu02").CPUs(64).Mem(256000).GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5).Obj(),
		st.MakeNode("gpu03").CPUs(64).Mem(256000).GPUs(8).UsedGPUs(0, 1, 2, 3, 4, 5).Obj(),
	).Partitions(st.MakePartition(st.DefaultPartition, "gpu01", "gpu02", "gpu03").Obj()).
		Jobs(st.MakeJob().ID(1).GPUs(6).Obj()).Obj()
	plan := sched.Schedule(snap, now, sched.Config{})
	if len(plan.Starts) != 0 || len(plan.Pending) != 1 || plan.Pending[0].Reason != api.ReasonResources {
		t.Fatalf("starts %+v, pending %+v; want job 1 pending for Resources", plan.Starts, plan.Pending)
	}
}

// TestPartitionLists: -p a,b runs in the first listed partition where
// the job can start, and a partition where it did not fit is not held
// for it.
func TestPartitionLists(t *testing.T) {
	snap := func(jobs ...*api.Job) *sched.Snapshot {
		return st.MakeSnapshot().Nodes(
			st.MakeNode("a01").CPUs(64).Mem(256000).GPUs(8).UsedGPUs(0, 1, 2, 3).Obj(),
			st.MakeNode("b01").CPUs(64).Mem(256000).GPUs(8).Obj(),
			st.MakeNode("c01").CPUs(64).Mem(256000).GPUs(8).Down().Obj(),
		).Partitions(
			st.MakePartition("a", "a01").MaxTime(api.Infinite).Obj(),
			st.MakePartition("b", "b01").MaxTime(api.Infinite).Obj(),
			st.MakePartition("c", "c01").MaxTime(api.Infinite).Obj(),
			st.MakePartition("off", "b01").Down().Obj(),
		).Jobs(jobs...).Obj()
	}
	type start struct {
		ID        uint64
		Partition string
		Node      string
	}
	tests := []struct {
		name    string
		snap    *sched.Snapshot
		starts  []start
		pending []sched.Decision
	}{
		{name: "fits in the first: runs there",
			snap:   snap(st.MakeJob().ID(1).Partition("a,b").GPUs(2).Obj()),
			starts: []start{{1, "a", "a01"}}},
		{name: "list order, not name order",
			snap:   snap(st.MakeJob().ID(1).Partition("b,a").GPUs(2).Obj()),
			starts: []start{{1, "b", "b01"}}},
		{name: "does not fit the first: runs in the second",
			snap:   snap(st.MakeJob().ID(1).Partition("a,b").GPUs(8).Obj()),
			starts: []start{{1, "b", "b01"}}},
		{name: "a down partition in the list is skipped",
			snap:   snap(st.MakeJob().ID(1).Partition("off,b").GPUs(8).Obj()),
			starts: []start{{1, "b", "b01"}}},
		{name: "repeats and blanks in the list are ignored",
			snap:   snap(st.MakeJob().ID(1).Partition("a, a,,b").GPUs(8).Obj()),
			starts: []start{{1, "b", "b01"}}},
		{name: "a lower job of the first partition is not held back by one that ran in the second",
			snap: snap(
				st.MakeJob().ID(1).Priority(9).Partition("a,b").GPUs(8).Obj(),
				st.MakeJob().ID(2).Priority(1).Partition("a").GPUs(4).Obj(),
			),
			starts: []start{{1, "b", "b01"}, {2, "", "a01"}}},
		{name: "fits nowhere: one decision, of the first partition where it waits for resources",
			snap: snap(st.MakeJob().ID(1).Partition("off,a").GPUs(6).Obj()),
			pending: []sched.Decision{{JobID: 1, Reason: api.ReasonResources,
				Detail: "partition a: 0/1 nodes available: 1 InsufficientGPU"}}},
		{name: "fits nowhere: a partition with down nodes waits in line too",
			snap: snap(st.MakeJob().ID(1).Partition("c,a").GPUs(6).Obj()),
			pending: []sched.Decision{{JobID: 1, Reason: api.ReasonNodeDown,
				Detail: "partition c: 0/1 nodes available: 1 NodeDown; needs nodes that are down or drained"}}},
		{name: "fits nowhere and holds every partition it waits in",
			snap: st.MakeSnapshot().Nodes(
				st.MakeNode("a01").CPUs(64).Mem(256000).GPUs(8).UsedGPUs(0, 1, 2, 3).Obj(),
				st.MakeNode("b01").CPUs(64).Mem(256000).GPUs(8).UsedGPUs(0, 1).Obj(),
			).Partitions(
				st.MakePartition("a", "a01").Obj(),
				st.MakePartition("b", "b01").Obj(),
			).Jobs(
				st.MakeJob().ID(1).Priority(9).Partition("a,b").GPUs(8).Obj(),
				st.MakeJob().ID(2).Priority(1).Partition("b").GPUs(1).Obj(),
				st.MakeJob().ID(3).Priority(1).Partition("a").GPUs(1).Obj(),
			).Obj(),
			pending: []sched.Decision{
				{JobID: 1, Reason: api.ReasonResources, Detail: "partition a: 0/1 nodes available: 1 InsufficientGPU"},
				{JobID: 2, Reason: api.ReasonPriority, Detail: "waiting for higher-priority jobs"},
				{JobID: 3, Reason: api.ReasonPriority, Detail: "waiting for higher-priority jobs"},
			}},
		{name: "a held job keeps its hold reason",
			snap:    snap(st.MakeJob().ID(1).Partition("a,b").Hold(api.HoldUser).Obj()),
			pending: []sched.Decision{{JobID: 1, Reason: api.ReasonJobHeldUser, Detail: "partition a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := sched.Schedule(tt.snap, now, sched.Config{})
			var got []start
			for _, s := range plan.Starts {
				got = append(got, start{s.JobID, s.Partition, s.Alloc[0].Node})
			}
			if diff := cmp.Diff(tt.starts, got); diff != "" {
				t.Errorf("starts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.pending, plan.Pending, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
			checkPlan(t, tt.snap, plan)
		})
	}
}

// TestPartitionListRequeued: a job that ran in one partition of its list
// and came back pending (requeue) is eligible in all of them again.
func TestPartitionListRequeued(t *testing.T) {
	j := st.MakeJob().ID(1).Partition("a").GPUs(8).Obj()
	j.PartitionList = "a,b"
	snap := st.MakeSnapshot().Nodes(
		st.MakeNode("a01").CPUs(64).Mem(256000).GPUs(8).UsedGPUs(0).Obj(),
		st.MakeNode("b01").CPUs(64).Mem(256000).GPUs(8).Obj(),
	).Partitions(
		st.MakePartition("a", "a01").Obj(),
		st.MakePartition("b", "b01").Obj(),
	).Jobs(j).Obj()
	plan := sched.Schedule(snap, now, sched.Config{})
	if len(plan.Starts) != 1 || plan.Starts[0].Partition != "b" {
		t.Fatalf("starts %+v, pending %+v; want job 1 in b", plan.Starts, plan.Pending)
	}
}

// TestExpectedStartWithoutBackfill: under the priority and fifo
// policies the first blocked job gets the instant at which it fits once
// running jobs reach their limits (squeue --start), and holds nothing in
// time for it.
func TestExpectedStartWithoutBackfill(t *testing.T) {
	for _, pol := range []sched.Policy{sched.PolicyPriority, sched.PolicyFIFO, sched.PolicyBackfill, sched.PolicyEASY} {
		t.Run(pol.String(), func(t *testing.T) {
			snap := fourNodes().Obj()
			for i := range snap.Nodes {
				n := &snap.Nodes[i]
				n.FreeGPUs = n.FreeGPUs[:4]
				n.Releases = []sched.Release{{At: now.Add(time.Duration(i+1) * time.Hour), GPUs: []int{4, 5, 6, 7}}}
			}
			snap.Pending = []*api.Job{
				st.MakeJob().ID(1).Priority(9).GPUsPerNode(8).Nodes(2).TimeLimit(600).Obj(),
				st.MakeJob().ID(2).Priority(5).GPUsPerNode(8).Nodes(4).TimeLimit(600).Obj(),
			}
			plan := sched.Schedule(snap, now, sched.Config{Policy: pol})
			d1, _ := decision(t, plan, 1)
			if want := now.Add(2 * time.Hour); !d1.ExpectedStart.Equal(want) {
				t.Errorf("job 1 expected start %v, want %v (when the second node frees its GPUs)", d1.ExpectedStart, want)
			}
			d2, _ := decision(t, plan, 2)
			if !d2.ExpectedStart.IsZero() && pol != sched.PolicyBackfill {
				t.Errorf("job 2 expected start %v, want none (blocked behind job 1)", d2.ExpectedStart)
			}
			if !pol.Backfills() && len(plan.Reservations) != 0 {
				t.Errorf("reservations %+v under %s", plan.Reservations, pol)
			}
		})
	}
}

// TestRequestProperties runs random clusters with the request forms of
// this file — totals that span nodes, per-task GPUs, partition lists —
// through the plan checks (no GPU, CPU or byte of memory given twice,
// nodes in the job's partition, counts kept) and checks the forms' own
// rules.
func TestRequestProperties(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	spanned, listed, perTask := 0, 0, 0
	for seed := range seeds {
		snap := randomSnapshot(int64(seed), 4+seed%30, 10+seed%100)
		rng := rand.New(rand.NewPCG(uint64(seed), 0x72657175657374))
		names := []string{"all", "gpu", "small", "off"}
		for _, j := range snap.Pending {
			switch rng.IntN(4) {
			case 0: // a total without -N, or with a -N range
				j.Nodes, j.GPUsPerNode, j.GPUsPerTask, j.TasksPerNode = 0, 0, 0, 0
				j.GPUs = []int{4, 9, 12, 16, 24}[rng.IntN(5)]
				if rng.IntN(3) == 0 {
					j.Nodes, j.MaxNodes = 1+rng.IntN(2), 2+rng.IntN(3)
				}
			case 1: // tasks with their own GPUs
				j.GPUs, j.GPUsPerNode, j.TasksPerNode = 0, 0, 0
				j.Tasks, j.GPUsPerTask = []int{2, 4, 9, 16}[rng.IntN(4)], 1+rng.IntN(2)
				if rng.IntN(2) == 0 {
					j.Nodes = 0
				}
			}
			if rng.IntN(3) == 0 {
				a, b := names[rng.IntN(4)], names[rng.IntN(4)]
				j.Partition = a + "," + b
			}
			if err := j.ResolveGPUs(); err != nil {
				j.GPUs, j.GPUsPerTask, j.GPUsPerNode = 0, 0, 0
			}
		}
		cfg := sched.Config{DefMemPerCPUMB: int64(seed % 2 * 500), Policy: sched.Policy(seed % 4),
			Backfill: sched.BackfillConfig{MaxJobTest: seed % 3, MaxJobPart: seed % 4}}
		plan := sched.Schedule(snap, now, cfg)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			checkPlan(t, snap, plan)
			for _, s := range plan.Starts {
				j := jobByID(snap, s.JobID)
				if j.GPUsPerTask > 0 && !j.Exclusive {
					perTask++
					for _, a := range s.Alloc {
						if len(a.GPUs) != j.GPUsPerTask*a.Tasks {
							t.Errorf("job %d: %d GPUs for %d tasks of %d GPUs on %s", j.ID, len(a.GPUs), a.Tasks, j.GPUsPerTask, a.Node)
						}
						if tg := j.TaskGPUs(&a); len(tg) != a.Tasks {
							t.Errorf("job %d: TaskGPUs gives %d tasks on %s, want %d", j.ID, len(tg), a.Node, a.Tasks)
						}
					}
				}
				if j.Nodes == 0 && len(s.Alloc) > 1 {
					spanned++
				}
				if len(api.PartitionNames(j.Partition)) > 1 {
					listed++
				}
			}
			for _, d := range plan.Pending {
				if j := jobByID(snap, d.JobID); len(api.PartitionNames(j.Partition)) > 1 && !strings.HasPrefix(d.Detail, "partition ") {
					t.Errorf("job %d of partitions %s: detail %q does not name the partition", j.ID, j.Partition, d.Detail)
				}
			}
			seen := map[uint64]bool{}
			for _, d := range plan.Pending {
				if seen[d.JobID] {
					t.Errorf("job %d decided twice", d.JobID)
				}
				seen[d.JobID] = true
			}
			for _, s := range plan.Starts {
				if seen[s.JobID] {
					t.Errorf("job %d both started and pending", s.JobID)
				}
			}
		})
	}
	if spanned == 0 || listed == 0 || perTask == 0 {
		t.Errorf("forms not exercised: %d spanning starts, %d partition-list starts, %d per-task starts", spanned, listed, perTask)
	}
	t.Logf("%d spanning starts, %d partition-list starts, %d per-task starts", spanned, listed, perTask)
}
