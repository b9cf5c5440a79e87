package topotest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/topology"
)

func TestMachines(t *testing.T) {
	tests := []struct {
		name      string
		m         Machine
		wantN     int
		wantLinks int
		wantNUMA  []int
		islands   int
		pairs     map[[2]int]string // spot checks, as nvidia-smi prints them
	}{
		{name: "DGX H100", m: DGXH100(), wantN: 8, wantLinks: 28, wantNUMA: []int{0, 0, 0, 0, 1, 1, 1, 1}, islands: 1,
			pairs: map[[2]int]string{{0, 1}: "NV18", {3, 4}: "NV18", {7, 0}: "NV18"}},
		{name: "two islands", m: TwoIslands(), wantN: 8, wantLinks: 28, wantNUMA: []int{0, 0, 0, 0, 1, 1, 1, 1}, islands: 2,
			pairs: map[[2]int]string{{0, 3}: "NV6", {4, 7}: "NV6", {3, 4}: "SYS", {0, 7}: "SYS"}},
		{name: "PCIe 8", m: PCIeOnly(8), wantN: 8, wantLinks: 28, wantNUMA: []int{0, 0, 0, 0, 1, 1, 1, 1}, islands: 8,
			pairs: map[[2]int]string{{0, 1}: "PIX", {6, 7}: "PIX", {1, 2}: "NODE", {0, 3}: "NODE", {3, 4}: "SYS"}},
		{name: "PCIe odd count", m: PCIeOnly(3), wantN: 3, wantLinks: 3, wantNUMA: []int{0, 0, 1}, islands: 3,
			pairs: map[[2]int]string{{0, 1}: "PIX", {1, 2}: "SYS"}},
		{name: "PCIe single GPU", m: PCIeOnly(1), wantN: 1, wantLinks: 0, wantNUMA: []int{0}, islands: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Matrix.N(); got != tt.wantN {
				t.Errorf("N = %d, want %d", got, tt.wantN)
			}
			if len(tt.m.Links) != tt.wantLinks {
				t.Errorf("%d links, want %d (every pair once)", len(tt.m.Links), tt.wantLinks)
			}
			if diff := cmp.Diff(tt.wantNUMA, tt.m.NUMA); diff != "" {
				t.Errorf("NUMA (-want +got):\n%s", diff)
			}
			for i, want := range tt.wantNUMA {
				if got := tt.m.Matrix.NUMA(i); got != want {
					t.Errorf("Matrix.NUMA(%d) = %d, want %d (the matrix carries the machine's NUMA nodes)", i, got, want)
				}
			}
			if got := len(tt.m.Matrix.Islands()); got != tt.islands {
				t.Errorf("%d islands, want %d", got, tt.islands)
			}
			for p, want := range tt.pairs {
				got := tt.m.Matrix.PCIePath(p[0], p[1])
				if nv := tt.m.Matrix.NVLinks(p[0], p[1]); nv > 0 {
					got = "NV" + strconv.Itoa(nv)
				}
				if got != want {
					t.Errorf("GPU%d-GPU%d = %s, want %s\n%s", p[0], p[1], got, want, tt.m.Matrix)
				}
			}
		})
	}
}

func TestFatTreeIsTheLocalCluster(t *testing.T) {
	f := FatTree(2, 2, "gpu")
	want := []topology.SwitchConfig{
		{Name: "s1", Nodes: "gpu[01-02]"},
		{Name: "s2", Nodes: "gpu[03-04]"},
		{Name: "spine", Switches: "s[1-2]"},
	}
	if diff := cmp.Diff(want, f.Switches); diff != "" {
		t.Errorf("switches (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"gpu01", "gpu02", "gpu03", "gpu04"}, f.Nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}

func TestFabrics(t *testing.T) {
	tests := []struct {
		name      string
		f         Fabric
		nodes     int
		leaves    int
		rootLevel int
		first     string
		last      string
		hops      map[[2]string]int
	}{
		{name: "fat tree 4x16", f: FatTree(4, 16, "gpu"), nodes: 64, leaves: 4, rootLevel: 1, first: "gpu01", last: "gpu64",
			hops: map[[2]string]int{{"gpu01", "gpu16"}: 1, {"gpu16", "gpu17"}: 2, {"gpu01", "gpu64"}: 2}},
		{name: "fat tree one leaf", f: FatTree(1, 3, "n"), nodes: 3, leaves: 1, rootLevel: 1, first: "n01", last: "n03",
			hops: map[[2]string]int{{"n01", "n03"}: 1}},
		{name: "three-level benchmark cluster", f: ThreeLevel(4, 8, 16, "gpu"), nodes: 512, leaves: 32, rootLevel: 2, first: "gpu001", last: "gpu512",
			hops: map[[2]string]int{
				{"gpu001", "gpu016"}: 1, // s1
				{"gpu016", "gpu017"}: 2, // s1, s2 under agg1
				{"gpu128", "gpu129"}: 4, // agg1 | agg2
				{"gpu001", "gpu512"}: 4,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree := tt.f.Tree
			if len(tt.f.Nodes) != tt.nodes || len(tree.Nodes()) != tt.nodes {
				t.Errorf("nodes = %d listed, %d in tree, want %d", len(tt.f.Nodes), len(tree.Nodes()), tt.nodes)
			}
			if tt.f.Nodes[0] != tt.first || tt.f.Nodes[len(tt.f.Nodes)-1] != tt.last {
				t.Errorf("nodes run %s..%s, want %s..%s", tt.f.Nodes[0], tt.f.Nodes[len(tt.f.Nodes)-1], tt.first, tt.last)
			}
			if got := len(tree.Leaves()); got != tt.leaves {
				t.Errorf("%d leaves, want %d", got, tt.leaves)
			}
			roots := tree.Roots()
			if len(roots) != 1 || tree.Level(roots[0]) != tt.rootLevel {
				t.Fatalf("roots %v at level %d, want one root at level %d", roots, tree.Level(roots[0]), tt.rootLevel)
			}
			for p, want := range tt.hops {
				if got := tree.HopDistance(p[0], p[1]); got != want {
					t.Errorf("HopDistance(%s, %s) = %d, want %d", p[0], p[1], got, want)
				}
			}
			// The configs survive topology.conf and back.
			cfg, err := topology.ParseSlurmConf(strings.NewReader(topology.FormatSlurmConf(tt.f.Switches)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.f.Switches, cfg); diff != "" {
				t.Errorf("topology.conf round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBadSizesPanic(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{name: "PCIeOnly(0)", f: func() { PCIeOnly(0) }},
		{name: "FatTree no leaves", f: func() { FatTree(0, 4, "n") }},
		{name: "FatTree no nodes", f: func() { FatTree(2, 0, "n") }},
		{name: "ThreeLevel no aggs", f: func() { ThreeLevel(0, 2, 2, "n") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tt.f()
		})
	}
}
