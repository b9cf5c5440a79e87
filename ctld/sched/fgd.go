package sched

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// Fragmentation-aware placement: the measure of FGD, fragmentation
// gradient descent (Weng et al., "Beware of Fragmentation: Scheduling
// GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX
// ATC '23), used by the default placement (SliceFragAware) and, alone,
// by SliceFGD.
//
// The measure. Given a target workload, the popularity p_m of each task
// shape m (per-node GPUs, slice size, CPUs, memory, GPU model), the
// fragmentation of node n for shape m, F_n(m), is the node's unallocated
// GPU capacity that m cannot use: all of it when m does not fit on the
// node at all (too few GPUs that can take one of its GPUs or slices, too
// few free CPUs or memory, another GPU model); otherwise the free share
// of every GPU that cannot take one unit of m (a shared GPU with less
// room than m's slice; for a whole-GPU shape, every shared GPU, since
// whole GPUs never share). F_n = Σ p_m F_n(m), in GPUs. A GPU's free
// share is 1 when free, else the smaller of the compute and (when the
// GPU memory is known) the memory left under the partition's caps,
// divided by the caps.
//
// The placement. For each job, among the nodes that pass the filters,
// the node where F_n grows least when the job lands there comes first
// (the paper places every pod this way, whatever it asks, so whole-GPU
// and CPU-only jobs are placed by it too); on the node, each slice goes
// on the GPU, shared or free, that makes F_n grow least. Ties fall back
// to best fit (betterFit's other keys; on the node, shared GPUs before a
// free one, then the least room left), so that a workload without GPU
// shapes leaves best fit's choices as they were. SliceFragAware keeps
// Tide's other rules on top (the last free node of a leaf is spared for
// whole-node jobs, holes.go); SliceFGD is the paper's heuristic alone.
// Neither applies in spread partitions, which want the emptiest nodes.
//
// Why it is the default. Best fit (SliceBestFit) orders nodes by their
// free GPUs and shared GPUs with room, blind to how well a slice fits
// the GPU it will take there and to the CPUs a job leaves next to free
// GPUs. In the simulator's packing experiment on the Alibaba 2023 trace
// that leaves more GPUs unallocated at the first failure than FGD on
// larger clusters (600 × 8 GPUs: 3.87 % against 3.68 %) and on the
// trace's own heterogeneous inventory (5.92 % against 5.67 %); with the
// measure as its first key the default matches FGD on every cluster
// tried (docs/simulator.md, "FGD and Tide's default placement").
//
// The workload. A caller that knows the workload ahead (the simulator's
// packing experiment computes it from the whole trace, as the paper
// does) passes it in Snapshot.Workload. Otherwise the pass derives it
// from the running jobs the snapshot lists (Snapshot.Running): the
// per-node shape of each (its smallest node allocation), each job
// counting once. That is the mix the cluster has been asked to hold,
// and it is already in the pure core's input. Running jobs hold
// resources, so their number follows the cluster's size; only slices
// can make it large, and past fgdSample jobs the list is read with a
// stride. The pending jobs are left out on purpose: a job's placement
// must not depend on the jobs queued behind it, or a pass over the
// first k jobs would place them differently from the pass over all of
// them (Plan.Closed's promise, which the simulator's prefix passes rely
// on), and a job submitted later could move the nodes a reservation
// waits for. Like the paper (its typical pods), the pass keeps the most
// popular shapes that cover 95 % of the jobs, at most fgdMaxShapes of
// them, and renormalizes: the cost of one evaluation is linear in the
// shapes. Without any shape with GPUs the placement is best fit's.
//
// Cost. The workload is built once per pass, on first use. Per node the
// pass keeps F_n and, per shape, the GPUs that can take a unit of it and
// the free share of those that cannot, valid until the node's state
// changes (checked on every use, so that backfill's narrowed views and
// preemption's overlay are seen); with them, the growth of F_n for one
// placement costs one step per shape (per GPU tried, for slices). The
// growth for a slot is kept too, for the node's last fgdDeltaWays slot
// shapes: the jobs of one shape then measure each unchanged node once.

// WorkloadShape is one task shape of a target workload and its
// popularity: what one job asks on one node.
type WorkloadShape struct {
	// GPUs is the GPUs the shape needs on one node: whole GPUs, or, with
	// a slice size (GPUMemMB or GPUComputePct), that many slices on
	// different GPUs. Shapes without GPUs are ignored: every placement
	// of a job changes their fragmentation alike.
	GPUs          int
	GPUMemMB      int64
	GPUComputePct int
	// CPUs and MemMB are the node's CPUs and memory it needs.
	CPUs  int
	MemMB int64
	// GPUModel is the GPU model it asks for ("" = any).
	GPUModel string
	// Weight is its popularity on any scale (a job count); shapes with
	// no positive weight are ignored.
	Weight float64
}

// JobShape is the per-node shape of a job spec with weight 1: the need
// of its largest node (nodes split a GPU total as the pass does when
// spec spans nodes and maxNodeGPUs > 0 bounds a node's GPUs), with
// defMemPerCPUMB as Config.DefMemPerCPUMB.
func JobShape(spec *api.JobSpec, maxNodeGPUs int, defMemPerCPUMB int64) WorkloadShape {
	n := spec.ReqNodes()
	if maxNodeGPUs > 0 && spec.GPUs > maxNodeGPUs && spansNodes(spec) {
		n = max(n, (spec.GPUs+maxNodeGPUs-1)/maxNodeGPUs)
	}
	s := largestSlot(spec, n, defMemPerCPUMB)
	return WorkloadShape{GPUs: s.GPUs, GPUMemMB: s.GPUMemMB, GPUComputePct: s.GPUComputePct,
		CPUs: s.CPUs, MemMB: s.MemMB, GPUModel: strings.ToLower(spec.GPUType), Weight: 1}
}

// Bounds of the pass's workload (see above).
const (
	fgdCoverage  = 0.95
	fgdMaxShapes = 64
	fgdSample    = 4096
	// fgdEpsilon is the growth difference below which two placements
	// tie (sums of the same terms in another order differ by less).
	fgdEpsilon = 1e-9
	// fgdNoModel is a shape's GPU count on a node of another model: no
	// count of GPUs reaches it.
	fgdNoModel = math.MinInt32 / 2
)

// fgdShape is one shape of the pass's workload.
type fgdShape struct {
	slot  Slot // GPUs, CPUs, MemMB and the slice size
	model string
	p     float64
}

// fgdKey identifies a shape while the workload is counted.
type fgdKey struct {
	gpus, pct, cpus int
	gpuMem, mem     int64
	model           string
}

// fgdNode is the pass's measure of one node, for the state it was
// computed in.
type fgdNode struct {
	ok bool
	// The node state and caps the measure is for.
	cpus   int
	mem    int64
	free   int
	shared []SharedGPU
	memCap int64
	pctCap int
	// u is the unallocated GPU capacity and f is F_n, in GPUs.
	u, f float64
	// non and hosts are the node's rows of fgdState.nonHost and hosts.
	non   []float64
	hosts []int32
	// deltas holds the growth of f for the last placements measured
	// (n of them, next is the one to replace).
	deltas  [fgdDeltaWays]fgdDelta
	n, next int
}

// fgdDeltaWays is how many placements' growths a node keeps: a queue's
// jobs ask for a few shapes, and the growth for one of them holds, for
// every job of that shape, until the node changes.
const fgdDeltaWays = 16

// fgdDelta is the growth of F_n for one placement, by the id of its
// placement key (fgdState.keys).
type fgdDelta struct {
	key   int32
	delta float64
}

// fgdPlacement is what the growth of F_n depends on besides the node: a
// slot (its Tasks cleared, they change nothing) of an exclusive job or
// not.
type fgdPlacement struct {
	slot      Slot
	exclusive bool
}

// fgdState is the FGD part of a pass.
type fgdState struct {
	snap   *Snapshot
	built  bool
	shapes []fgdShape
	nodes  []fgdNode
	// nonHost[i*S+m] is the free share of node i's GPUs that cannot
	// take one unit of shape m, hosts[i*S+m] how many can (fgdNoModel on
	// a node of another model).
	nonHost []float64
	hosts   []int32
	// Scratch of plan, and a measure of the node a job's slices go to.
	wNon   []float64
	wHosts []int32
	wGPUs  []SharedGPU
	wUsed  []bool
	picks  []int
	commit fgdNode
	// keys numbers the placements measured in the pass; key is the
	// current job's (for the job stamped keyStamp).
	keys     map[fgdPlacement]int32
	key      int32
	keyStamp uint32
}

// fgdGPU is one GPU of a plan: shared (with what it commits) or free.
type fgdGPU struct {
	pct  int
	mem  int64
	free bool
}

// build collects the pass's workload on first use.
func (f *fgdState) build(p *pass) {
	if f.built {
		return
	}
	f.built = true
	if f.snap == nil {
		return
	}
	counts := map[fgdKey]float64{}
	add := func(w WorkloadShape) {
		if w.GPUs <= 0 || !(w.Weight > 0) || math.IsInf(w.Weight, 1) {
			return
		}
		counts[fgdKey{gpus: w.GPUs, pct: w.GPUComputePct, cpus: w.CPUs, gpuMem: w.GPUMemMB, mem: w.MemMB,
			model: strings.ToLower(w.GPUModel)}] += w.Weight
	}
	if len(f.snap.Workload) > 0 {
		for _, w := range f.snap.Workload {
			add(w)
		}
	} else {
		running := f.snap.Running
		for k, step := 0, sampleStep(len(running)); k < len(running); k += step {
			// A running job's smallest node allocation is its shape.
			if alloc := running[k].Alloc; len(alloc) > 0 {
				a := &alloc[len(alloc)-1]
				add(WorkloadShape{GPUs: len(a.GPUs), GPUMemMB: a.GPUMemMB, GPUComputePct: a.GPUComputePct,
					CPUs: a.CPUs, MemMB: a.MemoryMB, Weight: 1})
			}
		}
	}
	if len(counts) == 0 {
		return
	}
	keys := make([]fgdKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	// Most popular first; the key orders equals, so that map order
	// decides nothing (the sums below are taken in this order too).
	slices.SortFunc(keys, func(a, b fgdKey) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.gpus, b.gpus), cmp.Compare(a.pct, b.pct), cmp.Compare(a.gpuMem, b.gpuMem),
			cmp.Compare(a.cpus, b.cpus), cmp.Compare(a.mem, b.mem), cmp.Compare(a.model, b.model))
	})
	total := 0.0
	for _, k := range keys {
		total += counts[k]
	}
	kept := 0.0
	for _, k := range keys {
		if len(f.shapes) == fgdMaxShapes || kept >= fgdCoverage*total {
			break
		}
		kept += counts[k]
		f.shapes = append(f.shapes, fgdShape{
			slot:  Slot{GPUs: k.gpus, CPUs: k.cpus, MemMB: k.mem, GPUMemMB: k.gpuMem, GPUComputePct: k.pct},
			model: k.model,
			p:     counts[k],
		})
	}
	for m := range f.shapes {
		f.shapes[m].p /= kept
	}
	s := len(f.shapes)
	f.nodes = make([]fgdNode, len(p.nodes))
	f.nonHost = make([]float64, len(p.nodes)*s)
	f.hosts = make([]int32, len(p.nodes)*s)
	for i := range f.nodes {
		f.nodes[i].non = f.nonHost[i*s : (i+1)*s : (i+1)*s]
		f.nodes[i].hosts = f.hosts[i*s : (i+1)*s : (i+1)*s]
	}
	f.wNon, f.wHosts = make([]float64, s), make([]int32, s)
	f.commit.non, f.commit.hosts = make([]float64, s), make([]int32, s)
}

// sampleStep is the stride that reads at most fgdSample of n items,
// evenly through them.
func sampleStep(n int) int {
	return max(1, (n+fgdSample-1)/fgdSample)
}

// fgdActive reports whether the current job is placed by the workload's
// fragmentation: the rule measures it, the partition packs, and the
// workload has GPU shapes.
func (p *pass) fgdActive() bool {
	if p.cfg.SliceFit != SliceFragAware && p.cfg.SliceFit != SliceFGD {
		return false
	}
	if !p.fgd.built {
		p.fgd.build(p)
	}
	return len(p.fgd.shapes) > 0 && !p.spread()
}

// freeShare is the free share of a GPU committing pct and mem under the
// caps (see above).
func freeShare(pct int, mem int64, memCap int64, pctCap int) float64 {
	left := 0.0
	if pctCap > 0 {
		left = float64(max(pctCap-pct, 0)) / float64(pctCap)
	}
	if memCap > 0 && memCap < math.MaxInt64 {
		left = min(left, float64(max(memCap-mem, 0))/float64(memCap))
	}
	return left
}

// takes reports whether GPU g can take one unit of shape m.
func (m *fgdShape) takes(g fgdGPU, memCap int64, pctCap int) bool {
	if !m.slot.Sliced() {
		return g.free
	}
	return sliceFits(&m.slot, g.mem, g.pct, memCap, pctCap)
}

// fits reports whether shape m fits a node with cpus, mem and hosts GPUs
// that take a unit of it.
func (m *fgdShape) fits(cpus int, mem int64, hosts int32) bool {
	return hosts >= int32(m.slot.GPUs) && cpus >= m.slot.CPUs && mem >= m.slot.MemMB
}

// node returns node i's measure, taken again when its state or the caps
// changed since it was taken.
func (f *fgdState) node(p *pass, i int, memCap int64, pctCap int) *fgdNode {
	n := &p.nodes[i]
	fn := &f.nodes[i]
	if fn.ok && fn.cpus == n.FreeCPUs && fn.mem == n.FreeMemMB && fn.free == len(n.FreeGPUs) &&
		fn.memCap == memCap && fn.pctCap == pctCap && slices.Equal(fn.shared, n.Shared) {
		return fn
	}
	f.measure(n, fn, memCap, pctCap)
	return fn
}

// measure takes node n's measure into fn (whose rows it fills).
func (f *fgdState) measure(n *NodeState, fn *fgdNode, memCap int64, pctCap int) {
	fn.ok, fn.n, fn.next = true, 0, 0
	fn.cpus, fn.mem, fn.free = n.FreeCPUs, n.FreeMemMB, len(n.FreeGPUs)
	fn.memCap, fn.pctCap = memCap, pctCap
	fn.shared = append(fn.shared[:0], n.Shared...)
	fn.u = float64(fn.free)
	for k := range n.Shared {
		fn.u += freeShare(n.Shared[k].ComputePct, n.Shared[k].MemMB, memCap, pctCap)
	}
	fn.f = 0
	for m := range f.shapes {
		sh := &f.shapes[m]
		var h int32
		nh := 0.0
		if sh.takes(fgdGPU{free: true}, memCap, pctCap) {
			h = int32(fn.free)
		} else {
			nh = float64(fn.free)
		}
		for k := range n.Shared {
			g := fgdGPU{pct: n.Shared[k].ComputePct, mem: n.Shared[k].MemMB}
			if sh.takes(g, memCap, pctCap) {
				h++
			} else {
				nh += freeShare(g.pct, g.mem, memCap, pctCap)
			}
		}
		if sh.model != "" && !strings.EqualFold(sh.model, n.Info.GPUModel) {
			h = fgdNoModel
		}
		fn.non[m], fn.hosts[m] = nh, h
		fn.f += sh.p * f.fragOf(m, fn.cpus, fn.mem, h, nh, fn.u)
	}
}

// fragOf is F_n(m) for the node state given.
func (f *fgdState) fragOf(m, cpus int, mem int64, hosts int32, nonHost, u float64) float64 {
	if f.shapes[m].fits(cpus, mem, hosts) {
		return nonHost
	}
	return u
}

// fgdDelta is how much F_n of node i grows when the current job's
// smallest slot lands there (kept per node state and slot).
func (p *pass) fgdDelta(i int) float64 {
	f := &p.fgd
	r := &p.req
	s := &r.Slots[len(r.Slots)-1]
	if f.keyStamp != r.stamp || f.keys == nil {
		pl := fgdPlacement{slot: *s, exclusive: r.Exclusive}
		pl.slot.Tasks = 0
		if f.keys == nil {
			f.keys = map[fgdPlacement]int32{}
		}
		k, ok := f.keys[pl]
		if !ok {
			k = int32(len(f.keys))
			f.keys[pl] = k
		}
		f.key, f.keyStamp = k, r.stamp
	}
	memCap, pctCap := r.sliceCaps(p.nodes[i].Info)
	fn := f.node(p, i, memCap, pctCap)
	for k := range fn.n {
		if d := &fn.deltas[k]; d.key == f.key {
			return d.delta
		}
	}
	d := fgdDelta{key: f.key, delta: f.plan(&p.nodes[i], fn, r, s, false)}
	fn.deltas[fn.next] = d
	fn.next = (fn.next + 1) % fgdDeltaWays
	if fn.n < fgdDeltaWays {
		fn.n++
	}
	return d.delta
}

// fgdCompare orders nodes a and b by the growth of F_n (less first); 0
// when they tie or the job is not placed by fragmentation (fgdActive).
func (p *pass) fgdCompare(a, b int) int {
	if len(p.req.Slots) == 0 || !p.fgdActive() {
		return 0
	}
	da, db := p.fgdDelta(a), p.fgdDelta(b)
	switch {
	case da < db-fgdEpsilon:
		return -1
	case db < da-fgdEpsilon:
		return 1
	}
	return 0
}

// plan places slot s of request r on node n (measured by fn) and returns
// the growth of F_n. With pick it also leaves in f.picks, per slice, the
// position in n.Shared of the GPU it takes, or -1 for a free GPU; each
// slice takes the GPU that makes F_n grow least, shared GPUs before a
// free one and then by best fit among equals.
func (f *fgdState) plan(n *NodeState, fn *fgdNode, r *Request, s *Slot, pick bool) float64 {
	f.picks = f.picks[:0]
	if r.Exclusive {
		// The job takes the whole node: nothing is left to fragment.
		return -fn.f
	}
	k := len(f.shapes)
	non, hosts := f.wNon[:k], f.wHosts[:k]
	copy(non, fn.non)
	copy(hosts, fn.hosts)
	cpus, mem := fn.cpus-s.CPUs, fn.mem-s.MemMB
	if s.WholeMem {
		mem = 0
	}
	u := fn.u
	if !s.Sliced() {
		// Whole GPUs come off the free ones, which are all alike.
		g := s.GPUs
		u -= float64(g)
		for m := range f.shapes {
			if f.shapes[m].takes(fgdGPU{free: true}, fn.memCap, fn.pctCap) {
				hosts[m] -= int32(g)
			} else {
				non[m] -= float64(g)
			}
		}
		return f.total(cpus, mem, hosts, non, u) - fn.f
	}
	// Slices, one at a time: each on a different GPU.
	f.wGPUs = append(f.wGPUs[:0], n.Shared...)
	f.wUsed = f.wUsed[:0]
	for range f.wGPUs {
		f.wUsed = append(f.wUsed, false)
	}
	free := fn.free
	after := fn.f
	for range s.GPUs {
		best, bestF := -2, 0.0
		var bestU float64
		for c := -1; c < len(f.wGPUs); c++ {
			var g fgdGPU
			if c < 0 {
				if free == 0 {
					continue
				}
				g = fgdGPU{free: true}
			} else {
				if f.wUsed[c] {
					continue
				}
				g = fgdGPU{pct: f.wGPUs[c].ComputePct, mem: f.wGPUs[c].MemMB}
			}
			if !sliceFits(s, g.mem, g.pct, fn.memCap, fn.pctCap) {
				continue
			}
			fa, ua := f.try(g, s, fn, cpus, mem, hosts, non, u)
			better := best == -2 || fa < bestF-fgdEpsilon
			if !better && fa <= bestF+fgdEpsilon {
				// A tie: a shared GPU before a free one, then best fit.
				switch {
				case best < 0:
					better = c >= 0
				case c >= 0:
					better = betterShared(s, &f.wGPUs[c], &f.wGPUs[best], fn.memCap, fn.pctCap)
				}
			}
			if better {
				best, bestF, bestU = c, fa, ua
			}
		}
		if best == -2 {
			// Cannot happen after checkSlices; measure what was placed.
			break
		}
		f.apply(best, s, fn, hosts, non)
		if best < 0 {
			free--
			f.wGPUs = append(f.wGPUs, SharedGPU{Index: -1, MemMB: s.GPUMemMB, ComputePct: s.GPUComputePct, Slices: 1})
			f.wUsed = append(f.wUsed, true)
		} else {
			f.wGPUs[best].MemMB += s.GPUMemMB
			f.wGPUs[best].ComputePct += s.GPUComputePct
			f.wUsed[best] = true
		}
		u, after = bestU, bestF
		if pick {
			f.picks = append(f.picks, best)
		}
	}
	return after - fn.f
}

// try is F_n after one slice of s lands on GPU g, and the unallocated
// capacity then, from the working per-shape counts.
func (f *fgdState) try(g fgdGPU, s *Slot, fn *fgdNode, cpus int, mem int64, hosts []int32, non []float64, u float64) (float64, float64) {
	before := 1.0
	if !g.free {
		before = freeShare(g.pct, g.mem, fn.memCap, fn.pctCap)
	}
	ga := fgdGPU{pct: g.pct + s.GPUComputePct, mem: g.mem + s.GPUMemMB}
	left := freeShare(ga.pct, ga.mem, fn.memCap, fn.pctCap)
	u += left - before
	total := 0.0
	for m := range f.shapes {
		sh := &f.shapes[m]
		h, nh := hosts[m], non[m]
		if sh.takes(g, fn.memCap, fn.pctCap) {
			h--
		} else {
			nh -= before
		}
		if sh.takes(ga, fn.memCap, fn.pctCap) {
			h++
		} else {
			nh += left
		}
		total += sh.p * f.fragOf(m, cpus, mem, h, nh, u)
	}
	return total, u
}

// apply updates the working per-shape counts for one slice of s on the
// plan's GPU c (-1: a free one).
func (f *fgdState) apply(c int, s *Slot, fn *fgdNode, hosts []int32, non []float64) {
	g := fgdGPU{free: true}
	before := 1.0
	if c >= 0 {
		g = fgdGPU{pct: f.wGPUs[c].ComputePct, mem: f.wGPUs[c].MemMB}
		before = freeShare(g.pct, g.mem, fn.memCap, fn.pctCap)
	}
	ga := fgdGPU{pct: g.pct + s.GPUComputePct, mem: g.mem + s.GPUMemMB}
	left := freeShare(ga.pct, ga.mem, fn.memCap, fn.pctCap)
	for m := range f.shapes {
		sh := &f.shapes[m]
		if sh.takes(g, fn.memCap, fn.pctCap) {
			hosts[m]--
		} else {
			non[m] -= before
		}
		if sh.takes(ga, fn.memCap, fn.pctCap) {
			hosts[m]++
		} else {
			non[m] += left
		}
	}
}

// total is F_n for the working counts.
func (f *fgdState) total(cpus int, mem int64, hosts []int32, non []float64, u float64) float64 {
	t := 0.0
	for m := range f.shapes {
		t += f.shapes[m].p * f.fragOf(m, cpus, mem, hosts[m], non[m], u)
	}
	return t
}

// fgdSlices chooses the GPUs of slot s's slices on node n by the
// fragmentation (see plan): positions in n.Shared, -1 for a free GPU. It
// returns nil when the job is not placed by fragmentation (fgdActive):
// best fit or first fit then places them.
func (p *pass) fgdSlices(n *NodeState, r *Request, s *Slot) []int {
	if !p.fgdActive() {
		return nil
	}
	f := &p.fgd
	memCap, pctCap := r.sliceCaps(n.Info)
	f.measure(n, &f.commit, memCap, pctCap)
	f.plan(n, &f.commit, r, s, true)
	return f.picks
}
