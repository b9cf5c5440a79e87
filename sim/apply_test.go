package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/ctld/state"
	"github.com/tide-hpc/tide/sim/trace"
)

// TestApplyMatchesController drives random plans, some impossible,
// through the simulator's path (engine.start and finish) and through
// the controller's (state.Ledger.Apply and Release, the node views
// filled as tidectld's snapshot fills them), and requires the same
// starts applied, the same free resources on every node the core sees
// next, and the same count of GPUs in use.
func TestApplyMatchesController(t *testing.T) {
	c, err := Generate(ClusterSpec{Nodes: 3, GPUsPerNode: 4, CPUsPerNode: 16, MemPerNodeMB: 64000, Leaf: 3})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []trace.Job
	for i := range 400 {
		jobs = append(jobs, trace.Job{ID: fmt.Sprint(i), Submit: int64(i), Duration: 100, GPUs: 1, Share: 1, Queue: "q", Start: -1, End: -1})
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 11))
		tab, err := newTable(jobs, 3, c, EstimatesExact)
		if err != nil {
			t.Fatal(err)
		}
		e := newEngine(Options{Cluster: c, Policy: policy(t, "fifo"), Seed: 3})
		e.load(tab)
		ctl := state.New(e.ledger.Limits())
		for _, n := range c.Nodes {
			ctl.SetCapacity(n.Name, state.Capacity{CPUs: n.CPUs, MemoryMB: n.MemoryMB, GPUs: n.GPUs, GPUMemMB: n.GPUMemMB})
		}
		running := map[uint64][]api.NodeAlloc{}
		next := 0
		for step := range 150 {
			if len(running) > 0 && rng.IntN(3) == 0 {
				ids := make([]uint64, 0, len(running))
				for id := range running {
					ids = append(ids, id)
				}
				slices.Sort(ids)
				id := ids[rng.IntN(len(ids))]
				e.finish(id, int64(step))
				ctl.Release(running[id])
				delete(running, id)
			} else if next < len(jobs) {
				id := uint64(e.arrive(next).job.ID)
				next++
				st := sched.Start{JobID: id, Alloc: randomAlloc(rng, c)}
				simErr := e.start(&st, int64(step))
				applied, _ := ctl.Apply([]sched.Start{st}, nil)
				if (simErr == nil) != (len(applied) == 1) {
					t.Fatalf("seed %d step %d: the simulator says %v, the controller applied %d; plan %+v", seed, step, simErr, len(applied), st)
				}
				if simErr == nil {
					running[id] = st.Alloc
				} else {
					e.release(id)
				}
			}
			used := 0
			for i, n := range c.Nodes {
				var want sched.NodeInfo
				ctl.Node(n.Name).Fill(&want)
				got := e.nodes[i]
				view := func(x sched.NodeInfo) [5]any {
					return [5]any{x.FreeCPUs, x.FreeMemMB, slices.Clone(x.FreeGPUs), slices.Clone(x.Shared), x.Idle}
				}
				if diff := cmp.Diff(view(want), view(got), cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("seed %d step %d node %s (-controller +simulator):\n%s", seed, step, n.Name, diff)
				}
				used += ctl.Node(n.Name).GPUsInUse()
			}
			if used != e.usedGPUs {
				t.Fatalf("seed %d step %d: %d GPUs in use, the simulator counts %d", seed, step, used, e.usedGPUs)
			}
		}
	}
}

// randomAlloc is one node's share of a random start: CPUs, memory and
// whole GPUs or a compute slice, sometimes more than the node has.
func randomAlloc(rng *rand.Rand, c *Cluster) []api.NodeAlloc {
	n := c.Nodes[rng.IntN(len(c.Nodes))]
	a := api.NodeAlloc{Node: n.Name, CPUs: rng.IntN(n.CPUs/2 + 2), MemoryMB: int64(rng.IntN(int(n.MemoryMB/2) + 1000))}
	for range rng.IntN(3) {
		a.GPUs = append(a.GPUs, rng.IntN(n.GPUs))
	}
	if len(a.GPUs) > 0 && rng.IntN(2) == 0 {
		a.GPUs = a.GPUs[:1]
		a.GPUComputePct = 10 * (1 + rng.IntN(6))
	}
	return []api.NodeAlloc{a}
}
