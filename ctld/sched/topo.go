package sched

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/tide-hpc/tide/topology"
)

// topoIndex is the switch tree resolved to indices once per pass, so that
// the per-job switch choice does no map lookups.
type topoIndex struct {
	names    []string // switch names, sorted (Tree.Switches order)
	level    []int    // per switch
	maxLevel int
	// chainOf(i) = chain[chainAt[i]:chainAt[i+1]]: node i's leaf, its
	// parent, …, the root (empty for a node the tree does not name).
	chain   []int32
	chainAt []int32
	// busy counts, per leaf, the nodes that are not idle and usable:
	// single-node jobs prefer leaves with busy > 0 so whole leaves stay
	// free. It is updated as the pass places jobs.
	busy []int32

	// Scratch reused for every job.
	buckets [][]int // candidates under each switch, best fit first
	used    []int   // switches with a non-empty bucket
	order   []int
	free    []int64 // per switch: free GPUs (high bits) and CPUs, the best-fit measure
	sub     []int
	cntFree []int32
	cntAll  []int32
}

// newTopoIndex resolves tree for the snapshot's nodes; nil for a nil or
// empty tree.
func newTopoIndex(tree *topology.Tree, nodes []NodeState) *topoIndex {
	sws := tree.Switches()
	if len(sws) == 0 {
		return nil
	}
	t := &topoIndex{
		names:   sws,
		level:   make([]int, len(sws)),
		chainAt: make([]int32, len(nodes)+1),
		busy:    make([]int32, len(sws)),
		buckets: make([][]int, len(sws)),
		free:    make([]int64, len(sws)),
		cntFree: make([]int32, len(sws)),
		cntAll:  make([]int32, len(sws)),
	}
	for k, s := range sws {
		t.level[k] = tree.Level(s)
		t.maxLevel = max(t.maxLevel, t.level[k])
	}
	t.chain = make([]int32, 0, len(nodes)*(t.maxLevel+1))
	for i := range nodes {
		t.chain = append(t.chain, tree.AncestorIndexes(nodes[i].Info.Name)...)
		t.chainAt[i+1] = int32(len(t.chain))
		if !(nodes[i].Usable && nodes[i].Idle) {
			t.markBusy(i)
		}
	}
	return t
}

func (t *topoIndex) chainOf(i int) []int32 { return t.chain[t.chainAt[i]:t.chainAt[i+1]] }

// leafOf returns node i's leaf switch, or -1.
func (t *topoIndex) leafOf(i int) int {
	if c := t.chainOf(i); len(c) > 0 {
		return int(c[0])
	}
	return -1
}

// markBusy counts node i as used on its leaf.
func (t *topoIndex) markBusy(i int) {
	if l := t.leafOf(i); l >= 0 {
		t.busy[l]++
	}
}

// leafUntouched reports whether node i sits on a leaf where nothing is
// used yet (false for nodes outside the tree).
func (t *topoIndex) leafUntouched(i int) bool {
	l := t.leafOf(i)
	return l >= 0 && t.busy[l] == 0
}

// where names switch sw for a Start's Why: "leaf s1" or "switch agg1".
func (t *topoIndex) where(sw int) string {
	if t.level[sw] == 0 {
		return "leaf " + t.names[sw]
	}
	return "switch " + t.names[sw]
}

// chooseUnderSwitch fills p.picked with one node per slot, all under the
// lowest switch that can hold the whole job: every switch of a level is
// tried before the next level, fullest first (fewest free GPUs, then
// CPUs, among its candidates: best fit), and inside a switch the nodes
// are taken in p.cand's best-fit order. p.cand must be sorted and
// p.picked empty. It returns the switch, or -1 when none holds the job
// (nodes outside the tree, a forest), leaving p.picked empty.
func (p *pass) chooseUnderSwitch(r *Request) int {
	t := p.topo
	for _, sw := range t.used {
		t.buckets[sw] = t.buckets[sw][:0]
		t.free[sw] = 0
	}
	t.used = t.used[:0]
	for _, i := range p.cand {
		n := &p.nodes[i]
		w := int64(len(n.FreeGPUs))<<32 + int64(n.FreeCPUs)
		for _, sw := range t.chainOf(i) {
			if len(t.buckets[sw]) == 0 {
				t.used = append(t.used, int(sw))
			}
			t.buckets[sw] = append(t.buckets[sw], i)
			t.free[sw] += w
		}
	}
	need := r.Nodes
	for level := 0; level <= t.maxLevel; level++ {
		t.order = t.order[:0]
		for _, sw := range t.used {
			if t.level[sw] == level && len(t.buckets[sw]) >= need {
				t.order = append(t.order, sw)
			}
		}
		sign := int64(1)
		if p.spread() {
			sign = -1
		}
		slices.SortFunc(t.order, func(a, b int) int {
			if c := cmp.Compare(sign*t.free[a], sign*t.free[b]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		for _, sw := range t.order {
			if p.fillFrom(r, t.buckets[sw]) {
				return sw
			}
		}
	}
	return -1
}

// fillFrom takes, for each slot, the first node of nodes (best-fit
// order) that holds it. On failure p.picked is left empty.
func (p *pass) fillFrom(r *Request, nodes []int) bool {
	t := p.topo
	t.sub = append(t.sub[:0], nodes...)
	for k := range r.Slots {
		found := p.firstFit(r, &r.Slots[k], t.sub)
		if found < 0 {
			p.picked = p.picked[:0]
			return false
		}
		p.picked = append(p.picked, t.sub[found])
		t.sub = slices.Delete(t.sub, found, found+1)
	}
	return true
}

// bestLeaf says, for a multi-node job that does not fit, how close the
// best leaf comes: "best leaf s2 has 6/8 free nodes", counting the
// partition's nodes under each leaf that could take the job's smallest
// slot now. "" without a tree or when no partition node is under one.
func (p *pass) bestLeaf(r *Request) string {
	t := p.topo
	if t == nil {
		return ""
	}
	clear(t.cntFree)
	clear(t.cntAll)
	smallest := &r.Slots[len(r.Slots)-1]
	for _, i := range p.parts[r.Part].members {
		l := t.leafOf(i)
		if l < 0 {
			continue
		}
		t.cntAll[l]++
		if p.nodes[i].required != r.stamp && p.chain.check(r, smallest, &p.nodes[i]) == "" {
			t.cntFree[l]++
		}
	}
	best := -1
	for l := range t.cntAll {
		if t.cntAll[l] > 0 && (best < 0 || t.cntFree[l] > t.cntFree[best]) {
			best = l
		}
	}
	if best < 0 {
		return ""
	}
	return fmt.Sprintf("best leaf %s has %d/%d free nodes", t.names[best], t.cntFree[best], t.cntAll[best])
}

// firstFit returns the position in nodes (best-fit order) of the first
// node that holds slot s, or -1. When that node is the last free node of
// its leaf and the slot is smaller than a node, the first partly used
// node after it that holds the slot is taken instead (holes.go).
func (p *pass) firstFit(r *Request, s *Slot, nodes []int) int {
	for j, i := range nodes {
		if p.chain.check(r, s, &p.nodes[i]) != "" {
			continue
		}
		if p.protects(i) {
			for k := j + 1; k < len(nodes); k++ {
				if n := &p.nodes[nodes[k]]; !n.Idle && p.chain.check(r, s, n) == "" {
					return k
				}
			}
		}
		return j
	}
	return -1
}

// leavesOf counts the distinct leaf switches of nodes (a node outside
// the tree counts as a leaf of its own).
func (t *topoIndex) leavesOf(nodes []int) int {
	n := 0
	for k, i := range nodes {
		leaf := t.leafOf(i)
		seen := false
		for _, j := range nodes[:k] {
			if l := t.leafOf(j); l == leaf && leaf >= 0 {
				seen = true
				break
			}
		}
		if !seen {
			n++
		}
	}
	return n
}
