package sched

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// The plan in time of PolicyBackfill and PolicyEASY (Slurm's backfill
// "node space map"). Each node has a step function of free CPUs, memory
// and whole GPUs: what is free now in the pass's working copy, plus what
// running jobs give back at their time limits (NodeInfo.Releases) and
// what the pass's own starts give back at theirs, minus what the
// reservations made earlier in the pass hold over [start, end). A job
// starts now only where the least it would leave free over its whole
// limit still holds every reservation (narrow); a job that cannot start
// gets the earliest instant at which some nodes hold it for its whole
// limit, and those resources are reserved for it (earliest, reserveAt).
//
// Whether a node can hold a slot at some instant is the pass's own
// filter chain run on a NodeState that describes the node then, so the
// rules (CPUs, tasks, memory, --mem=0, --exclusive, GPU counts, NVLink
// islands, slices) exist once. Filters are monotone in the free amounts,
// so "fits at every instant of a window" is "fits the per-resource
// minimum over the window", which is what the views hold.
//
// Resources are counts: a reservation holds so many CPUs, bytes and
// GPUs of a node, not indices, because the reserved job gets whatever
// indices are free when it starts. A view's GPU list is the indices
// known to be free at its instant (free now plus those releases gave
// back), cut to the count; the lowest indices are kept, which only
// matters to --comm=model's island check. Slices are planned as whole
// GPUs: a future view has no shared GPUs (a slice job's reservation
// holds one whole GPU per slice), a slice's end gives back no GPU, and
// GPUs shared now never come back whole.
//
// Times are Unix nanoseconds. Releases and reservation ends are rounded
// up to the resolution grid (multiples of Resolution since the epoch),
// so the plan only has grid instants after now: it is conservative
// (resources come back no earlier than they really do) and its size is
// bounded by window/resolution instants. A release already overdue is at
// now: it is promised to reservations but not free to a job that would
// start now.

// never is the end of a job without a time limit, and of the plan.
const never = math.MaxInt64

// tlEvent is one change of a node's free resources in the plan.
type tlEvent struct {
	at   int64
	cpus int
	mem  int64
	gpus int
	// idx lists the GPU indices a release gives back (len(idx) ==
	// gpus); reservations have none.
	idx []int
	// hold marks a reservation's events: negative amounts at its
	// start, positive at its end. Releases only add.
	hold bool
}

// tlSum accumulates a node's events up to an instant.
type tlSum struct {
	// Released amounts.
	cpus, gpus int
	mem        int64
	// Held amounts (negative while a reservation holds them).
	hcpus, hgpus int
	hmem         int64
}

func (s *tlSum) add(e *tlEvent) {
	if e.hold {
		s.hcpus += e.cpus
		s.hmem += e.mem
		s.hgpus += e.gpus
		return
	}
	s.cpus += e.cpus
	s.mem += e.mem
	s.gpus += e.gpus
}

func (s *tlSum) merge(o *tlSum) {
	s.cpus, s.mem, s.gpus = s.cpus+o.cpus, s.mem+o.mem, s.gpus+o.gpus
	s.hcpus, s.hmem, s.hgpus = s.hcpus+o.hcpus, s.hmem+o.hmem, s.hgpus+o.hgpus
}

// free is what n has free with s applied: releases capped at the node's
// size (so that inconsistent input creates nothing), then holds taken.
func (s *tlSum) free(n *NodeState) (cpus int, mem int64, gpus int) {
	cpus = min(n.FreeCPUs+s.cpus, capCPUs(n)) + s.hcpus
	mem = min(n.FreeMemMB+s.mem, capMem(n)) + s.hmem
	gpus = min(len(n.FreeGPUs)+s.gpus, capGPUs(n)) + s.hgpus
	return cpus, mem, gpus
}

// capCPUs, capMem and capGPUs are what n can have free at most in the
// plan: its size (GPUs shared by slices never come back whole).
func capCPUs(n *NodeState) int  { return max(n.Info.CPUs, n.FreeCPUs) }
func capMem(n *NodeState) int64 { return max(n.Info.MemoryMB, n.FreeMemMB) }
func capGPUs(n *NodeState) int  { return max(n.Info.GPUs-len(n.Shared), len(n.FreeGPUs)) }

// timeline is the plan of one pass.
type timeline struct {
	now, res int64
	// horizon is the latest start a reservation may have (never: no
	// window).
	horizon int64
	ev      [][]tlEvent
	// firstHold is each node's earliest reservation start (never:
	// none); held lists the nodes with a reservation.
	firstHold []int64
	held      []int32
	// caches holds the runs of the shapes tested in the pass
	// (fitruns.go); log lists the nodes changed since the first was
	// made (touch), changed is scratch of their sync.
	caches  []*runCache
	log     []int32
	changed []int
	fresh   []fitRun
	// ver counts each node's changes (touch); dip caches dipAt, valid
	// while dipVer is ver+1.
	ver, dipVer []uint32
	dip         []int64

	// Scratch reused for every job.
	views   []NodeState
	gpuArea [][]int
	// anyGPUs is 0, 1, 2, ...: a GPU list for views whose indices
	// nothing reads.
	anyGPUs  []int
	saved    []NodeState
	savedIdx []int32
	keys     []sweepKey
	list     []int
	cands    []int32
	only     []int
	view     NodeState
}

// sweepKey is one end of a node's span of feasible start times.
type sweepKey struct {
	at    int64
	delta int32
	req   bool
}

// newTimeline builds the plan of pass p at now from the snapshot's
// releases and started, the releases of jobs the pass started so far.
func newTimeline(p *pass, now time.Time, cfg BackfillConfig, window bool, started []relEvent) *timeline {
	tl := &timeline{now: now.UnixNano(), res: int64(cfg.Resolution), horizon: never,
		ev: make([][]tlEvent, len(p.nodes)), firstHold: make([]int64, len(p.nodes)),
		ver: make([]uint32, len(p.nodes)), dipVer: make([]uint32, len(p.nodes)), dip: make([]int64, len(p.nodes)),
		views: make([]NodeState, len(p.nodes)), gpuArea: make([][]int, len(p.nodes))}
	if window {
		tl.horizon = tl.now + int64(cfg.Window)
	}
	size, most := 0, 0
	for i := range p.nodes {
		c := max(p.nodes[i].Info.GPUs, len(p.nodes[i].FreeGPUs))
		size, most = size+c, max(most, c)
	}
	tl.anyGPUs = make([]int, most)
	for g := range tl.anyGPUs {
		tl.anyGPUs[g] = g
	}
	area := make([]int, size)
	if noShortcuts {
		// The reference for tests: event by event.
		for i := range p.nodes {
			n := &p.nodes[i]
			tl.firstHold[i] = never
			c := max(n.Info.GPUs, len(n.FreeGPUs))
			tl.gpuArea[i], area = area[:0:c], area[c:]
			for _, rel := range n.Info.Releases {
				tl.release(p, i, rel.At.UnixNano(), rel.CPUs, rel.MemMB, rel.GPUs)
			}
		}
		for _, e := range started {
			tl.release(p, e.node, e.at, e.cpus, e.mem, e.gpus)
		}
		return tl
	}
	// Each node's events are its releases, then those of the pass's
	// starts on it, in that order where they fall at one instant (as
	// inserting them one by one would order them): they are built in
	// one array and sorted once per node, since a pass plans the end of
	// every running job.
	total := len(started)
	for i := range p.nodes {
		total += len(p.nodes[i].Info.Releases)
	}
	byNode := startsByNode(started, len(p.nodes))
	evArea := make([]tlEvent, 0, total)
	for i := range p.nodes {
		n := &p.nodes[i]
		tl.firstHold[i] = never
		c := max(n.Info.GPUs, len(n.FreeGPUs))
		tl.gpuArea[i], area = area[:0:c], area[c:]
		m := len(n.Info.Releases)
		if byNode != nil {
			m += int(byNode.at[i+1] - byNode.at[i])
		}
		if m == 0 {
			continue
		}
		evs := evArea[len(evArea) : len(evArea) : len(evArea)+m]
		for _, rel := range n.Info.Releases {
			evs = append(evs, tl.releaseEvent(n, evs, rel.At.UnixNano(), rel.CPUs, rel.MemMB, rel.GPUs))
		}
		if byNode != nil {
			for _, k := range byNode.idx[byNode.at[i]:byNode.at[i+1]] {
				e := &started[k]
				evs = append(evs, tl.releaseEvent(n, evs, e.at, e.cpus, e.mem, e.gpus))
			}
		}
		slices.SortStableFunc(evs, func(a, b tlEvent) int { return cmp.Compare(a.at, b.at) })
		tl.ev[i] = evs
		evArea = evArea[:len(evArea)+m]
	}
	return tl
}

// nodeIndex groups items by node: idx[at[i]:at[i+1]] are node i's, in
// their order.
type nodeIndex struct{ at, idx []int32 }

// startsByNode groups started by node (nil when empty).
func startsByNode(started []relEvent, nodes int) *nodeIndex {
	if len(started) == 0 {
		return nil
	}
	x := &nodeIndex{at: make([]int32, nodes+1), idx: make([]int32, len(started))}
	for _, e := range started {
		x.at[e.node+1]++
	}
	for i := 1; i <= nodes; i++ {
		x.at[i] += x.at[i-1]
	}
	fill := slices.Clone(x.at[:nodes])
	for k, e := range started {
		x.idx[fill[e.node]] = int32(k)
		fill[e.node]++
	}
	return x
}

// ceil rounds t up to the resolution grid.
func (tl *timeline) ceil(t int64) int64 {
	if t == never || tl.res <= 1 {
		return t
	}
	q := t / tl.res * tl.res
	if q < t {
		q += tl.res
	}
	return q
}

// end is when a job with limit (nanoseconds, never: none) that starts
// at t gives its resources back in the plan.
func (tl *timeline) end(t, limit int64) int64 {
	if limit == never {
		return never
	}
	return tl.ceil(t + limit)
}

// release adds to node i what a job gives back at (rounded up to the
// grid; an overdue one at now). GPU indices free or shared now, or given
// back by another release already, are left out.
func (tl *timeline) release(p *pass, i int, at int64, cpus int, mem int64, gpus []int) {
	tl.insert(i, tl.releaseEvent(&p.nodes[i], tl.ev[i], at, cpus, mem, gpus))
}

// releaseEvent is the event of a release on node n, whose events are
// evs so far.
func (tl *timeline) releaseEvent(n *NodeState, evs []tlEvent, at int64, cpus int, mem int64, gpus []int) tlEvent {
	at = max(tl.ceil(at), tl.now)
	idx := gpus
	for k, g := range gpus {
		if known(n, evs, g) {
			// Rare (inconsistent input): copy without the known ones.
			idx = slices.Clone(gpus[:k])
			for _, g := range gpus[k+1:] {
				if !known(n, evs, g) && !slices.Contains(idx, g) {
					idx = append(idx, g)
				}
			}
			break
		}
	}
	return tlEvent{at: at, cpus: cpus, mem: mem, gpus: len(idx), idx: idx}
}

// known reports whether GPU g of node n is free or shared now, or given
// back by a release among evs.
func known(n *NodeState, evs []tlEvent, g int) bool {
	if _, found := slices.BinarySearch(n.FreeGPUs, g); found {
		return true
	}
	for k := range n.Shared {
		if n.Shared[k].Index == g {
			return true
		}
	}
	for k := range evs {
		if slices.Contains(evs[k].idx, g) {
			return true
		}
	}
	return false
}

// insert adds e to node i's events after those at the same instant.
func (tl *timeline) insert(i int, e tlEvent) {
	evs := tl.ev[i]
	k, _ := slices.BinarySearchFunc(evs, e.at+1, func(x tlEvent, t int64) int { return cmp.Compare(x.at, t) })
	tl.ev[i] = slices.Insert(evs, k, e)
	tl.touch(i)
}

// hold reserves cpus, mem and gpus of node i over [from, to).
func (tl *timeline) hold(i int, from, to int64, cpus int, mem int64, gpus int) {
	tl.insert(i, tlEvent{at: from, cpus: -cpus, mem: -mem, gpus: -gpus, hold: true})
	if to != never {
		tl.insert(i, tlEvent{at: to, cpus: cpus, mem: mem, gpus: gpus, hold: true})
	}
	if tl.firstHold[i] == never {
		tl.held = append(tl.held, int32(i))
	}
	tl.firstHold[i] = min(tl.firstHold[i], from)
}

// addIdx merges the indices of a release into the sorted list.
func addIdx(list, idx []int) []int {
	for _, g := range idx {
		if k, found := slices.BinarySearch(list, g); !found {
			list = slices.Insert(list, k, g)
		}
	}
	return list
}

// window fills v with node n (whose events are evs) as it stays over
// [from, to): the least free CPUs, memory and GPUs at any instant of it,
// the GPU indices free from its start, and idle when nothing is used
// throughout. At from == now (realNow) releases due at now are not free
// yet (they are promised to reservations) and shared GPUs keep their
// slices' room; later views have no shared GPUs. dst is storage for the
// GPU list.
func (tl *timeline) window(n *NodeState, evs []tlEvent, from, to int64, realNow, indices bool, dst []int, v *NodeState) []int {
	*v = *n
	var s, due tlSum
	list := n.FreeGPUs
	copied := false
	if !indices && !realNow {
		// Any indices do where only their count is read (see spans).
		list, copied = tl.anyGPUs, true
	}
	k := 0
	for ; k < len(evs) && evs[k].at <= from; k++ {
		e := &evs[k]
		if !e.hold && realNow {
			due.add(e)
			continue
		}
		s.add(e)
		if !e.hold && len(e.idx) > 0 && indices {
			if !copied {
				list, copied = append(dst[:0], list...), true
			}
			list = addIdx(list, e.idx)
		}
	}
	c, m, g := s.free(n)
	minC, minM, minG := c, m, g
	s.merge(&due)
	for ; k < len(evs) && evs[k].at < to; k++ {
		s.add(&evs[k])
		if evs[k].hold {
			c, m, g = s.free(n)
			minC, minM, minG = min(minC, c), min(minM, m), min(minG, g)
		}
	}
	v.FreeCPUs, v.FreeMemMB = max(minC, 0), max(minM, 0)
	v.FreeGPUs = list[:min(max(minG, 0), len(list))]
	v.Idle = minC >= capCPUs(n) && minM >= capMem(n) && minG >= n.Info.GPUs && len(n.Shared) == 0 && (n.Idle || !realNow)
	if !realNow {
		v.Shared = nil
	}
	if copied && indices {
		return list
	}
	return dst
}

// narrow replaces, in the pass's working copy, every node on which a
// reservation starts before a job with limit (nanoseconds) that starts
// now would end with what stays free over that time, so that the
// normal node choice only places the job where it delays no
// reservation. It reports whether it changed a node; restore undoes it.
func (tl *timeline) narrow(p *pass, limit int64) bool {
	if len(tl.held) == 0 {
		return false
	}
	end := tl.end(tl.now, limit)
	tl.saved, tl.savedIdx = tl.saved[:0], tl.savedIdx[:0]
	narrowed := false
	for _, i := range tl.held {
		if tl.firstHold[i] >= end {
			continue
		}
		narrowed = true
		if !noShortcuts && tl.dipAt(p, int(i)) >= end {
			// What stays free until end is what is free now: the
			// window would be the node itself.
			if verifyCache {
				tl.verifyWindow(p, int(i), end)
			}
			continue
		}
		tl.saved = append(tl.saved, p.nodes[i])
		tl.savedIdx = append(tl.savedIdx, i)
	}
	for k, i := range tl.savedIdx {
		tl.gpuArea[i] = tl.window(&tl.saved[k], tl.ev[i], tl.now, end, true, true, tl.gpuArea[i], &p.nodes[i])
	}
	return narrowed
}

// verifyWindow panics when narrow's window of node i until end is not
// the node itself (a test hook: see verifyCache).
func (tl *timeline) verifyWindow(p *pass, i int, end int64) {
	n := &p.nodes[i]
	var v NodeState
	tl.window(n, tl.ev[i], tl.now, end, true, true, nil, &v)
	if v.FreeCPUs != n.FreeCPUs || v.FreeMemMB != n.FreeMemMB || !slices.Equal(v.FreeGPUs, n.FreeGPUs) || v.Idle != n.Idle ||
		len(v.Shared) != len(n.Shared) {
		panic(fmt.Sprintf("sched: node %s skipped by narrow until %d: window %+v, node %+v", n.Info.Name, end, v, *n))
	}
}

// dipAt returns the first instant at which reservations leave node i
// less free than its working copy has now (never: they do not), as
// window sees it from now: narrow's window of the node is the node
// itself for every end up to that instant. It is computed again only
// after the node changed (touch).
func (tl *timeline) dipAt(p *pass, i int) int64 {
	if tl.dipVer[i] == tl.ver[i]+1 {
		return tl.dip[i]
	}
	n := &p.nodes[i]
	// same reports whether window's view for these least free amounts
	// is n as it is.
	same := func(c int, m int64, g int) bool {
		idle := c >= capCPUs(n) && m >= capMem(n) && g >= n.Info.GPUs && len(n.Shared) == 0 && n.Idle
		return max(c, 0) == n.FreeCPUs && max(m, 0) == n.FreeMemMB && g >= len(n.FreeGPUs) && idle == n.Idle
	}
	// As window does from now: holds due by now count at once,
	// releases due by now only after them.
	evs := tl.ev[i]
	var s, due tlSum
	k := 0
	for ; k < len(evs) && evs[k].at <= tl.now; k++ {
		if evs[k].hold {
			s.add(&evs[k])
		} else {
			due.add(&evs[k])
		}
	}
	at := int64(never)
	minC, minM, minG := s.free(n)
	if !same(minC, minM, minG) {
		at = tl.now
	}
	s.merge(&due)
	for ; at == never && k < len(evs); k++ {
		s.add(&evs[k])
		if !evs[k].hold {
			continue
		}
		c, m, g := s.free(n)
		minC, minM, minG = min(minC, c), min(minM, m), min(minG, g)
		if !same(minC, minM, minG) {
			at = evs[k].at
		}
	}
	tl.dip[i], tl.dipVer[i] = at, tl.ver[i]+1
	return at
}

// mayDiffer reports, for request r that did not fit on the narrowed
// nodes (before restore), whether it might fit on the nodes as they
// are. It does not when every narrowed node of r's partition is turned
// away for the same reason either way: the node scan would then see the
// same candidates and count the same details. Jobs with -w nodes or
// --constraint alternatives, and narrowings of most of the partition,
// are not worth the check: the scan is run again.
func (tl *timeline) mayDiffer(p *pass, r *Request) bool {
	if len(r.Required) > 0 || r.Features.Alternatives() > 1 || 2*len(tl.savedIdx) > len(p.parts[r.Part].members) {
		return true
	}
	smallest := &r.Slots[len(r.Slots)-1]
	for k, i := range tl.savedIdx {
		if !p.inPartition(int(i), r.Part) {
			continue
		}
		code := p.chain.check(r, smallest, &p.nodes[i])
		if code == "" || code != p.chain.check(r, smallest, &tl.saved[k]) {
			return true
		}
	}
	return false
}

// restore undoes narrow.
func (tl *timeline) restore(p *pass) {
	for k, i := range tl.savedIdx {
		p.nodes[i] = tl.saved[k]
	}
	tl.savedIdx = tl.savedIdx[:0]
}

// fit is the outcome of earliest.
type fit int

const (
	fitNever  fit = iota // no instant of the plan holds the job
	fitBeyond            // it fits only after the window
	fitAt                // it fits at the instant returned, within the window
)

// earliest finds the earliest instant >= now at which request r with
// limit (nanoseconds, never: none) fits for its whole limit, and leaves
// the nodes it would get then in p.picked. For each candidate node it
// runs the filter chain on the node's state at each instant of its plan,
// which gives the spans of start times at which the node holds r's slot
// for the whole limit (for most requests read from the runs the pass
// keeps per shape: fitruns.go); a sweep over the spans' ends counts the
// nodes available at each instant, and only where enough are does the
// full node choice run (try).
func (tl *timeline) earliest(p *pass, r *Request, limit int64) (int64, fit) {
	if r.Nodes == 1 {
		if at, f, ok := tl.earliestOne(p, r, limit); ok {
			return at, f
		}
	}
	tl.keys = tl.keys[:0]
	for k, i := range r.Required {
		tl.spans(p, r, i, &r.Slots[k], limit, true)
	}
	if !r.OnlyRequired {
		smallest := &r.Slots[len(r.Slots)-1]
		if c := tl.runCacheFor(p, r, smallest); c != nil {
			for k := range c.all {
				tl.span(c.all[k].from, c.all[k].to, limit, false)
			}
		} else {
			for _, i := range p.parts[r.Part].members {
				if p.nodes[i].required != r.stamp {
					tl.spans(p, r, i, smallest, limit, false)
				}
			}
		}
	}
	slices.SortFunc(tl.keys, func(a, b sweepKey) int { return cmp.Compare(a.at, b.at) })
	needReq, needOther := len(r.Required), r.Nodes-len(r.Required)
	count, countReq := 0, 0
	for x := 0; x < len(tl.keys); {
		at, opens := tl.keys[x].at, false
		for ; x < len(tl.keys) && tl.keys[x].at == at; x++ {
			k := tl.keys[x]
			if k.req {
				countReq += int(k.delta)
			} else {
				count += int(k.delta)
			}
			opens = opens || k.delta > 0
		}
		if !opens || countReq < needReq || count < needOther {
			continue
		}
		if at > tl.horizon {
			return 0, fitBeyond
		}
		if tl.try(p, r, at, limit) {
			return at, fitAt
		}
	}
	return 0, fitNever
}

// earliestOne is earliest for a job of one node: the earliest instant
// at which any candidate node holds its slot for the whole limit: the
// first long enough run of the shape's ordered runs (earliestCached), or
// for requests that are not cached, each node's plan walked only until
// that node's first such instant or the best one so far. The node choice
// runs once, among the nodes that hold the job from the best instant. ok
// is false when that choice fails (the general search then decides).
func (tl *timeline) earliestOne(p *pass, r *Request, limit int64) (int64, fit, bool) {
	s := &r.Slots[0]
	best := int64(never)
	found := false
	tl.cands = tl.cands[:0]
	try := func(i int) {
		if at, ok := tl.first(p, r, i, s, limit, best); ok && (!found || at <= best) {
			if !found || at < best {
				tl.cands = tl.cands[:0]
			}
			best, found = at, true
			tl.cands = append(tl.cands, int32(i))
		}
	}
	switch c := tl.runCacheFor(p, r, s); {
	case c != nil:
		best, found = tl.earliestCached(c, limit)
	case len(r.Required) > 0:
		try(r.Required[0])
	default:
		for _, i := range p.parts[r.Part].members {
			try(i)
		}
	}
	switch {
	case !found:
		return 0, fitNever, true
	case best > tl.horizon:
		return 0, fitBeyond, true
	}
	if tl.tryOn(p, r, best, limit, tl.cands) {
		return best, fitAt, true
	}
	return 0, fitNever, false
}

// first returns the earliest instant, no later than bound, from which
// node i holds slot s for a whole limit.
func (tl *timeline) first(p *pass, r *Request, i int, s *Slot, limit, bound int64) (int64, bool) {
	n := &p.nodes[i]
	if !n.Usable || n.Reserved || p.chain.checkStatic(r, s, n) != "" {
		return 0, false
	}
	evs := tl.ev[i]
	// The view lives in tl: filters take it by pointer through an
	// interface, which would move a local to the heap.
	v := &tl.view
	*v = *n
	v.Shared = nil
	var sum tlSum
	list := p.emptyGPUs
	if r.NVLinkOnly {
		list = append(tl.list[:0], n.FreeGPUs...)
		defer func() { tl.list = list[:0] }()
	}
	from := int64(-1)
	t := tl.now
	for k := 0; t <= bound || from >= 0 && from <= bound; {
		for ; k < len(evs) && evs[k].at <= t; k++ {
			sum.add(&evs[k])
			if !evs[k].hold && r.NVLinkOnly {
				list = addIdx(list, evs[k].idx)
			}
		}
		next := int64(never)
		if k < len(evs) {
			next = evs[k].at
		}
		c, m, g := sum.free(n)
		v.FreeCPUs, v.FreeMemMB = c, m
		v.FreeGPUs = list[:min(max(g, 0), len(list))]
		v.Idle = c >= capCPUs(n) && m >= capMem(n) && g >= n.Info.GPUs && len(n.Shared) == 0
		if c >= 0 && m >= 0 && g >= 0 && p.chain.check(r, s, v) == "" {
			if from < 0 {
				from = t
			}
			if tl.end(from, limit) <= next {
				return from, from <= bound
			}
		} else {
			from = -1
		}
		if next == never {
			break
		}
		t = next
	}
	return 0, false
}

// spans adds the spans of start times at which node i holds slot s for
// a whole limit to tl.keys.
func (tl *timeline) spans(p *pass, r *Request, i int, s *Slot, limit int64, req bool) {
	n := &p.nodes[i]
	if !n.Usable || n.Reserved || p.chain.checkStatic(r, s, n) != "" {
		return
	}
	evs := tl.ev[i]
	// The view lives in tl: filters take it by pointer through an
	// interface, which would move a local to the heap.
	v := &tl.view
	*v = *n
	v.Shared = nil
	var sum tlSum
	// Only --comm=model's island check reads which GPUs are free: the
	// other filters count them, and any indices do.
	list := p.emptyGPUs
	if r.NVLinkOnly {
		list = append(tl.list[:0], n.FreeGPUs...)
	}
	from := int64(-1)
	t := tl.now
	for k := 0; ; {
		for ; k < len(evs) && evs[k].at <= t; k++ {
			sum.add(&evs[k])
			if !evs[k].hold && r.NVLinkOnly {
				list = addIdx(list, evs[k].idx)
			}
		}
		c, m, g := sum.free(n)
		v.FreeCPUs, v.FreeMemMB = c, m
		v.FreeGPUs = list[:min(max(g, 0), len(list))]
		v.Idle = c >= capCPUs(n) && m >= capMem(n) && g >= n.Info.GPUs && len(n.Shared) == 0
		good := c >= 0 && m >= 0 && g >= 0 && p.chain.check(r, s, v) == ""
		if good && from < 0 {
			from = t
		} else if !good && from >= 0 {
			tl.span(from, t, limit, req)
			from = -1
		}
		if k == len(evs) {
			break
		}
		t = evs[k].at
	}
	if from >= 0 {
		tl.span(from, never, limit, req)
	}
	if r.NVLinkOnly {
		tl.list = list
	}
}

// span records that a job with limit may start at any instant of
// [from, to-limit] (to: when the node stops holding its slot).
func (tl *timeline) span(from, to, limit int64, req bool) {
	if to != never {
		if limit == never || tl.end(from, limit) > to {
			return
		}
		// The latest start whose rounded end is still by to.
		last := to - limit
		tl.keys = append(tl.keys, sweepKey{at: from, delta: 1, req: req}, sweepKey{at: last + 1, delta: -1, req: req})
		return
	}
	tl.keys = append(tl.keys, sweepKey{at: from, delta: 1, req: req})
}

// try runs the node choice for r on the nodes as they stay over its
// whole limit from at, and on success reserves what r needs there.
func (tl *timeline) try(p *pass, r *Request, at, limit int64) bool {
	return tl.tryOn(p, r, at, limit, nil)
}

// tryOn is try with only the nodes only (when not nil) as candidates.
func (tl *timeline) tryOn(p *pass, r *Request, at, limit int64, only []int32) bool {
	end := tl.end(at, limit)
	views := tl.views
	view := func(i int) {
		n := &p.nodes[i]
		if !n.Usable || n.Reserved {
			views[i] = *n
			views[i].Usable = false
			return
		}
		tl.gpuArea[i] = tl.window(n, tl.ev[i], at, end, false, r.NVLinkOnly, tl.gpuArea[i], &views[i])
	}
	ps := &p.parts[r.Part]
	members := ps.members
	switch {
	case only != nil:
		// The node choice sees only these nodes (a job of one node:
		// the required one, or partition members).
		tl.only = tl.only[:0]
		for _, i := range only {
			view(int(i))
			if len(r.Required) == 0 {
				tl.only = append(tl.only, int(i))
			}
		}
		ps.members = tl.only
	default:
		copy(views, p.nodes)
		for _, i := range r.Required {
			view(i)
		}
		if !r.OnlyRequired {
			for _, i := range members {
				view(i)
			}
		}
	}
	saved := p.nodes
	p.nodes = views
	ok := p.find(r)
	p.nodes, ps.members = saved, members
	if !ok {
		return false
	}
	for k, i := range p.picked {
		s, v := &r.Slots[k], &views[i]
		cpus, mem, gpus := s.CPUs, s.MemMB, s.GPUs
		if s.WholeMem {
			mem = v.FreeMemMB
		}
		if r.Exclusive {
			cpus, mem, gpus = v.FreeCPUs, v.FreeMemMB, len(v.FreeGPUs)
		}
		tl.hold(i, at, end, cpus, mem, gpus)
	}
	return true
}

// limitNanos is a time limit in seconds as nanoseconds (never: none).
func limitNanos(secs int64) int64 {
	if secs < 0 {
		return never
	}
	return secs * int64(time.Second)
}
