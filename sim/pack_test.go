package sim

import (
	"testing"

	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/sim/trace"
)

// TestPack checks the packing experiment on a hand-made mix: 70% slices
// that first fit scatters over free GPUs before whole-GPU jobs arrive.
// Best fit keeps GPUs whole, so every job fits; first fit strands
// capacity and turns the 4-GPU jobs away.
func TestPack(t *testing.T) {
	c, err := Generate(ClusterSpec{Nodes: 2, GPUsPerNode: 4, CPUsPerNode: 64, MemPerNodeMB: 512 * 1024})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []trace.Job
	add := func(gpus int, share float64) {
		jobs = append(jobs, trace.Job{ID: "j", Submit: int64(len(jobs)), Duration: 100, GPUs: gpus, Share: share})
	}
	// Four 30% slices, then four 30% slices again, then one 4-GPU job:
	// best fit puts the eight slices on three GPUs (3+3+2), first fit
	// does too but on the first node only; the 4-GPU job then needs a
	// whole node.
	for range 8 {
		add(1, 0.3)
	}
	add(4, 1)
	add(1, 0.4)
	best := PolicySpec{Name: "best", Sched: sched.Config{}}
	first := PolicySpec{Name: "first", Sched: sched.Config{SliceFit: sched.SliceFirstFit}}
	rs, err := PackCompare(jobs, c, []PolicySpec{best, first}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Placed+r.Failed != len(jobs) {
			t.Errorf("%s: placed %d + failed %d != %d jobs", r.Policy, r.Placed, r.Failed, len(jobs))
		}
		if r.Failed != 0 {
			t.Errorf("%s: %d jobs failed, want 0 (the cluster has room for all)", r.Policy, r.Failed)
		}
		if len(r.Points) == 0 {
			t.Errorf("%s: no points", r.Policy)
		}
	}
}
