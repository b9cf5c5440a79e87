package topology_test

import (
	"testing"

	"github.com/tide-hpc/tide/topology"
	"github.com/tide-hpc/tide/topology/topotest"
)

// TestQueriesDoNotAllocate pins that the placement-path queries only read
// the maps Build made: the scheduler calls them per node pair per job.
func TestQueriesDoNotAllocate(t *testing.T) {
	f := topotest.ThreeLevel(4, 8, 16, "gpu")
	m := topotest.TwoIslands().Matrix
	set := []int{0, 1, 2, 4}
	tests := []struct {
		name string
		f    func()
	}{
		{name: "HopDistance", f: func() { f.Tree.HopDistance("gpu001", "gpu500") }},
		{name: "CommonSwitch", f: func() { f.Tree.CommonSwitch("gpu017", "gpu030") }},
		{name: "Ancestors", f: func() { f.Tree.Ancestors("gpu300") }},
		{name: "NodesUnder", f: func() { f.Tree.NodesUnder("agg2") }},
		{name: "SetScore", f: func() { m.SetScore(set) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, tt.f); n != 0 {
				t.Errorf("%s allocates %.0f times per call", tt.name, n)
			}
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	f := topotest.ThreeLevel(4, 8, 16, "gpu")
	known := f.Known()
	for b.Loop() {
		if _, err := topology.Build(f.Switches, known); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHopDistance(b *testing.B) {
	f := topotest.ThreeLevel(4, 8, 16, "gpu")
	if d := f.Tree.HopDistance("gpu001", "gpu512"); d != 4 {
		b.Fatalf("HopDistance = %d, want 4", d)
	}
	nodes := f.Nodes
	i := 0
	for b.Loop() {
		f.Tree.HopDistance(nodes[i%len(nodes)], nodes[(i*7+3)%len(nodes)])
		i++
	}
}

func BenchmarkSetScore(b *testing.B) {
	for _, tc := range []struct {
		name string
		m    *topology.Matrix
		set  []int
	}{
		{name: "gpus=8", m: topotest.DGXH100().Matrix, set: []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{name: "gpus=16", m: topotest.PCIeOnly(16).Matrix, set: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.m.SetScore(tc.set) <= 0 {
				b.Fatal("zero score")
			}
			for b.Loop() {
				tc.m.SetScore(tc.set)
			}
		})
	}
}
