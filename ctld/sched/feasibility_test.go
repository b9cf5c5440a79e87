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
