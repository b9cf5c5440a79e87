package ctld

import (
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/topology"
)

// linkMatrix builds a node's in-node GPU link matrix from the links its
// inventory reports, for the scheduler's GPU choice. It is nil when the
// node reports no links (the scheduler then takes GPUs in index order)
// or when they do not form a consistent matrix.
func linkMatrix(gpus []gres.Device) *topology.Matrix {
	var links []topology.GPULink
	for _, d := range gpus {
		for _, l := range d.Links {
			if l.Peer > d.Index { // each pair once
				links = append(links, topology.GPULink{From: d.Index, To: l.Peer, NVLinks: l.NVLinks, PCIePath: l.PCIePath})
			}
		}
	}
	if len(links) == 0 {
		return nil
	}
	m, err := topology.NewMatrix(len(gpus), links)
	if err != nil {
		return nil
	}
	return m
}
