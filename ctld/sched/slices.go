package sched

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tide-hpc/tide/ctld/api"
)

// GPU slices. A GPU is free, whole-allocated, or shared by slices; a
// slice commits memory and/or compute on one shared GPU. The caps of a
// shared GPU are its memory × the partition's memory ratio and 100% ×
// its compute ratio, so that with ratio 1.0 slices never promise more
// than the card has. Placement, in order:
//
//  1. whole-GPU requests take free GPUs only, never a shared one;
//  2. a slice goes onto the already-shared GPU with the least capacity
//     left that still fits it (best fit), so free GPUs stay whole for
//     training jobs;
//  3. only when no shared GPU fits does it take a free GPU: the least
//     linked one with a link matrix (NVLink sets stay whole), else the
//     lowest index;
//  4. the slices of one job on one node go on different GPUs.
//
// Nodes are ordered for slice jobs by how many of the slot's slices
// their shared GPUs can take, before the usual best-fit keys. With a
// target workload (fgd.go), the default puts one key before all of
// these, for the node and for each slice's GPU: the least growth of the
// workload's fragmentation; rules 1 and 4 hold all the same.

// GPUMemUnknown is NodeInfo.GPUMemMB for a node whose GPU memory is not
// known yet (declared, not registered): submit-time feasibility lets any
// slice fit there rather than refuse jobs before nodes come up.
const GPUMemUnknown int64 = -1

// SharedGPU is one GPU held by slices and what they commit on it.
type SharedGPU struct {
	Index      int
	MemMB      int64
	ComputePct int
	// Slices counts the slices on the GPU.
	Slices int
}

// ratioOr1 reads an unset (0 or negative) ratio as 1.0.
func ratioOr1(r float64) float64 {
	if r <= 0 {
		return 1
	}
	return r
}

// sliceCaps is what the slices of one GPU of node info may commit in
// total for request r: memory × ratio and 100% × ratio, rounded down.
func (r *Request) sliceCaps(info *NodeInfo) (memMB int64, pct int) {
	switch {
	case info.GPUMemMB == GPUMemUnknown:
		memMB = math.MaxInt64
	case info.GPUMemMB > 0:
		memMB = int64(float64(info.GPUMemMB) * ratioOr1(r.MemRatio))
	}
	return memMB, int(100 * ratioOr1(r.ComputeRatio))
}

// sliceFits reports whether one more slice of s fits on a GPU that
// already commits mem and pct, under the caps.
func sliceFits(s *Slot, mem int64, pct int, memCap int64, pctCap int) bool {
	return s.GPUMemMB <= memCap-mem && s.GPUComputePct <= pctCap-pct
}

// checkSlices is the GPU filter for a sliced slot: the node needs
// s.GPUs different GPUs that can each take one slice, free ones or
// shared ones with room. The detail says which limit turned it away.
func checkSlices(r *Request, s *Slot, n *NodeState) api.DetailCode {
	if s.GPUs == 0 {
		return ""
	}
	if len(n.FreeGPUs)+len(n.Shared) < s.GPUs {
		return api.DetailInsufficientGPU
	}
	memCap, pctCap := r.sliceCaps(n.Info)
	free := len(n.FreeGPUs)
	if !sliceFits(s, 0, 0, memCap, pctCap) {
		// The slice fits no GPU of this node, even an empty one.
		free = 0
	}
	both, memOK := free, free
	for k := range n.Shared {
		sh := &n.Shared[k]
		fm := s.GPUMemMB <= memCap-sh.MemMB
		if fm {
			memOK++
		}
		if fm && s.GPUComputePct <= pctCap-sh.ComputePct {
			both++
		}
	}
	switch {
	case both >= s.GPUs:
		return ""
	case memOK < s.GPUs:
		return api.DetailInsufficientGPUMem
	}
	return api.DetailInsufficientGPUCompute
}

// sharedFit counts the node's shared GPUs that can take one slice of s,
// at most s.GPUs: the first key of the node order for slice jobs, so
// that they fill shared GPUs before they break a free one.
func (p *pass) sharedFit(i int, s *Slot) int {
	n := &p.nodes[i]
	if len(n.Shared) == 0 {
		return 0
	}
	memCap, pctCap := p.req.sliceCaps(n.Info)
	c := 0
	for k := range n.Shared {
		if sliceFits(s, n.Shared[k].MemMB, n.Shared[k].ComputePct, memCap, pctCap) {
			if c++; c >= s.GPUs {
				break
			}
		}
	}
	return c
}

// betterShared reports whether shared GPU a is a better fit than b for
// slice s: less capacity left after the slice in the dimension the slice
// asks for most (memory when it asks for memory), then in the other,
// then the lower index.
func betterShared(s *Slot, a, b *SharedGPU, memCap int64, pctCap int) bool {
	ma, mb := memCap-a.MemMB, memCap-b.MemMB
	ca, cb := pctCap-a.ComputePct, pctCap-b.ComputePct
	var c int
	if s.GPUMemMB > 0 {
		c = cmp.Or(cmp.Compare(ma, mb), cmp.Compare(ca, cb))
	} else {
		c = cmp.Or(cmp.Compare(ca, cb), cmp.Compare(ma, mb))
	}
	if c != 0 {
		return c < 0
	}
	return a.Index < b.Index
}

// takeSlices places the s.GPUs slices of slot s on node n (which passed
// checkSlices) and returns their GPU indices in ascending order. Each
// slice goes on the GPU the workload's fragmentation chooses (fgd.go),
// or without one on the best-fitting shared GPU the job does not use
// yet, else on a free GPU (least linked with a matrix, else the
// lowest), which becomes shared.
func (p *pass) takeSlices(n *NodeState, r *Request, s *Slot) []int {
	memCap, pctCap := r.sliceCaps(n.Info)
	out := make([]int, 0, s.GPUs)
	onShared, opened := 0, 0
	// With a workload to measure, the fragmentation decides each
	// slice's GPU (fgd.go); best fit (or first fit) otherwise.
	picks := p.fgdSlices(n, r, s)
	for len(out) < s.GPUs {
		if len(picks) > 0 {
			// FGD chose each slice's GPU: a position in n.Shared, or -1
			// for a free one (which the free-GPU rule below picks).
			k := picks[0]
			picks = picks[1:]
			if k >= 0 {
				out = append(out, addSlice(&n.Shared[k], s))
				onShared++
				continue
			}
			out = append(out, p.openFree(n, s))
			opened++
			continue
		}
		if p.cfg.SliceFit == SliceFirstFit {
			g, opened1 := firstFitGPU(n, s, out, memCap, pctCap)
			out = append(out, g)
			if opened1 {
				opened++
			} else {
				onShared++
			}
			continue
		}
		best := -1
		for k := range n.Shared {
			sh := &n.Shared[k]
			if slices.Contains(out, sh.Index) || !sliceFits(s, sh.MemMB, sh.ComputePct, memCap, pctCap) {
				continue
			}
			if best < 0 || betterShared(s, sh, &n.Shared[best], memCap, pctCap) {
				best = k
			}
		}
		if best >= 0 {
			out = append(out, addSlice(&n.Shared[best], s))
			onShared++
			continue
		}
		out = append(out, p.openFree(n, s))
		opened++
	}
	slices.Sort(out)
	p.gpuWhy = fmt.Sprintf("%s: %s on GPU %s (%d on shared GPUs, %d newly shared)",
		n.Info.Name, sliceText(s), formatRanges(out), onShared, opened)
	if len(out) == 1 {
		for k := range n.Shared {
			if sh := &n.Shared[k]; sh.Index == out[0] {
				p.gpuWhy += ", " + committedText(sh, memCap, pctCap)
			}
		}
	}
	return out
}

// openFree shares a free GPU of n for one slice of s and returns its
// index: the least linked free GPU with a link matrix (NVLink sets stay
// whole), else the lowest.
func (p *pass) openFree(n *NodeState, s *Slot) int {
	g := n.FreeGPUs[0]
	if m := n.Info.Matrix; m != nil && len(n.FreeGPUs) > 1 {
		idx, _ := p.gpus.pick(m, n.FreeGPUs, 1)
		g = idx[0]
	}
	n.FreeGPUs = removeTaken(n.FreeGPUs, []int{g})
	n.Shared = append(n.Shared, SharedGPU{Index: g, MemMB: s.GPUMemMB, ComputePct: s.GPUComputePct, Slices: 1})
	return g
}

// firstFitGPU places one slice of s on n's lowest-indexed GPU that
// takes it, shared or free (checkSlices made sure there is one), and
// reports whether that GPU was free before.
func firstFitGPU(n *NodeState, s *Slot, used []int, memCap int64, pctCap int) (int, bool) {
	sh := -1
	for k := range n.Shared {
		c := &n.Shared[k]
		if !slices.Contains(used, c.Index) && sliceFits(s, c.MemMB, c.ComputePct, memCap, pctCap) &&
			(sh < 0 || c.Index < n.Shared[sh].Index) {
			sh = k
		}
	}
	if sh >= 0 && (len(n.FreeGPUs) == 0 || n.Shared[sh].Index < n.FreeGPUs[0]) {
		c := &n.Shared[sh]
		c.MemMB += s.GPUMemMB
		c.ComputePct += s.GPUComputePct
		c.Slices++
		return c.Index, false
	}
	g := n.FreeGPUs[0]
	n.FreeGPUs = n.FreeGPUs[1:]
	n.Shared = append(n.Shared, SharedGPU{Index: g, MemMB: s.GPUMemMB, ComputePct: s.GPUComputePct, Slices: 1})
	return g, true
}

// sliceText prints one slice: "slice 8G", "slice 8G/25%", "slice 10%".
func sliceText(s *Slot) string {
	t := "slice "
	if s.GPUMemMB > 0 {
		t += api.FormatMemMB(s.GPUMemMB)
		if s.GPUComputePct > 0 {
			t += "/"
		}
	}
	if s.GPUComputePct > 0 {
		t += strconv.Itoa(s.GPUComputePct) + "%"
	}
	return t
}

// committedText says what a shared GPU commits against its caps:
// "3 slices, 24G/80G, 30%/100% committed".
func committedText(sh *SharedGPU, memCap int64, pctCap int) string {
	t := strconv.Itoa(sh.Slices) + " slices"
	if sh.MemMB > 0 && memCap < math.MaxInt64 {
		t += ", " + api.FormatMemMB(sh.MemMB) + "/" + api.FormatMemMB(memCap)
	}
	if sh.ComputePct > 0 {
		t += ", " + strconv.Itoa(sh.ComputePct) + "%/" + strconv.Itoa(pctCap) + "%"
	}
	return t + " committed"
}

// slicingRefused is the BadConstraints detail for a sliced request in a
// partition that does not allow slices ("" when allowed).
func slicingRefused(r *Request, part *PartitionInfo) string {
	if r.Sliced && part.NoGPUSlicing {
		return fmt.Sprintf("partition %s does not allow GPU slices (gpu_slicing: false)", part.Name)
	}
	return ""
}

// explainSlice says why a slice never fits the partition's GPUs, or ""
// when some eligible node could hold it empty. maxMem and maxPct are the
// largest per-GPU caps over the eligible nodes.
func explainSlice(s *Slot, part string, maxMem int64, maxPct int) string {
	switch {
	case s.GPUMemMB > maxMem:
		return fmt.Sprintf("GPU slice of %s memory requested, GPUs of partition %s take at most %s (GPU memory × gpu_mem_oversubscribe)",
			api.FormatMemMB(s.GPUMemMB), part, api.FormatMemMB(maxMem))
	case s.GPUComputePct > maxPct:
		return fmt.Sprintf("GPU slice of %d%% compute requested, GPUs of partition %s take at most %d%%",
			s.GPUComputePct, part, maxPct)
	}
	return ""
}

// addSlice commits slot s's slice to the shared GPU sh and returns the
// GPU's index.
func addSlice(sh *SharedGPU, s *Slot) int {
	sh.MemMB += s.GPUMemMB
	sh.ComputePct += s.GPUComputePct
	sh.Slices++
	return sh.Index
}
