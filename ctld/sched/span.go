package sched

import (
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// Spanning: Slurm reads --gpus=16 and -n64 without -N as totals, and
// gives the job as many nodes as it needs (min_nodes 1, no maximum; or
// within -N min-max):
// on 8-GPU nodes --gpus=16 runs on two nodes with 8 GPUs each. Tide's
// slots are fixed per node, so the pass resolves such a request to the
// fewest nodes whose even split (fillSlots) fits a node of the
// partition at full capacity: --gpus=12 on 8-GPU nodes is two nodes of
// 6. It does not grow the count when the cluster is busy (two nodes
// with 2 free GPUs do not take --gpus=4): the job waits for the fewest
// nodes, as a -N job does.

// nodeShape is one distinct node capacity of a partition.
type nodeShape struct {
	cpus  int
	gpus  int
	mem   int64
	model string
}

// shapes lists the distinct capacities of partition pi's members,
// built on first use (most passes have no job that spans).
func (p *pass) shapes(pi int) []nodeShape {
	ps := &p.parts[pi]
	if ps.shapesDone {
		return ps.shapes
	}
	ps.shapesDone = true
	seen := map[nodeShape]bool{}
	for _, i := range ps.members {
		info := p.nodes[i].Info
		sh := nodeShape{cpus: info.CPUs, gpus: info.GPUs, mem: info.MemoryMB, model: info.GPUModel}
		if !seen[sh] {
			seen[sh] = true
			ps.shapes = append(ps.shapes, sh)
		}
	}
	return ps.shapes
}

// spanCount is the node count of a request without -N or with a -N
// min-max range: 1 (the minimum), or for one that spans (spansNodes)
// the fewest nodes from the minimum up to the range's maximum and the
// partition's MaxNodes whose largest slot fits a member of partition pi
// with GPUs of gpuType ("" = any). A request no count makes fit gets
// the minimum, so that the pass diagnoses it as ever.
func (p *pass) spanCount(s *api.JobSpec, pi int, gpuType string) int {
	if !spansNodes(s) {
		return 1
	}
	ps := &p.parts[pi]
	from := max(s.Nodes, 1)
	limit := min(len(ps.members), max(s.Tasks, s.GPUs, from))
	if s.MaxNodes > s.Nodes {
		limit = min(limit, s.MaxNodes) // -N min-max
	}
	if ps.info.MaxNodes > 0 {
		// Slurm caps the job's node count at the partition's MaxNodes:
		// a total that needs more never runs there.
		limit = min(limit, ps.info.MaxNodes)
	}
	shapes := p.shapes(pi)
	for n := from; n <= limit; n++ {
		slot := largestSlot(s, n, p.cfg.DefMemPerCPUMB)
		for _, sh := range shapes {
			if slotFitsShape(&slot, &sh, gpuType) {
				return n
			}
		}
	}
	return from
}

// slotFitsShape reports whether slot fits an empty node of shape sh
// whose GPUs must be of gpuType ("" = any) when the slot has GPUs.
func slotFitsShape(slot *Slot, sh *nodeShape, gpuType string) bool {
	if slot.CPUs > sh.cpus || slot.GPUs > sh.gpus || !slot.WholeMem && slot.MemMB > sh.mem {
		return false
	}
	if slot.Tasks > slot.CPUs && slot.Tasks > api.MaxTasksPerNode(sh.cpus) {
		return false // --overcommit past MaxTasksPerNode: more nodes
	}
	return slot.GPUs == 0 || gpuType == "" || strings.EqualFold(gpuType, sh.model)
}
