package topology_test

import (
	"testing"

	"github.com/tide-hpc/tide/topology"
	"github.com/tide-hpc/tide/topology/topotest"
)

func TestNodeAddr(t *testing.T) {
	// An unbalanced tree: leaf s3 hangs straight under the core, so its
	// nodes skip the aggregation level (an empty component, as Slurm
	// prints it).
	unbalanced, err := topology.Build([]topology.SwitchConfig{
		{Name: "s1", Nodes: "n[1-2]"},
		{Name: "s2", Nodes: "n[3-4]"},
		{Name: "s3", Nodes: "n5"},
		{Name: "agg", Switches: "s[1-2]"},
		{Name: "core", Switches: "agg,s3"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		tree        *topology.Tree
		node        string
		addr, pattn string
	}{
		{name: "no topology", tree: nil, node: "gpu01", addr: "gpu01", pattn: "node"},
		{name: "two levels", tree: topotest.FatTree(2, 2, "gpu").Tree, node: "gpu03", addr: "spine.s2.gpu03", pattn: "switch.switch.node"},
		{name: "three levels", tree: topotest.ThreeLevel(2, 2, 2, "gpu").Tree, node: "gpu08", addr: "core.agg2.s4.gpu08", pattn: "switch.switch.switch.node"},
		{name: "balanced part of an unbalanced tree", tree: unbalanced, node: "n3", addr: "core.agg.s2.n3", pattn: "switch.switch.switch.node"},
		{name: "skipped level", tree: unbalanced, node: "n5", addr: "core..s3.n5", pattn: "switch.switch.switch.node"},
		{name: "node outside the tree", tree: unbalanced, node: "n9", addr: "n9", pattn: "node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, pattn := tt.tree.NodeAddr(tt.node)
			if addr != tt.addr || pattn != tt.pattn {
				t.Errorf("NodeAddr(%q) = %q, %q; want %q, %q", tt.node, addr, pattn, tt.addr, tt.pattn)
			}
		})
	}
}
