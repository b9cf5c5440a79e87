package ctld

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// listConfig has two partitions of one 8-GPU node each, a third of both
// nodes, and one closed to all but the daemon group.
const listConfig = testConfigHeader + `
partitions:
  - {name: a, nodes: "gpu01", default: true, default_time: "10:00", max_time: "1:00:00"}
  - {name: b, nodes: "gpu02", default_time: "20:00", max_time: "1:00:00"}
  - {name: both, nodes: "gpu[01-02]", max_time: "1:00:00"}
  - {name: staff, nodes: "gpu01", allow_groups: [daemon]}
nodes:
  - {names: "gpu[01-02]", cpus: 8, memory: 64G, gpus: 8}
`

func (h *harness) trySubmit(spec api.JobSpec) (uint64, error) {
	h.t.Helper()
	if spec.Script == "" {
		spec.Script = "#!/bin/sh\ntrue\n"
	}
	if spec.WorkDir == "" {
		spec.WorkDir = "/home/alice"
	}
	resp, err := h.s.submit(context.Background(), h.alice, api.SubmitRequest{Spec: spec})
	return resp.JobID, err
}

// TestSubmitGPURequests: --gpus as a total spans nodes, the GPU options
// fix each other's counts at submit, and what disagrees is refused.
func TestSubmitGPURequests(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")

	for _, tt := range []struct {
		name    string
		spec    api.JobSpec
		wantErr string
	}{
		{"more GPUs than the partition", api.JobSpec{GPUs: 17}, "Requested node configuration is not available"},
		{"--gpus not a multiple of --gpus-per-node", api.JobSpec{GPUs: 12, GPUsPerNode: 8}, "Invalid generic resource (gres) specification: --gpus=12 is not a multiple of --gpus-per-node=8"},
		{"--gpus with --gpus-per-task that disagree with -n", api.JobSpec{GPUs: 8, GPUsPerTask: 2, Tasks: 3}, "makes 4 tasks, not the 3 of -n"},
		{"fewer GPUs than nodes", api.JobSpec{GPUs: 1, Nodes: 2}, "at least one GPU per node"},
	} {
		if _, err := h.trySubmit(tt.spec); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
	}

	span := h.submit(api.JobSpec{GPUs: 16})
	h.s.schedulePass()
	j := h.job(span)
	if j.State != api.StateRunning || len(j.Alloc) != 2 || len(j.Alloc[0].GPUs) != 8 || len(j.Alloc[1].GPUs) != 8 {
		t.Fatalf("--gpus=16: %s on %+v, want RUNNING with 8 GPUs on each of 2 nodes", j.State, j.Alloc)
	}
	if j.Nodes != 0 {
		t.Errorf("--gpus=16 recorded -N%d; the node count is the scheduler's", j.Nodes)
	}
	h.sync("gpu01", finished(span, 0))

	tasks := h.submit(api.JobSpec{GPUs: 8, GPUsPerTask: 2})
	if j := h.job(tasks); j.Tasks != 4 {
		t.Errorf("--gpus=8 --gpus-per-task=2 recorded %d tasks, want 4", j.Tasks)
	}
	perTask := h.submit(api.JobSpec{Tasks: 4, GPUsPerTask: 1})
	h.s.schedulePass()
	j = h.job(perTask)
	if j.State != api.StateRunning {
		t.Fatalf("-n4 --gpus-per-task=1: %s %s %s", j.State, j.Reason, j.ReasonDetail)
	}
	a := j.Alloc[0]
	if len(j.Alloc) != 1 || a.Tasks != 4 || len(a.GPUs) != 4 {
		t.Fatalf("-n4 --gpus-per-task=1 got %+v, want one node with 4 tasks and 4 GPUs", j.Alloc)
	}
	seen := map[int]bool{}
	for k, g := range j.TaskGPUs(&a) {
		if len(g) != 1 || seen[g[0]] {
			t.Errorf("task %d gets GPUs %v (taken: %v)", k, g, seen)
		}
		for _, x := range g {
			seen[x] = true
		}
	}
}

// TestSubmitPartitionList: -p a,b is kept as the list while pending,
// runs in the first partition where it fits, and is eligible in all of
// them again after a requeue.
func TestSubmitPartitionList(t *testing.T) {
	h := newHarnessWith(t, listConfig)
	h.register("gpu01")
	h.register("gpu02")

	if _, err := h.trySubmit(api.JobSpec{Partition: "a,nosuch"}); err == nil || !strings.Contains(err.Error(), "invalid partition specified: nosuch") {
		t.Errorf("unknown partition in a list: %v", err)
	}
	if _, err := h.trySubmit(api.JobSpec{Partition: "a,staff"}); err == nil || !strings.Contains(err.Error(), "partition staff allows groups") {
		t.Errorf("a list naming a closed partition: %v", err)
	}
	if _, err := h.trySubmit(api.JobSpec{Partition: "a,b", GPUsPerNode: 9}); err == nil || !strings.Contains(err.Error(), "Requested node configuration is not available") {
		t.Errorf("a job no listed partition can run: %v", err)
	}
	// Two nodes fit only in "both": the list is accepted for it.
	wide := h.submit(api.JobSpec{Partition: "a,both", Nodes: 2, Hold: true})
	if got := h.job(wide).Partition; got != "a,both" {
		t.Errorf("partition %q, want a,both", got)
	}

	blocker := h.submit(api.JobSpec{Partition: "a", GPUs: 8})
	h.s.schedulePass()
	if h.job(blocker).State != api.StateRunning {
		t.Fatal("blocker did not start")
	}
	id := h.submit(api.JobSpec{Partition: " a, b,a", GPUs: 4})
	j := h.job(id)
	if j.Partition != "a,b" || j.TimeLimit != api.NoValue {
		t.Errorf("pending: partition %q, time limit %d; want a,b and none yet (each partition's default applies)", j.Partition, j.TimeLimit)
	}
	list := h.s.listJobs(api.JobFilter{Partitions: []string{"b"}}, seeAll)
	if len(list.Jobs) != 1 || list.Jobs[0].ID != id {
		t.Errorf("squeue -p b lists %d jobs, want the pending job of a,b", len(list.Jobs))
	}
	h.s.schedulePass()
	j = h.job(id)
	if j.State != api.StateRunning || j.Partition != "b" || j.PartitionList != "a,b" || j.BatchHost() != "gpu02" {
		t.Fatalf("started: %s in %q (list %q) on %s; want RUNNING in b on gpu02", j.State, j.Partition, j.PartitionList, j.BatchHost())
	}
	if j.TimeLimit != 1200 {
		t.Errorf("time limit %d, want partition b's default 1200", j.TimeLimit)
	}
	if j.ShownPartition() != "b" {
		t.Errorf("running job shown in %q", j.ShownPartition())
	}
	if !slices.Contains(h.trail(id), "start/") {
		t.Errorf("trail %v does not record the start", h.trail(id))
	}

	// Requeued, it may run in a again once a has room.
	h.sync("gpu02", running(id, 0))
	if _, err := h.s.updateJobs(h.alice, api.JobUpdate{IDs: []uint64{id}, Action: "requeue"}); err != nil {
		t.Fatal(err)
	}
	h.sync("gpu02", finished(id, 0))
	h.sync("gpu01", finished(blocker, 0))
	j = h.job(id)
	if j.State != api.StatePending || j.ShownPartition() != "a,b" {
		t.Fatalf("requeued: %s shown in %q, want PENDING in a,b", j.State, j.ShownPartition())
	}
	h.s.updateJobs(h.alice, api.JobUpdate{IDs: []uint64{id}, Action: "release"})
	h.s.schedulePass()
	if j = h.job(id); j.State != api.StateRunning || j.Partition != "a" {
		t.Fatalf("after requeue: %s in %q, want RUNNING in a", j.State, j.Partition)
	}

	// scontrol update Partition= replaces the list.
	other := h.submit(api.JobSpec{Partition: "a,b", Hold: true})
	b := "b,a"
	if res, err := h.s.updateJobs(h.alice, api.JobUpdate{IDs: []uint64{other}, Action: "update", Partition: &b}); err != nil || res.Results[0].Error != "" {
		t.Fatalf("update partition: %v %+v", err, res)
	}
	if j := h.job(other); j.Partition != "b,a" || j.PartitionList != "" {
		t.Errorf("after update: %q (list %q)", j.Partition, j.PartitionList)
	}
}

// TestExpectedStartUnderPriority: without backfill the blocked job's
// expected start (squeue --start) is when running jobs' limits free
// what it needs.
func TestExpectedStartUnderPriority(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	first := h.submit(api.JobSpec{GPUs: 8, TimeLimit: 600})
	second := h.submit(api.JobSpec{GPUs: 8, TimeLimit: 1800})
	h.s.schedulePass()
	h.clock.add(time.Minute)
	waiting := h.submit(api.JobSpec{GPUs: 8})
	h.s.schedulePass()
	if h.job(first).State != api.StateRunning || h.job(second).State != api.StateRunning {
		t.Fatal("the running jobs did not start")
	}
	j := h.job(waiting)
	want := h.job(first).StartTime.Add(600 * time.Second)
	if j.State != api.StatePending || !j.ExpectedStart.Equal(want) {
		t.Fatalf("waiting job: %s, expected start %v; want PENDING, %v", j.State, j.ExpectedStart, want)
	}
	list := h.s.listJobs(api.JobFilter{}, seeAll)
	for _, lj := range list.Jobs {
		if lj.ID == waiting && !lj.ExpectedStart.Equal(want) {
			t.Errorf("listing shows expected start %v", lj.ExpectedStart)
		}
	}
}
