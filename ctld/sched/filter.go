package sched

import (
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
)

// DetailReserved is the detail code of a node that a higher-priority
// pending job is waiting for. It never reaches a Decision's Detail: a job
// turned away by it is pending for Priority, whose detail is a constant.
const DetailReserved = api.DetailReservedForPriority

// Filter is one cheap feasibility check in the node-filter chain (Nomad's
// FeasibilityChecker, the k8s Filter plugin). Check returns "" when node n
// can take slot s of request r, else the detail code that the pending
// job's histogram counts. Check must read only its arguments, never the
// snapshot: the empty-partition diagnosis and, later, preemption hand it
// modified copies of a node. It must not keep r, s or n.
type Filter interface {
	// Name identifies the filter in docs and tests.
	Name() string
	// Relevant reports whether the filter can turn any node away for r
	// (k8s's PreFilter "Skip"): the pass leaves irrelevant filters out of
	// the job's chain, so a plain 1-GPU job pays for three checks per
	// node, not nine. It is called once per job, after r.Slots is set.
	Relevant(r *Request) bool
	Check(r *Request, s *Slot, n *NodeState) api.DetailCode
}

// NodeState is the pass's working copy of one node: the snapshot's static
// facts plus free amounts that shrink as the pass places jobs, so that
// later jobs in the pass see what earlier ones took.
type NodeState struct {
	// Info is the snapshot's node; it is read, never written.
	Info *NodeInfo
	// Usable copies Info.Usable so that diagnosis views can bring a node
	// up without touching the snapshot.
	Usable    bool
	FreeCPUs  int
	FreeMemMB int64
	// FreeGPUs holds the free indices in ascending order, owned by the
	// pass; placements take from the front.
	FreeGPUs []int
	// Shared holds the GPUs shared by slices with what they commit,
	// owned by the pass; slices placed in the pass add to it.
	Shared []SharedGPU
	Idle   bool
	// Reserved marks a node that a higher-priority pending job waits for
	// (priority blocking): lower-priority jobs may not take it.
	Reserved bool

	// excluded, required and prev hold the stamp of the last request
	// that excluded, required or previously ran on the node; avoid, of
	// the last whose launch failed on it (Job.LaunchFailNodes).
	excluded, required, prev, avoid uint32
	// island maps GPU index to NVLink island (see islandIDs).
	island []int
}

// Compile-time checks that every filter implements Filter.
var (
	_ Filter = usableFilter{}
	_ Filter = excludeFilter{}
	_ Filter = requestedFilter{}
	_ Filter = gpuModelFilter{}
	_ Filter = featureFilter{}
	_ Filter = tmpDiskFilter{}
	_ Filter = reservedFilter{}
	_ Filter = idleFilter{}
	_ Filter = cpuFilter{}
	_ Filter = memFilter{}
	_ Filter = gpuFilter{}
)

// chain is the ordered node-filter chain of a pass. The first static
// filters depend only on the node's facts and the request, not on free
// amounts: priority blocking reserves the nodes that pass them. active
// holds the filters relevant to the current job, in chain order.
type chain struct {
	filters []Filter
	static  int

	active       []Filter
	activeStatic int
	// mask has bit k set when filters[k] is in active (valid once ready).
	mask  uint64
	ready bool

	// constraints caches parsed --constraint strings for the pass
	// (features.go).
	constraints map[string]constraintEntry
}

// newChain builds the filter chain, cheapest checks first. Membership in
// the job's partition is not a filter: the pass only walks the
// partition's precomputed node list.
func newChain() chain {
	filters := []Filter{
		usableFilter{},    // down, drained or unregistered nodes
		excludeFilter{},   // -x
		requestedFilter{}, // -w names the whole allocation
		gpuModelFilter{},  // --gpus=TYPE:N
		featureFilter{},   // -C/--constraint
		tmpDiskFilter{},   // --tmp
		// --- static filters end here ---
		reservedFilter{}, // held for a higher-priority pending job
		idleFilter{},     // --exclusive
		cpuFilter{},
		memFilter{},
		gpuFilter{},
		nvlinkFilter{}, // --comm=model
	}
	return chain{filters: filters, static: 6, active: make([]Filter, 0, len(filters))}
}

// prepare selects the filters relevant to r; call it once per job after
// r.Slots is set and before check or checkStatic. It also resolves the
// job's --constraint; calling it again for the same job keeps the
// matching-OR alternative chosen.
func (c *chain) prepare(r *Request) {
	c.constraintOf(r)
	// Most jobs of a queue select the same filters as the job before:
	// keep the list then (rebuilding it stores interface values, each
	// with a write barrier while the collector runs).
	var mask uint64
	for k, f := range c.filters {
		if f.Relevant(r) {
			mask |= 1 << k
		}
	}
	if c.ready && mask == c.mask {
		return
	}
	c.ready, c.mask = true, mask
	c.active, c.activeStatic = c.active[:0], 0
	for k, f := range c.filters {
		if mask&(1<<k) == 0 {
			continue
		}
		c.active = append(c.active, f)
		if k < c.static {
			c.activeStatic++
		}
	}
}

// check runs the job's chain and returns the first failure's detail code
// ("" = the node can take the slot).
func (c *chain) check(r *Request, s *Slot, n *NodeState) api.DetailCode {
	for _, f := range c.active {
		if code := f.Check(r, s, n); code != "" {
			return code
		}
	}
	return ""
}

// checkStatic runs only the job's static filters.
func (c *chain) checkStatic(r *Request, s *Slot, n *NodeState) api.DetailCode {
	for _, f := range c.active[:c.activeStatic] {
		if code := f.Check(r, s, n); code != "" {
			return code
		}
	}
	return ""
}

// usableFilter turns away nodes that are down, drained or unregistered.
type usableFilter struct{}

func (usableFilter) Name() string           { return "usable" }
func (usableFilter) Relevant(*Request) bool { return true }
func (usableFilter) Check(_ *Request, _ *Slot, n *NodeState) api.DetailCode {
	if n.Usable {
		return ""
	}
	if n.Info.Unusable != "" {
		return n.Info.Unusable
	}
	return api.DetailNodeDown
}

// excludeFilter turns away the nodes of -x.
type excludeFilter struct{}

func (excludeFilter) Name() string             { return "exclude" }
func (excludeFilter) Relevant(r *Request) bool { return r.Excludes }
func (excludeFilter) Check(r *Request, _ *Slot, n *NodeState) api.DetailCode {
	if n.excluded == r.stamp {
		return api.DetailNodeExcluded
	}
	return ""
}

// requestedFilter turns away every node not named by -w when the -w
// nodes make up the whole allocation.
type requestedFilter struct{}

func (requestedFilter) Name() string             { return "requested" }
func (requestedFilter) Relevant(r *Request) bool { return r.OnlyRequired }
func (requestedFilter) Check(r *Request, _ *Slot, n *NodeState) api.DetailCode {
	if r.OnlyRequired && n.required != r.stamp {
		return api.DetailNodeNotRequested
	}
	return ""
}

// gpuModelFilter keeps only nodes whose GPU model is the requested type.
type gpuModelFilter struct{}

func (gpuModelFilter) Name() string             { return "gpu-model" }
func (gpuModelFilter) Relevant(r *Request) bool { return r.GPUType != "" }
func (gpuModelFilter) Check(r *Request, _ *Slot, n *NodeState) api.DetailCode {
	if r.GPUType != "" && !strings.EqualFold(r.GPUType, n.Info.GPUModel) {
		return api.DetailGPUType
	}
	return ""
}

// TmpDiskUnknown is NodeInfo.TmpDiskMB for a node whose temporary disk
// is not known (not registered since the controller started): any
// --tmp fits it, so that a job is not refused for a node that has not
// said yet.
const TmpDiskUnknown int64 = -1

// tmpDiskFilter keeps only nodes with the job's --tmp of temporary disk.
// It reads a fixed property of the node, not a free amount, so it is
// static.
type tmpDiskFilter struct{}

func (tmpDiskFilter) Name() string             { return "tmp-disk" }
func (tmpDiskFilter) Relevant(r *Request) bool { return r.TmpDiskMB > 0 }
func (tmpDiskFilter) Check(r *Request, _ *Slot, n *NodeState) api.DetailCode {
	if t := n.Info.TmpDiskMB; t != TmpDiskUnknown && t < r.TmpDiskMB {
		return api.DetailInsufficientTmpDisk
	}
	return ""
}

// reservedFilter implements priority blocking at node level: a node that
// a higher-priority job waits for is not given to a lower-priority one.
type reservedFilter struct{}

func (reservedFilter) Name() string             { return "reserved" }
func (reservedFilter) Relevant(r *Request) bool { return r.AnyReserved }
func (reservedFilter) Check(_ *Request, _ *Slot, n *NodeState) api.DetailCode {
	if n.Reserved {
		return DetailReserved
	}
	return ""
}

// idleFilter gives --exclusive jobs idle nodes only.
type idleFilter struct{}

func (idleFilter) Name() string             { return "idle" }
func (idleFilter) Relevant(r *Request) bool { return r.Exclusive }
func (idleFilter) Check(r *Request, _ *Slot, n *NodeState) api.DetailCode {
	if r.Exclusive && !n.Idle {
		return api.DetailNodeBusy
	}
	return ""
}

// cpuFilter needs the slot's CPUs free.
type cpuFilter struct{}

func (cpuFilter) Name() string             { return "cpu" }
func (cpuFilter) Relevant(r *Request) bool { return len(r.Slots) > 0 && r.Slots[0].CPUs > 0 }
func (cpuFilter) Check(_ *Request, s *Slot, n *NodeState) api.DetailCode {
	if n.FreeCPUs < s.CPUs {
		return api.DetailInsufficientCPU
	}
	// Only an overcommitted slot has more tasks than CPUs.
	if s.Tasks > s.CPUs && s.Tasks > api.MaxTasksPerNode(n.Info.CPUs) {
		return api.DetailTooManyTasks
	}
	return ""
}

// memFilter needs the slot's memory free.
type memFilter struct{}

func (memFilter) Name() string { return "memory" }
func (memFilter) Relevant(r *Request) bool {
	return len(r.Slots) > 0 && (r.Slots[0].MemMB > 0 || r.Slots[0].WholeMem)
}
func (memFilter) Check(_ *Request, s *Slot, n *NodeState) api.DetailCode {
	if n.FreeMemMB < s.MemMB || s.WholeMem && n.FreeMemMB < n.Info.MemoryMB {
		return api.DetailInsufficientMemory
	}
	return ""
}

// nvlinkFilter (--comm=model) needs the slot's GPUs free inside one
// NVLink island of the node.
type nvlinkFilter struct{}

func (nvlinkFilter) Name() string             { return "nvlink" }
func (nvlinkFilter) Relevant(r *Request) bool { return r.NVLinkOnly }
func (nvlinkFilter) Check(_ *Request, s *Slot, n *NodeState) api.DetailCode {
	if s.GPUs < 2 {
		return ""
	}
	if n.bestIsland(s.GPUs) == nil {
		return api.DetailNoNVLinkSet
	}
	return ""
}

// gpuFilter needs the slot's GPU count free, or for a sliced slot that
// many GPUs with room for one slice each (checkSlices).
type gpuFilter struct{}

func (gpuFilter) Name() string             { return "gpu" }
func (gpuFilter) Relevant(r *Request) bool { return len(r.Slots) > 0 && r.Slots[0].GPUs > 0 }
func (gpuFilter) Check(r *Request, s *Slot, n *NodeState) api.DetailCode {
	if s.Sliced() {
		return checkSlices(r, s, n)
	}
	if len(n.FreeGPUs) < s.GPUs {
		return api.DetailInsufficientGPU
	}
	return ""
}
