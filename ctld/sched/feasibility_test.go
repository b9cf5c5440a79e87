package sched_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	st "github.com/tide-hpc/tide/ctld/sched/schedtest"
)

// TestFeasibilityReused: one Feasibility answers every request as a
// fresh CheckFeasible does, whatever came before it and from however many
// goroutines: required and excluded nodes, constraints and the rest of
// one check must not leak into the next (the pass marks nodes per check).
func TestFeasibilityReused(t *testing.T) {
	nodes := []sched.NodeInfo{
		st.MakeNode("gpu01").GPUs(8).UsedGPUs(0, 1, 2, 3).Obj(),
		st.MakeNode("gpu02").GPUs(8).Down().Obj(),
		st.MakeNode("gpu03").CPUs(128).Mem(512000).GPUs(4).Model("h100").Obj(),
		st.MakeNode("cpu01").Obj(),
	}
	for i, f := range [][]string{{"nvlink", "r1"}, {"r1"}, {"r2"}} {
		nodes[i].Features = f // sorted, as the controller gives them
	}
	part := st.MakePartition("gpu", "gpu01", "gpu02", "gpu03").Obj()
	specs := []api.JobSpec{
		{Nodes: 2, GPUsPerNode: 8},
		{NodeList: []string{"gpu03"}, GPUs: 8},
		{NodeList: []string{"gpu03"}, GPUs: 4},
		{Exclude: []string{"gpu01", "gpu02"}, GPUs: 8},
		{Exclude: []string{"gpu03"}, GPUs: 8},
		{NodeList: []string{"gpu01"}, Exclude: []string{"gpu01"}},
		{NodeList: []string{"cpu01"}},
		{Constraint: "nvlink", GPUs: 8},
		{Constraint: "nvlink", Nodes: 2},
		{Constraint: "[r1|r2]", Nodes: 2},
		{Constraint: "r1|r2", Nodes: 3},
		{Constraint: "ib"},
		{Tasks: 128, GPUs: 8},
		{Tasks: 128, MemPerNodeMB: 512000, GPUs: 4, GPUType: "H100"},
		{GPUs: 1, GPUType: "v100"},
		{Nodes: 4},
	}
	type answer struct {
		ok  bool
		why string
	}
	want := make([]answer, len(specs))
	for i := range specs {
		ok, why := sched.CheckFeasible(&specs[i], part, nodes, sched.Config{})
		want[i] = answer{ok, why}
	}
	if !slices.ContainsFunc(want, func(a answer) bool { return a.ok }) || !slices.ContainsFunc(want, func(a answer) bool { return !a.ok }) {
		t.Fatalf("the cases should both fit and not: %v", want)
	}
	f := sched.NewFeasibility(part, nodes, sched.Config{})
	check := func(i int) error {
		ok, why := f.Check(&specs[i])
		if (answer{ok, why}) != want[i] {
			return fmt.Errorf("spec %d %+v: %v, %q; alone %v, %q", i, specs[i], ok, why, want[i].ok, want[i].why)
		}
		return nil
	}
	for round := range 3 {
		for k := range specs {
			i := k
			if round == 1 {
				i = len(specs) - 1 - k
			}
			if err := check(i); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(specs))
	for g := range 8 {
		wg.Go(func() {
			for k := range specs {
				if err := check((k + g) % len(specs)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if ok, why := sched.NewFeasibility(nil, nodes, sched.Config{}).Check(&api.JobSpec{Partition: "x"}); ok || why != "partition x does not exist" {
		t.Errorf("no partition: %v, %q", ok, why)
	}
}

// TestFeasibilityOvercommitMinCPUsTmp: --overcommit asks for -c CPUs
// per node whatever the tasks (up to MaxTasksPerNode), --mincpus for at
// least that many CPUs on each node, and --tmp for nodes with that much
// temporary disk; what no node can give is refused with why.
func TestFeasibilityOvercommitMinCPUsTmp(t *testing.T) {
	nodes := []sched.NodeInfo{
		st.MakeNode("gpu01").TmpDisk(2048).Obj(),
		st.MakeNode("gpu02").CPUs(32).TmpDisk(100000).Obj(),
		st.MakeNode("gpu03").TmpDisk(sched.TmpDiskUnknown).Down().Obj(),
	}
	part := st.MakePartition("gpu", "gpu01", "gpu02").Obj()
	all := st.MakePartition("all", "gpu01", "gpu02", "gpu03").Obj()
	tests := []struct {
		name string
		spec api.JobSpec
		part *sched.PartitionInfo
		why  string // "" = feasible
	}{
		{name: "more tasks than the node's cpus without --overcommit",
			spec: api.JobSpec{Nodes: 1, NodeList: []string{"gpu01"}, Tasks: 65},
			why:  "required node gpu01 can never hold 65 CPUs: InsufficientCPU"},
		{name: "more tasks than the node's cpus with --overcommit",
			spec: api.JobSpec{Nodes: 1, NodeList: []string{"gpu01"}, Tasks: 65, Overcommit: true}},
		{name: "--overcommit without -N takes one node",
			spec: api.JobSpec{Tasks: 500, Overcommit: true}},
		{name: "--overcommit -N1 past MaxTasksPerNode",
			spec: api.JobSpec{Nodes: 1, Tasks: api.OvercommitTasksPerNode + 1, Overcommit: true},
			why:  "513 tasks per node requested (--overcommit), nodes of partition gpu run at most 512 (MaxTasksPerNode)"},
		{name: "--overcommit -w past MaxTasksPerNode",
			spec: api.JobSpec{Nodes: 1, NodeList: []string{"gpu02"}, Tasks: 600, Overcommit: true},
			why:  "required node gpu02 can never run 600 tasks: at most 512 per node (MaxTasksPerNode)"},
		{name: "--overcommit past MaxTasksPerNode spans two nodes when -N allows",
			spec: api.JobSpec{Tasks: 1000, Overcommit: true}},
		{name: "--overcommit still needs -c per node",
			spec: api.JobSpec{Tasks: 2, CPUsPerTask: 65, Overcommit: true},
			why:  "65 CPUs per node requested, nodes of partition gpu have at most 64"},
		{name: "--mincpus a node has", spec: api.JobSpec{MinCPUs: 64}},
		{name: "--mincpus no node has", spec: api.JobSpec{MinCPUs: 999999},
			why: "999999 CPUs per node requested, nodes of partition gpu have at most 64"},
		{name: "--mincpus on a smaller required node", spec: api.JobSpec{MinCPUs: 33, NodeList: []string{"gpu02"}},
			why: "required node gpu02 can never hold 33 CPUs: InsufficientCPU"},
		{name: "--tmp=0", spec: api.JobSpec{TmpDiskMB: 0}},
		{name: "--tmp one node has", spec: api.JobSpec{TmpDiskMB: 100000}},
		{name: "--tmp no node has", spec: api.JobSpec{TmpDiskMB: 999999},
			why: "999999 MB of temporary disk per node requested (--tmp), nodes of partition gpu have at most 100000 MB"},
		{name: "--tmp on two nodes when one has it", spec: api.JobSpec{Nodes: 2, TmpDiskMB: 4096},
			why: "2 nodes with 1 CPUs requested, partition gpu has 1 that can hold it"},
		{name: "--tmp on a required node without it", spec: api.JobSpec{TmpDiskMB: 4096, NodeList: []string{"gpu01"}},
			why: "required node gpu01 has 2048 MB of temporary disk, --tmp asks for 4096 MB"},
		{name: "a node not registered yet may have any --tmp", spec: api.JobSpec{TmpDiskMB: 999999}, part: all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := part
			if tt.part != nil {
				p = tt.part
			}
			ok, why := sched.CheckFeasible(&tt.spec, p, nodes, sched.Config{})
			if ok != (tt.why == "") || why != tt.why {
				t.Errorf("CheckFeasible = %v, %q; want %q", ok, why, tt.why)
			}
		})
	}
}

// A Feasibility outlives its checks: it must keep nothing of a
// submission (its script and environment) once a check is done.
func TestFeasibilityKeepsNoSubmission(t *testing.T) {
	nodes := []sched.NodeInfo{st.MakeNode("gpu01").GPUs(8).Obj()}
	part := st.MakePartition("gpu", "gpu01").Obj()
	f := sched.NewFeasibility(part, nodes, sched.Config{})
	for _, spec := range []api.JobSpec{
		{GPUs: 1, Script: "#!/bin/sh\necho secret\n", Environment: []string{"TOKEN=secret"}},
		{GPUs: 9, Script: "#!/bin/sh\necho secret\n", Environment: []string{"TOKEN=secret"}},
	} {
		ok, why := f.Check(&spec)
		if ok != (spec.GPUs <= 8) {
			t.Fatalf("Check(%d GPUs) = %v (%s)", spec.GPUs, ok, why)
		}
		if job, script, env := f.Retained(); job != nil || script != "" || env != nil {
			t.Errorf("after a check of %d GPUs the pass holds job %v, script %q, environment %q", spec.GPUs, job != nil, script, env)
		}
	}
}
