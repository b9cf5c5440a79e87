package sched

import (
	"cmp"
	"slices"

	"github.com/tide-hpc/tide/ctld/api"
)

// pass is the working state of one Schedule call: copies of the free
// resources, per-partition node lists computed once, and scratch buffers
// reused for every job so that a pass allocates per start, not per job.
type pass struct {
	cfg   Config
	chain chain
	// feasJob is the job a Feasibility check resolves (feasible).
	feasJob api.Job
	// classFails holds, per class of the order (tail.go), the failure
	// that decided its last job.
	classFails []classFail
	// tailHits counts the jobs decided by their class (for tests).
	tailHits int

	nodes  []NodeState
	byName map[string]int
	// rank is each node's position in natural name order (gpu2 < gpu10),
	// the last tie-break of the node choice.
	rank []int32

	parts   []partState
	partIdx map[string]int
	// nodeParts[nodePartAt[i]:nodePartAt[i+1]] lists the partitions that
	// hold node i (one flat slice: no allocation per node).
	nodeParts  []int32
	nodePartAt []int32

	stamp uint32
	// anyReserved is set once priority blocking holds a node.
	anyReserved bool

	// topo is the snapshot's switch tree by index (nil without a tree).
	topo *topoIndex
	// holes counts the fully free nodes per leaf (holes.go).
	holes holes
	// gpus chooses GPU sets on nodes with a link matrix.
	gpus gpuPicker
	// fgd measures the workload's fragmentation (fgd.go).
	fgd fgdState

	// The current job's placement, for its Why: sw is the switch that
	// holds its nodes (-1: none chosen); linkScore, linkIdeal and
	// linkNodes sum the GPU sets' link scores over the nodes with a
	// matrix; gpuWhy describes the last GPU set taken.
	sw int
	// topoWait marks a job held back by its --switches limit.
	topoWait             bool
	linkScore, linkIdeal int
	linkNodes            int
	gpuWhy               string
	// numaNodes is the most NUMA nodes one node's GPU set spans (0: no
	// NUMA data).
	numaNodes int

	// sh is the sharing state (nil without queues and classes); ov the
	// overlay preemption places on; borrowing how many GPUs the current
	// job's queue would borrow.
	sh        *share
	ov        overlay
	borrowing int
	// fmtBuf and moreBuf back the Decision.More lines (decided).
	fmtBuf  []byte
	moreBuf []string

	// probe marks a multi-partition job's first try in each of its
	// partitions (partlist.go): a start counts, a failure has no effect
	// on the pass (no holds, reservations or preemption).
	probe bool

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
	// shapes are the members' distinct capacities, for jobs that span
	// nodes (span.go); built on first use.
	shapes     []nodeShape
	shapesDone bool
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
		fgd:     fgdState{snap: snap},
	}

	total, maxGPUs, shared := 0, 0, 0
	for i := range snap.Nodes {
		total += len(snap.Nodes[i].FreeGPUs)
		shared += len(snap.Nodes[i].Shared)
		maxGPUs = max(maxGPUs, snap.Nodes[i].GPUs)
	}
	gpuBuf := make([]int, total)
	var sharedBuf []SharedGPU
	if shared > 0 {
		sharedBuf = make([]SharedGPU, shared)
	}
	for i := range snap.Nodes {
		info := &snap.Nodes[i]
		free := gpuBuf[:len(info.FreeGPUs):len(info.FreeGPUs)]
		gpuBuf = gpuBuf[len(info.FreeGPUs):]
		copy(free, info.FreeGPUs)
		if !slices.IsSorted(free) {
			slices.Sort(free)
		}
		free = slices.Clip(slices.Compact(free))
		// Each node's shared list is capped, so that slices placed in
		// the pass append to a new array instead of the next node's.
		sh := sharedBuf[:len(info.Shared):len(info.Shared)]
		sharedBuf = sharedBuf[len(info.Shared):]
		copy(sh, info.Shared)
		if len(sh) > 0 {
			// A shared GPU is never free too.
			free = slices.DeleteFunc(free, func(g int) bool {
				return slices.ContainsFunc(sh, func(x SharedGPU) bool { return x.Index == g })
			})
		}
		p.nodes[i] = NodeState{
			Info:      info,
			Usable:    info.Usable,
			FreeCPUs:  info.FreeCPUs,
			FreeMemMB: info.FreeMemMB,
			FreeGPUs:  free,
			Shared:    sh,
			Idle:      info.Idle,
		}
		if _, dup := p.byName[info.Name]; !dup {
			p.byName[info.Name] = i
		}
	}
	p.rankNodes(snap.Nodes)
	p.topo = newTopoIndex(snap.Tree, p.nodes)
	p.holes = newHoles(p.nodes, p.topo)
	p.emptyGPUs = make([]int, maxGPUs)
	for i := range p.emptyGPUs {
		p.emptyGPUs[i] = i
	}
	p.resolvePartitions(snap)
	return p
}

// rankNodes sets each node's rank in natural name order. Controllers
// list nodes in config order, which is usually that order already, so
// the sort is skipped when it would change nothing.
func (p *pass) rankNodes(nodes []NodeInfo) {
	sorted := true
	for i := 1; i < len(nodes) && sorted; i++ {
		sorted = compareNames(nodes[i-1].Name, nodes[i].Name) <= 0
	}
	if sorted {
		for i := range p.rank {
			p.rank[i] = int32(i)
		}
		return
	}
	order := make([]int32, len(nodes))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := compareNames(nodes[a].Name, nodes[b].Name); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for r, i := range order {
		p.rank[i] = int32(r)
	}
}

// resolvePartitions orders the partitions by name, resolves their member
// names to node indices once (dropping duplicates and unknown names) and
// builds the node-to-partitions index.
func (p *pass) resolvePartitions(snap *Snapshot) {
	names := make([]string, 0, len(snap.Partitions))
	for name, part := range snap.Partitions {
		if part != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	p.parts = make([]partState, len(names))
	seen := make([]int32, len(snap.Nodes)) // partition index + 1 that last listed the node
	counts := make([]int32, len(snap.Nodes)+1)
	for pi, name := range names {
		info := snap.Partitions[name]
		p.partIdx[name] = pi
		ps := partState{info: info, members: make([]int, 0, len(info.Nodes))}
		for _, nn := range info.Nodes {
			i, ok := p.byName[nn]
			if !ok || seen[i] == int32(pi+1) {
				continue
			}
			seen[i] = int32(pi + 1)
			ps.members = append(ps.members, i)
			counts[i+1]++
			if !p.nodes[i].Usable {
				ps.unusable++
			}
		}
		p.parts[pi] = ps
	}
	for i := 1; i < len(counts); i++ {
		counts[i] += counts[i-1]
	}
	p.nodePartAt = counts
	p.nodeParts = make([]int32, counts[len(counts)-1])
	fill := slices.Clone(counts[:len(counts)-1])
	for pi := range p.parts {
		for _, i := range p.parts[pi].members {
			p.nodeParts[fill[i]] = int32(pi)
			fill[i]++
		}
	}
}

// partsOf lists the partitions that hold node i.
func (p *pass) partsOf(i int) []int32 {
	return p.nodeParts[p.nodePartAt[i]:p.nodePartAt[i+1]]
}

// nextStamp starts a new job's marks on the nodes.
func (p *pass) nextStamp() uint32 {
	p.stamp++
	return p.stamp
}

// inPartition reports whether node i belongs to partition pi.
func (p *pass) inPartition(i, pi int) bool {
	for _, q := range p.partsOf(i) {
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

// betterFit orders nodes for best fit: nodes the job's launch failed on
// last; with a workload to measure (fgd.go), least growth of its
// fragmentation first; for slice jobs, most shared GPUs with room for a slice first; then fewest free GPUs (so whole
// free nodes stay free for big jobs), then fewest free CPUs, then (with
// a switch tree) nodes on leaves already partly used, so whole leaves
// stay free, then (a requeued job) its previous nodes, then name. The
// choice then spares the last free node of a
// leaf (holes.go).
func (p *pass) betterFit(a, b int) int {
	na, nb := &p.nodes[a], &p.nodes[b]
	// Pack (the default) fills the fullest nodes and leaves first, so
	// whole nodes and leaves stay free for big jobs; spread does the
	// opposite, for jobs that want headroom.
	sign := 1
	if p.spread() {
		sign = -1
	}
	if r := &p.req; r.HasAvoid {
		// A node the job's launch failed on comes last, whatever fits
		// best.
		if aa, ab := na.avoid == r.stamp, nb.avoid == r.stamp; aa != ab {
			if aa {
				return 1
			}
			return -1
		}
	}
	if r := &p.req; r.Sliced && p.cfg.SliceFit == SliceFirstFit {
		return cmp.Compare(p.rank[a], p.rank[b])
	}
	// Where the workload's fragmentation grows least (fgd.go).
	if c := p.fgdCompare(a, b); c != 0 {
		return c
	}
	if r := &p.req; r.Sliced && len(r.Slots) > 0 {
		// Slices fill shared GPUs before they break a free one.
		s := &r.Slots[len(r.Slots)-1]
		if c := cmp.Compare(p.sharedFit(b, s), p.sharedFit(a, s)); c != 0 {
			return sign * c
		}
	}
	if c := cmp.Compare(len(na.FreeGPUs), len(nb.FreeGPUs)); c != 0 {
		return sign * c
	}
	if c := cmp.Compare(na.FreeCPUs, nb.FreeCPUs); c != 0 {
		return sign * c
	}
	if p.topo != nil {
		ua, ub := p.topo.leafUntouched(a), p.topo.leafUntouched(b)
		if ua != ub {
			if ua {
				return sign
			}
			return -sign
		}
	}
	if r := &p.req; r.HasPrev {
		// A requeued job prefers its previous nodes among equals.
		pa, pb := na.prev == r.stamp, nb.prev == r.stamp
		if pa != pb {
			if pa {
				return -1
			}
			return 1
		}
	}
	return cmp.Compare(p.rank[a], p.rank[b])
}

// spread reports whether the current job's partition spreads jobs.
func (p *pass) spread() bool {
	return p.req.Job != nil && p.parts[p.req.Part].info.Spread
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
