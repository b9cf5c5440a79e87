package sched

// holes guards whole-node-shaped holes (issue 4, packing): a job smaller
// than a node does not take the last fully free node under a leaf switch
// while a partly used node can hold it, so that every leaf keeps a whole
// node for an 8-GPU job as long as possible. The choice applies it after
// best fit (choose, firstFit): it is a veto on one node, not an order
// key, because "free node vs. partly used node" must not reorder free
// nodes among themselves (single-node jobs still prefer a partly used
// leaf's last free node to breaking into an untouched leaf).
// Best fit alone does not ensure it: on mixed nodes a free 4-GPU node
// has fewer free GPUs than a half-used 8-GPU node, and a node used only
// by memory ties with a free one on GPUs and CPUs.
//
// Nodes are grouped by leaf switch; nodes outside the tree share one
// group, and without a tree the whole cluster is one group. The counts
// follow the pass as it places jobs.
type holes struct {
	group []int32 // per node
	idle  []int32 // per group: usable nodes with nothing on them
}

// newHoles counts the idle usable nodes of each group.
func newHoles(nodes []NodeState, t *topoIndex) holes {
	groups := 1
	if t != nil {
		groups = len(t.names) + 1
	}
	h := holes{group: make([]int32, len(nodes)), idle: make([]int32, groups)}
	for i := range nodes {
		g := int32(0)
		if t != nil {
			g = int32(len(t.names)) // outside the tree
			if l := t.leafOf(i); l >= 0 {
				g = int32(l)
			}
		}
		h.group[i] = g
		if nodes[i].Usable && nodes[i].Idle {
			h.idle[g]++
		}
	}
	return h
}

// used records that node i, idle until now, received a job.
func (h *holes) used(i int) {
	if g := h.group[i]; h.idle[g] > 0 {
		h.idle[g]--
	}
}

// lastHole reports whether node i is the last idle usable node of its
// group.
func (h *holes) lastHole(n *NodeState, i int) bool {
	return n.Usable && n.Idle && h.idle[h.group[i]] == 1
}

// protects reports whether the current job must leave node i for last:
// the pass packs (spread wants empty nodes), i is the last hole of its
// group, and the job's largest slot does not take the whole node anyway.
// First-fit slices and SliceFGD (whose measure weighs whole nodes by
// the workload's need for them) go without it.
func (p *pass) protects(i int) bool {
	n := &p.nodes[i]
	r := &p.req
	if !p.holes.lastHole(n, i) || p.spread() || r.Exclusive || len(r.Slots) == 0 ||
		(r.Sliced && p.cfg.SliceFit == SliceFirstFit) || p.cfg.SliceFit == SliceFGD && p.fgdActive() {
		return false
	}
	return !wholeShaped(&r.Slots[0], n.Info)
}

// wholeShaped reports whether slot s fills node info on its own: all its
// GPUs, all its memory, or (on a node without GPUs) all its CPUs.
func wholeShaped(s *Slot, info *NodeInfo) bool {
	switch {
	case s.WholeMem:
		return true
	case info.GPUs > 0:
		return !s.Sliced() && s.GPUs >= info.GPUs
	}
	return s.CPUs >= info.CPUs
}
