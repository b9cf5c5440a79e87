package ctld

import (
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/topology"
)

// linkMatrix builds a node's in-node GPU matrix from its inventory, for
// the scheduler's GPU choice: the links the GPUs report and, when every
// GPU knows its NUMA node, those nodes (so that a job's GPUs stay on one
// socket and its allocation names the NUMA nodes to bind CPUs to). An
// inventory without links still gets a link-less matrix when its GPUs
// sit on two or more NUMA nodes. It is nil when there is nothing to go
// on (the scheduler then takes GPUs in index order) or when the links do
// not form a consistent matrix.
func linkMatrix(gpus []gres.Device) *topology.Matrix {
	var links []topology.GPULink
	numa := make([]int, len(gpus))
	known, distinct := true, map[int]bool{}
	for i, d := range gpus {
		for _, l := range d.Links {
			if l.Peer > d.Index { // each pair once
				links = append(links, topology.GPULink{From: d.Index, To: l.Peer, NVLinks: l.NVLinks, PCIePath: l.PCIePath})
			}
		}
		if d.Index != i || d.NUMANode < 0 {
			known = false
			continue
		}
		numa[i] = d.NUMANode
		distinct[d.NUMANode] = true
	}
	if len(links) == 0 && !(known && len(distinct) > 1) {
		return nil
	}
	m, err := topology.NewMatrix(len(gpus), links)
	if err != nil {
		return nil
	}
	if known {
		if withNUMA, err := m.WithNUMA(numa); err == nil {
			m = withNUMA
		}
	}
	return m
}
