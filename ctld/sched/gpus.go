package sched

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/topology"
)

// exactCombos bounds the exact GPU-set search: when choosing k of the
// free GPUs has at most this many combinations (every k on an 8-GPU
// node: C(8,4) = 70), all are scored; above it the set grows greedily
// from the best pair.
const exactCombos = 256

// gpuPicker chooses which free GPUs of a node a slot takes when the node
// has a link matrix. The objective, in order:
//
//  1. the highest SetScore of the chosen set (all-NVLink beats partial
//     NVLink beats PCIe), so a multi-GPU job gets its best-connected set;
//  2. the fewest NUMA nodes spanned (with NUMA data in the matrix), so
//     that the job's CPUs and memory can sit next to all its GPUs: on a
//     DGX, where every 4-set scores the same, 4 GPUs take one socket;
//  3. the lowest cut, the summed score between the chosen GPUs and the
//     free GPUs left behind, so a job breaks the fewest good links and
//     NVLink islands stay whole (for one GPU this is go-gpuallocator's
//     "take the worst-connected free GPU");
//  4. the lowest indices (the first set in lexicographic order).
//
// It keeps scratch buffers so that a pass allocates only the result.
type gpuPicker struct {
	m    *topology.Matrix
	free []int
	k    int
	// row[j] is the summed score of free[j] to every other free GPU.
	row     []int
	maxPair int

	cur, best                    []int // positions in free
	bestScore, bestSpan, bestCut int
	found                        bool
	ideal                        map[idealKey]int
	all                          []int
	in                           []bool
}

type idealKey struct {
	m *topology.Matrix
	k int
}

// pick returns the k GPU indices of free (ascending, a new slice) that
// the objective prefers, and the set's score. free must be ascending and
// 0 < k <= len(free).
func (g *gpuPicker) pick(m *topology.Matrix, free []int, k int) ([]int, int) {
	g.m, g.free, g.k = m, free, k
	g.row = resize(g.row, len(free))
	g.maxPair = 0
	for a := range free {
		g.row[a] = 0
	}
	for a := range free {
		for b := a + 1; b < len(free); b++ {
			s := m.Score(free[a], free[b])
			g.row[a] += s
			g.row[b] += s
			g.maxPair = max(g.maxPair, s)
		}
	}
	g.found = false
	if combos(len(free), k) <= exactCombos {
		g.cur = g.cur[:0]
		g.search(0, 0, 0)
	} else {
		g.greedy()
	}
	out := make([]int, k)
	for j, pos := range g.best {
		out[j] = free[pos]
	}
	return out, g.bestScore
}

// search enumerates the sets in lexicographic order, extending g.cur
// (positions in g.free, ascending) from position from. score is the set
// score of g.cur and rows the sum of its members' row totals.
func (g *gpuPicker) search(from, score, rows int) {
	if len(g.cur) == g.k {
		g.offer(score, g.span(g.cur), rows-2*score)
		return
	}
	have := len(g.cur)
	// Pairs still to add: every new member pairs with the ones before it.
	pairsLeft := g.k*(g.k-1)/2 - have*(have-1)/2
	if g.found && score+pairsLeft*g.maxPair < g.bestScore {
		return
	}
	for pos := from; pos <= len(g.free)-(g.k-have); pos++ {
		add := 0
		for _, c := range g.cur {
			add += g.m.Score(g.free[c], g.free[pos])
		}
		g.cur = append(g.cur, pos)
		g.search(pos+1, score+add, rows+g.row[pos])
		g.cur = g.cur[:have]
	}
}

// offer keeps g.cur when it beats the best set so far (higher score,
// then fewer NUMA nodes, then lower cut; the earlier set wins ties).
func (g *gpuPicker) offer(score, span, cut int) {
	if g.found {
		switch {
		case score != g.bestScore:
			if score < g.bestScore {
				return
			}
		case span != g.bestSpan:
			if span > g.bestSpan {
				return
			}
		case cut >= g.bestCut:
			return
		}
	}
	g.found, g.bestScore, g.bestSpan, g.bestCut = true, score, span, cut
	g.best = append(g.best[:0], g.cur...)
}

// numaBit is the bit of GPU free[pos]'s NUMA node in a span mask (all
// unknown nodes share bit 0, nodes above 62 share bit 63).
func (g *gpuPicker) numaBit(pos int) uint64 {
	return 1 << min(g.m.NUMA(g.free[pos])+1, 63)
}

// span counts the NUMA nodes of the GPUs at positions set.
func (g *gpuPicker) span(set []int) int {
	if !g.m.HasNUMA() {
		return 0
	}
	var mask uint64
	for _, pos := range set {
		mask |= g.numaBit(pos)
	}
	return bits.OnesCount64(mask)
}

// greedy grows the set from the best pair (by the same objective),
// adding each time the free GPU with the highest score to the set, ties
// broken by the lowest row total, then the lowest index. It is for nodes
// too large for the exact search.
func (g *gpuPicker) greedy() {
	n := len(g.free)
	g.best = g.best[:0]
	if g.k == 1 {
		pos := 0
		for j := 1; j < n; j++ {
			if g.row[j] < g.row[pos] {
				pos = j
			}
		}
		g.best = append(g.best, pos)
		g.bestScore = 0
		return
	}
	// A pair on a NUMA node with room for the whole set grows inside it.
	var perNUMA [64]int
	if g.m.HasNUMA() {
		for pos := range n {
			perNUMA[bits.TrailingZeros64(g.numaBit(pos))]++
		}
	}
	room := func(a, b int) int {
		if x := g.numaBit(a); g.m.HasNUMA() && x == g.numaBit(b) && perNUMA[bits.TrailingZeros64(x)] >= g.k {
			return 1
		}
		return 0
	}
	ba, bb, bs, br, bn, bc := -1, -1, 0, 0, 0, 0
	for a := range n {
		for b := a + 1; b < n; b++ {
			s := g.m.Score(g.free[a], g.free[b])
			rm := room(a, b)
			sp := g.span([]int{a, b})
			c := g.row[a] + g.row[b] - 2*s
			better := ba < 0 || s > bs
			if !better && s == bs {
				better = rm > br || rm == br && (sp < bn || sp == bn && c < bc)
			}
			if better {
				ba, bb, bs, br, bn, bc = a, b, s, rm, sp, c
			}
		}
	}
	mask := g.numaBit(ba) | g.numaBit(bb)
	g.in = resizeBool(g.in, n)
	in := g.in
	for j := range in {
		in[j] = false
	}
	in[ba], in[bb] = true, true
	total := bs
	for size := 2; size < g.k; size++ {
		pick, pickAdd, pickOut := -1, 0, false
		for j := range n {
			if in[j] {
				continue
			}
			add := 0
			for c := range n {
				if in[c] {
					add += g.m.Score(g.free[c], g.free[j])
				}
			}
			// At equal score, a GPU on a NUMA node the set already uses.
			out := g.m.HasNUMA() && mask&g.numaBit(j) == 0
			if pick < 0 || add > pickAdd || add == pickAdd && (!out && pickOut || out == pickOut && g.row[j] < g.row[pick]) {
				pick, pickAdd, pickOut = j, add, out
			}
		}
		in[pick] = true
		mask |= g.numaBit(pick)
		total += pickAdd
	}
	for j := range n {
		if in[j] {
			g.best = append(g.best, j)
		}
	}
	g.bestScore = total
}

// idealScore is the best SetScore that k GPUs of m can reach on an empty
// node: the denominator of the score in a Start's Why. It is cached per
// matrix and size for the pass.
func (g *gpuPicker) idealScore(m *topology.Matrix, k int) int {
	key := idealKey{m, k}
	if s, ok := g.ideal[key]; ok {
		return s
	}
	if g.ideal == nil {
		g.ideal = map[idealKey]int{}
	}
	n := m.N()
	s := 0
	if k >= 2 && k <= n {
		g.all = resize(g.all, n)
		for i := range g.all {
			g.all[i] = i
		}
		_, s = g.pick(m, g.all, k)
	}
	g.ideal[key] = s
	return s
}

// removeTaken deletes the ascending indices taken from the ascending
// free list in place and returns the shortened list.
func removeTaken(free, taken []int) []int {
	out, t := free[:0], 0
	for _, x := range free {
		if t < len(taken) && taken[t] == x {
			t++
			continue
		}
		out = append(out, x)
	}
	return out
}

// combos is C(n, k), saturated just above exactCombos.
func combos(n, k int) int {
	if k < 0 || k > n {
		return 0
	}
	k = min(k, n-k)
	c := 1
	for i := 1; i <= k; i++ {
		c = c * (n - k + i) / i
		if c > exactCombos {
			return exactCombos + 1
		}
	}
	return c
}

// formatRanges prints ascending indices compactly: "0-3", "0,2,5-6".
func formatRanges(idx []int) string {
	var b strings.Builder
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(idx[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(idx[j]))
		}
		i = j + 1
	}
	return b.String()
}

func resize(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	return s[:n]
}

func resizeBool(s []bool, n int) []bool {
	if cap(s) < n {
		return make([]bool, n)
	}
	return s[:n]
}

// takeLinked takes gpus GPUs from node n by link score (gpuPicker),
// removes them from the node's free list and adds their score to the
// job's totals for Why.
func (p *pass) takeLinked(n *NodeState, gpus int, free []int) []int {
	m := n.Info.Matrix
	var idx []int
	score := 0
	if gpus >= len(free) {
		idx = slices.Clone(free[:gpus])
		score = m.SetScore(idx)
	} else {
		idx, score = p.gpus.pick(m, free, gpus)
	}
	n.FreeGPUs = removeTaken(n.FreeGPUs, idx)
	if gpus >= 2 {
		ideal := p.gpus.idealScore(m, gpus)
		p.linkScore += score
		p.linkIdeal += ideal
		p.linkNodes++
		p.gpuWhy = fmt.Sprintf("%s: GPUs %s, link score %d/%d", n.Info.Name, formatRanges(idx), score, ideal)
	} else {
		p.gpuWhy = fmt.Sprintf("%s: GPU %d, the least linked free GPU", n.Info.Name, idx[0])
	}
	if numa := m.NUMANodes(idx); len(numa) > 0 {
		p.gpuWhy += ", NUMA " + formatRanges(numa)
		p.numaNodes = max(p.numaNodes, len(numa))
	}
	return idx
}

// islandIDs maps each GPU index of the node to its NVLink island
// (computed on first use in a pass; nil without a matrix).
func (n *NodeState) islandIDs() []int {
	if n.island == nil && n.Info.Matrix != nil {
		n.island = make([]int, n.Info.Matrix.N())
		for id, isl := range n.Info.Matrix.Islands() {
			for _, g := range isl {
				n.island[g] = id
			}
		}
	}
	return n.island
}

// bestIsland returns the free GPUs (ascending) of the NVLink island that
// holds k of them with the fewest to spare (best fit), or nil.
func (n *NodeState) bestIsland(k int) []int {
	ids := n.islandIDs()
	if ids == nil {
		return nil
	}
	count := map[int]int{}
	for _, g := range n.FreeGPUs {
		if g < len(ids) {
			count[ids[g]]++
		}
	}
	best, bestFree := -1, 0
	for id, c := range count {
		if c >= k && (best < 0 || c < bestFree || c == bestFree && id < best) {
			best, bestFree = id, c
		}
	}
	if best < 0 {
		return nil
	}
	out := make([]int, 0, bestFree)
	for _, g := range n.FreeGPUs {
		if g < len(ids) && ids[g] == best {
			out = append(out, g)
		}
	}
	return out
}
