// Package topotest provides canned GPU machines and switch trees for tests
// of topology-aware placement, in the manner of go-gpuallocator's
// NewDGX1VoltaNode: each is built through the public constructors, so a
// canned value is always one that NewMatrix or Build accepts. The
// machines mirror gres.Fake's topologies (dgx, islands, pcie), so a test
// can pair a fake inventory with the matching matrix.
//
// Everything here panics on bad arguments: canned data is fixed at the
// call site, and a panic points straight at the broken test.
package topotest

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/topology"
)

// Link counts of the canned machines, as on the hardware they imitate.
const (
	// DGXNVLinks: an H100 SXM5 has 18 NVLinks into the NVSwitch fabric,
	// so every pair of a DGX H100 reaches each other over all 18.
	DGXNVLinks = 18
	// IslandNVLinks: on a 4-GPU HGX board each GPU splits its 18 links
	// over its 3 peers.
	IslandNVLinks = 6
)

// Machine is a canned node: the link descriptions it was built from, the
// NUMA node of each GPU and the built Matrix (which carries both).
type Machine struct {
	Name   string
	Links  []topology.GPULink
	NUMA   []int
	Matrix *topology.Matrix
}

// DGXH100 is 8 GPUs in one NVSwitch domain: every pair has DGXNVLinks
// NVLinks. GPUs 0-3 sit on NUMA node 0, 4-7 on node 1.
func DGXH100() Machine {
	return machine("dgx-h100", 8, func(i, j int) topology.GPULink {
		return topology.GPULink{From: i, To: j, NVLinks: DGXNVLinks}
	})
}

// TwoIslands is 8 GPUs as two 4-GPU NVLink islands (0-3 on NUMA node 0,
// 4-7 on node 1) with IslandNVLinks per pair inside an island and only
// PCIe across the sockets (SYS) between them.
func TwoIslands() Machine {
	return machine("two-islands", 8, func(i, j int) topology.GPULink {
		if i/4 == j/4 {
			return topology.GPULink{From: i, To: j, NVLinks: IslandNVLinks}
		}
		return topology.GPULink{From: i, To: j, PCIePath: topology.PathSYS}
	})
}

// PCIeOnly is n GPUs without NVLink: the first half (rounded up) on NUMA
// node 0, the rest on node 1; GPUs 2k and 2k+1 of one NUMA node share a
// PCIe switch (PIX), other pairs of one NUMA node meet at NODE, and pairs
// across the halves at SYS.
func PCIeOnly(n int) Machine {
	if n < 1 {
		panic(fmt.Sprintf("topotest: PCIeOnly(%d): want at least one GPU", n))
	}
	return machine("pcie-"+strconv.Itoa(n), n, func(i, j int) topology.GPULink {
		l := topology.GPULink{From: i, To: j, PCIePath: topology.PathSYS}
		switch sameNUMA := numa(i, n) == numa(j, n); {
		case sameNUMA && i/2 == j/2:
			l.PCIePath = topology.PathPIX
		case sameNUMA:
			l.PCIePath = topology.PathNODE
		}
		return l
	})
}

// numa puts the first half of n GPUs (rounded up) on node 0, as gres.Fake.
func numa(i, n int) int {
	if i < (n+1)/2 {
		return 0
	}
	return 1
}

func machine(name string, n int, link func(i, j int) topology.GPULink) Machine {
	m := Machine{Name: name, NUMA: make([]int, n)}
	for i := 0; i < n; i++ {
		m.NUMA[i] = numa(i, n)
		for j := i + 1; j < n; j++ {
			m.Links = append(m.Links, link(i, j))
		}
	}
	mx, err := topology.NewMatrix(n, m.Links)
	if err == nil {
		mx, err = mx.WithNUMA(m.NUMA)
	}
	if err != nil {
		panic(fmt.Sprintf("topotest: %s: %v", name, err))
	}
	m.Matrix = mx
	return m
}

// Fabric is a canned switch tree: the switch configs as a config file
// would hold them, every node name in order, and the built Tree.
type Fabric struct {
	Switches []topology.SwitchConfig
	Nodes    []string
	Tree     *topology.Tree
}

// Known returns the fabric's nodes as the known-node set Build wants.
func (f Fabric) Known() map[string]bool {
	k := make(map[string]bool, len(f.Nodes))
	for _, n := range f.Nodes {
		k[n] = true
	}
	return k
}

// FatTree is a two-level tree: leaf switches s1..s<leaves>, each with
// nodesPerLeaf nodes, under one switch "spine". Nodes are prefix plus a
// number from 1, zero-padded to at least two digits, so FatTree(2, 2,
// "gpu") is the local cluster: s1 = gpu[01-02], s2 = gpu[03-04].
func FatTree(leaves, nodesPerLeaf int, prefix string) Fabric {
	if leaves < 1 || nodesPerLeaf < 1 {
		panic(fmt.Sprintf("topotest: FatTree(%d, %d): want positive sizes", leaves, nodesPerLeaf))
	}
	nodes := nodeNames(prefix, leaves*nodesPerLeaf)
	var cfg []topology.SwitchConfig
	var leafNames []string
	for l := 0; l < leaves; l++ {
		name := "s" + strconv.Itoa(l+1)
		leafNames = append(leafNames, name)
		cfg = append(cfg, topology.SwitchConfig{Name: name, Nodes: hostlist.Compress(nodes[l*nodesPerLeaf : (l+1)*nodesPerLeaf])})
	}
	cfg = append(cfg, topology.SwitchConfig{Name: "spine", Switches: hostlist.Compress(leafNames)})
	return fabric(cfg, nodes)
}

// ThreeLevel is a three-level tree: one "core" switch over aggregation
// switches agg1..agg<aggs>, each over leavesPerAgg leaf switches
// (numbered s1, s2, … across the whole tree), each with nodesPerLeaf
// nodes named as in FatTree. ThreeLevel(4, 8, 16, "gpu") is the 512-node
// benchmark cluster.
func ThreeLevel(aggs, leavesPerAgg, nodesPerLeaf int, prefix string) Fabric {
	if aggs < 1 || leavesPerAgg < 1 || nodesPerLeaf < 1 {
		panic(fmt.Sprintf("topotest: ThreeLevel(%d, %d, %d): want positive sizes", aggs, leavesPerAgg, nodesPerLeaf))
	}
	nodes := nodeNames(prefix, aggs*leavesPerAgg*nodesPerLeaf)
	var cfg []topology.SwitchConfig
	var aggNames []string
	leaf := 0
	for a := 0; a < aggs; a++ {
		var leafNames []string
		for l := 0; l < leavesPerAgg; l++ {
			name := "s" + strconv.Itoa(leaf+1)
			leafNames = append(leafNames, name)
			cfg = append(cfg, topology.SwitchConfig{Name: name, Nodes: hostlist.Compress(nodes[leaf*nodesPerLeaf : (leaf+1)*nodesPerLeaf])})
			leaf++
		}
		name := "agg" + strconv.Itoa(a+1)
		aggNames = append(aggNames, name)
		cfg = append(cfg, topology.SwitchConfig{Name: name, Switches: hostlist.Compress(leafNames)})
	}
	cfg = append(cfg, topology.SwitchConfig{Name: "core", Switches: hostlist.Compress(aggNames)})
	return fabric(cfg, nodes)
}

// nodeNames returns prefix01.. (or wider when count needs more digits).
func nodeNames(prefix string, count int) []string {
	width := len(strconv.Itoa(count))
	if width < 2 {
		width = 2
	}
	out := make([]string, count)
	for i := range out {
		out[i] = fmt.Sprintf("%s%0*d", prefix, width, i+1)
	}
	return out
}

func fabric(cfg []topology.SwitchConfig, nodes []string) Fabric {
	f := Fabric{Switches: cfg, Nodes: nodes}
	tree, err := topology.Build(cfg, f.Known())
	if err != nil {
		panic(fmt.Sprintf("topotest: %v", err))
	}
	if got := tree.Nodes(); !sort.StringsAreSorted(nodes) || len(got) != len(nodes) {
		panic(fmt.Sprintf("topotest: tree holds %d nodes, want %d", len(got), len(nodes)))
	}
	f.Tree = tree
	return f
}
