package sched

import (
	"cmp"
	"slices"
	"sort"
)

// pass is the working state of one Schedule call: copies of the free
// resources, per-partition node lists computed once, and scratch buffers
// reused for every job so that a pass allocates per start, not per job.
type pass struct {
	cfg   Config
	chain chain

	nodes  []NodeState
	byName map[string]int
	// rank is each node's position in natural name order (gpu2 < gpu10),
	// the last tie-break of the node choice.
	rank []int32

	parts   []partState
	partIdx map[string]int
	// nodeParts lists, per node, the partitions that hold it.
	nodeParts [][]int32

	stamp uint32

	// Scratch reused for every job.
	req       Request
	cand      []int
	picked    []int
	hist      histogram
	view      NodeState
	emptyGPUs []int
}

// partState is a partition with its member nodes resolved once per pass.
type partState struct {
	info *PartitionInfo
	// members indexes pass.nodes, in config order, without duplicates or
	// names the snapshot lacks.
	members []int
	// unusable counts members that are not usable; reserved counts usable
	// members held for a higher-priority job. When the two add up to all
	// members, every later job of the partition is blocked.
	unusable, reserved int
}

// newPass copies the free resources of snap and resolves partitions.
func newPass(snap *Snapshot, cfg Config) *pass {
	p := &pass{
		cfg:     cfg,
		chain:   newChain(),
		nodes:   make([]NodeState, len(snap.Nodes)),
		byName:  make(map[string]int, len(snap.Nodes)),
		rank:    make([]int32, len(snap.Nodes)),
		partIdx: make(map[string]int, len(snap.Partitions)),
	}

	total, maxGPUs := 0, 0
	for i := range snap.Nodes {
		total += len(snap.Nodes[i].FreeGPUs)
		maxGPUs = max(maxGPUs, snap.Nodes[i].GPUs)
	}
	gpuBuf := make([]int, total)
	order := make([]int, len(snap.Nodes))
	for i := range snap.Nodes {
		info := &snap.Nodes[i]
		free := gpuBuf[:len(info.FreeGPUs):len(info.FreeGPUs)]
		gpuBuf = gpuBuf[len(info.FreeGPUs):]
		copy(free, info.FreeGPUs)
		if !slices.IsSorted(free) {
			slices.Sort(free)
		}
		free = slices.Clip(slices.Compact(free))
		p.nodes[i] = NodeState{
			Info:      info,
			Usable:    info.Usable,
			FreeCPUs:  info.FreeCPUs,
			FreeMemMB: info.FreeMemMB,
			FreeGPUs:  free,
			Idle:      info.Idle,
		}
		if _, dup := p.byName[info.Name]; !dup {
			p.byName[info.Name] = i
		}
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return compareNames(snap.Nodes[order[a]].Name, snap.Nodes[order[b]].Name) < 0
	})
	for r, i := range order {
		p.rank[i] = int32(r)
	}
	p.emptyGPUs = make([]int, maxGPUs)
	for i := range p.emptyGPUs {
		p.emptyGPUs[i] = i
	}

	names := make([]string, 0, len(snap.Partitions))
	for name, part := range snap.Partitions {
		if part != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	p.parts = make([]partState, len(names))
	p.nodeParts = make([][]int32, len(snap.Nodes))
	seen := make([]int, len(snap.Nodes)) // partition index + 1 that last saw the node
	for pi, name := range names {
		info := snap.Partitions[name]
		p.partIdx[name] = pi
		ps := partState{info: info, members: make([]int, 0, len(info.Nodes))}
		for _, nn := range info.Nodes {
			i, ok := p.byName[nn]
			if !ok || seen[i] == pi+1 {
				continue
			}
			seen[i] = pi + 1
			ps.members = append(ps.members, i)
			p.nodeParts[i] = append(p.nodeParts[i], int32(pi))
			if !p.nodes[i].Usable {
				ps.unusable++
			}
		}
		p.parts[pi] = ps
	}
	return p
}

// nextStamp starts a new job's marks on the nodes.
func (p *pass) nextStamp() uint32 {
	p.stamp++
	return p.stamp
}

// inPartition reports whether node i belongs to partition pi.
func (p *pass) inPartition(i, pi int) bool {
	for _, q := range p.nodeParts[i] {
		if int(q) == pi {
			return true
		}
	}
	return false
}

// emptyView fills the pass's scratch view with node i as it would be
// empty and up, for the feasibility diagnosis. The request's marks on the
// node are kept.
func (p *pass) emptyView(i int) *NodeState {
	n := &p.nodes[i]
	info := n.Info
	p.view = NodeState{
		Info:      info,
		Usable:    true,
		FreeCPUs:  info.CPUs,
		FreeMemMB: info.MemoryMB,
		FreeGPUs:  p.emptyGPUs[:min(max(info.GPUs, 0), len(p.emptyGPUs))],
		Idle:      true,
		excluded:  n.excluded,
		required:  n.required,
	}
	return &p.view
}

// betterFit orders nodes for best fit: fewest free GPUs first (so whole
// free nodes stay free for big jobs), then fewest free CPUs, then name.
func (p *pass) betterFit(a, b int) int {
	na, nb := &p.nodes[a], &p.nodes[b]
	if c := cmp.Compare(len(na.FreeGPUs), len(nb.FreeGPUs)); c != 0 {
		return c
	}
	if c := cmp.Compare(na.FreeCPUs, nb.FreeCPUs); c != 0 {
		return c
	}
	return cmp.Compare(p.rank[a], p.rank[b])
}

// compareNames orders host names naturally: runs of digits compare by
// value, so gpu2 sorts before gpu10 as Slurm's hostlists do.
func compareNames(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			da, db := trimZeros(a[si:i]), trimZeros(b[sj:j])
			if c := cmp.Compare(len(da), len(db)); c != 0 {
				return c
			}
			if c := cmp.Compare(da, db); c != 0 {
				return c
			}
			continue
		}
		if ca != cb {
			return cmp.Compare(ca, cb)
		}
		i++
		j++
	}
	if c := cmp.Compare(len(a)-i, len(b)-j); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
