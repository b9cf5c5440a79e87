package sim

import (
	"math"
	"slices"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
)

// GPU slices in the replay. A trace job asking for a fraction of one GPU
// (gpu_share < 1, as in the Alibaba 2023 trace's gpu_milli) becomes a
// compute slice (--gpu-compute) of that many percent, so that the
// replay runs the core's slice placement (best fit onto shared GPUs)
// instead of rounding the job up to a whole GPU. Its CPU and memory ask
// shrink with it.

// slicePct is the compute percent of a trace job's GPU share, 0 when the
// job asks for whole GPUs (or the partition refuses slices).
func slicePct(gpus int, share float64, part *sched.PartitionInfo) int {
	if gpus != 1 || share <= 0 || share >= 1 || (part != nil && part.NoGPUSlicing) {
		return 0
	}
	return min(99, max(1, int(math.Round(share*100))))
}

// sliceSpec turns a one-GPU request into a compute slice of pct percent.
func sliceSpec(s *api.JobSpec, pct int) {
	s.GPUComputePct = pct
	s.CPUsPerGPU = max(1, s.CPUsPerGPU*pct/100)
	s.MemPerGPUMB = max(1, s.MemPerGPUMB*int64(pct)/100)
}

// workload is the trace's mix of GPU request shapes, for the
// fragmentation measure of the FGD paper (Weng et al., ATC '23): the
// free GPU capacity of a node that a job drawn from the mix cannot use,
// in expectation. A node with F free GPUs and shared GPUs with r_k
// percent of compute left wastes, for a whole-GPU shape needing g GPUs
// per node, all F when F < g plus every r_k (whole jobs never share);
// for a slice shape of c percent, each r_k < c. Only the GPU dimension
// counts (CPU and memory are left out).
type workload struct {
	// whole lists the whole-GPU per-node needs with their probability;
	// pWhole sums them.
	whole  []shapeP
	pWhole float64
	// slicePct is the sorted slice sizes; above[i] is the probability of
	// a slice shape of at least slicePct[i] percent.
	slicePct []int
	above    []float64
}

type shapeP struct {
	gpus int
	p    float64
}

// newWorkload builds the mix from per-node needs: whole GPU counts and
// slice percents, one entry per job.
func newWorkload(whole, slice []int) workload {
	var w workload
	total := float64(len(whole) + len(slice))
	if total == 0 {
		return w
	}
	counts := map[int]int{}
	for _, g := range whole {
		counts[g]++
	}
	for g, c := range counts {
		w.whole = append(w.whole, shapeP{g, float64(c) / total})
	}
	slices.SortFunc(w.whole, func(a, b shapeP) int { return a.gpus - b.gpus })
	for _, s := range w.whole {
		w.pWhole += s.p
	}
	sorted := slices.Clone(slice)
	slices.Sort(sorted)
	for i, c := range sorted {
		if i == 0 || c != sorted[i-1] {
			w.slicePct = append(w.slicePct, c)
			w.above = append(w.above, float64(len(sorted)-i)/total)
		}
	}
	return w
}

// pSliceAbove is the probability of a slice shape larger than r percent.
func (w *workload) pSliceAbove(r int) float64 {
	i, _ := slices.BinarySearch(w.slicePct, r+1)
	if i >= len(w.above) {
		return 0
	}
	return w.above[i]
}

// nodeFrag is node n's expected unusable free GPU capacity, in GPUs.
func (w *workload) nodeFrag(n *sched.NodeInfo, pctCap int) float64 {
	f := 0.0
	free := len(n.FreeGPUs)
	for _, s := range w.whole {
		if free < s.gpus {
			f += s.p * float64(free)
		}
	}
	for k := range n.Shared {
		r := pctCap - n.Shared[k].ComputePct
		if r <= 0 {
			continue
		}
		f += float64(r) / 100 * (w.pWhole + w.pSliceAbove(r))
	}
	return f
}
