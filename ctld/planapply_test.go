package ctld

import (
	"slices"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

// TestPlanApplyRechecks: the controller applies a plan through the
// ledger (ctld/state), which re-verifies each start against what the
// starts before it took. A plan that gives one GPU to two jobs starts
// the first; the second stays pending for the next pass, and the node's
// listing shows exactly what the started job holds.
func TestPlanApplyRechecks(t *testing.T) {
	h := newHarness(t)
	h.register("gpu01")
	h.register("gpu02")
	a := h.submit(api.JobSpec{Name: "a", GPUs: 1, Nodes: 1})
	b := h.submit(api.JobSpec{Name: "b", GPUs: 1, Nodes: 1})
	h.planHook(func(_ *sched.Snapshot, p *sched.Plan) {
		// Both on GPU 3 of gpu01, whatever the core chose.
		p.Starts = nil
		for _, id := range []uint64{a, b} {
			p.Starts = append(p.Starts, sched.Start{JobID: id, TimeLimit: 600,
				Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 1, MemoryMB: 1024, GPUs: []int{3}}}})
		}
	})
	h.s.schedulePass()
	if j := h.job(a); j.State != api.StateRunning || !slices.Equal(j.Alloc[0].GPUs, []int{3}) {
		t.Fatalf("job a: %s %+v", j.State, j.Alloc)
	}
	if j := h.job(b); j.State != api.StatePending {
		t.Fatalf("job b got the GPU job a holds: %s %+v", j.State, j.Alloc)
	}
	h.s.mu.Lock()
	n := h.s.nodes["gpu01"]
	cpus, gpus := n.AllocCPUs, slices.Clone(n.AllocGPUs)
	h.s.mu.Unlock()
	if cpus != 1 || !slices.Equal(gpus, []int{3}) {
		t.Fatalf("gpu01 lists %d CPUs and GPUs %v allocated, want job a's 1 and [3]", cpus, gpus)
	}
	// The next pass, planned by the core from the ledger, places b
	// elsewhere.
	h.s.schedule = sched.Schedule
	h.s.schedulePass()
	if j := h.job(b); j.State != api.StateRunning || j.Alloc[0].Node == "gpu01" && slices.Contains(j.Alloc[0].GPUs, 3) {
		t.Fatalf("job b: %s %+v", j.State, j.Alloc)
	}
}
