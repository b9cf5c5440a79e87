package sched

import (
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Slot is what a job needs on one node of its allocation. A job's slots
// are ordered largest first: when tasks or GPUs do not divide evenly over
// the nodes, earlier nodes take the remainder. Every field of a later slot
// is therefore at most the same field of an earlier one, which is what
// lets the node choice fill slots greedily.
type Slot struct {
	Tasks int
	CPUs  int
	MemMB int64
	GPUs  int
	// WholeMem (--mem=0) needs the node's memory untouched and takes all
	// of it.
	WholeMem bool
	// GPUMemMB and GPUComputePct, when either is set, make the slot's
	// GPUs slices: one slice of this size on each of GPUs different GPUs.
	GPUMemMB      int64
	GPUComputePct int
}

// Sliced reports whether the slot's GPUs are slices of shared GPUs.
func (s *Slot) Sliced() bool { return s.GPUMemMB > 0 || s.GPUComputePct > 0 }

// Request is one pending job's ask, resolved once per job so that the
// filters, read once per node, do no arithmetic on the JobSpec. The pass
// reuses one Request for every job; filters must not keep it.
type Request struct {
	Job *api.Job
	// Part indexes the pass's partitions (sorted by name).
	Part int
	// Nodes is the node count: -N, raised to the number of -w nodes.
	Nodes int
	// Slots holds one need per node, largest first (len == Nodes).
	Slots []Slot
	// GPUType is the wanted GPU model ("" = any), compared
	// case-insensitively with NodeInfo.GPUModel.
	GPUType string
	// Exclusive needs idle nodes and takes all of them.
	Exclusive bool
	// TmpDiskMB is --tmp: only nodes with at least that much temporary
	// disk (NodeInfo.TmpDiskMB) may take the job.
	TmpDiskMB int64
	// Required lists the node indices of -w in the order given, without
	// duplicates. They take the first slots.
	Required []int
	// OnlyRequired is true when the required nodes are the whole
	// allocation, so that other nodes are NodeNotRequested.
	OnlyRequired bool
	// TimeLimit is the effective limit in seconds or api.Infinite.
	TimeLimit int64
	// Excludes is true when -x names a node of the snapshot.
	Excludes bool
	// AnyReserved is true when some node of the pass is held for a
	// higher-priority job, so the reserved filter has work to do.
	AnyReserved bool
	// MaxLeaves (> 0) limits the leaf switches the job's nodes may span
	// (--switches while its wait lasts); WaitUntil is when it relaxes.
	MaxLeaves int
	WaitUntil time.Time
	// NVLinkOnly (--comm=model) needs each node's GPUs inside one NVLink
	// island.
	NVLinkOnly bool
	// Sliced is true when the slots ask for GPU slices; MemRatio and
	// ComputeRatio are the partition's oversubscription ratios (>= the
	// configured value, 1.0 when unset) that cap shared GPUs.
	Sliced                 bool
	MemRatio, ComputeRatio float64
	// Features is the parsed --constraint (nil = none), FeatureErr the
	// parse error of one that does not parse (the job can never start),
	// and FeatureAlt the matching-OR alternative ([a|b]) being tried:
	// every node of the job matches the same one.
	Features   *Constraint
	FeatureErr string
	FeatureAlt int

	// HasPrev is set when the job ran before (requeued) on nodes of the
	// snapshot: among equally good nodes it gets those (Job.PrevNodes).
	HasPrev bool
	// HasAvoid is set when the job's launch failed on nodes of the
	// snapshot (Job.LaunchFailNodes): those come after every other node
	// that fits, so a node that cannot launch it is not the first choice
	// again.
	HasAvoid bool

	// stamp marks the nodes this request excludes or requires in
	// NodeState (>= 1, unique per job in a pass), so membership checks
	// cost one comparison and need no per-job clearing.
	stamp uint32
}

// fillSlots appends the n per-node needs of spec to dst[:0], largest
// first. Tasks are TasksPerNode, else the total spread evenly (earlier
// nodes take the remainder); CPUs are tasks × cpus-per-task (with
// --overcommit cpus-per-task alone), at least 1, MinCPUs and GPUs ×
// CPUsPerGPU; GPUs are GPUsPerNode, else
// GPUsPerTask × tasks (so that each task has its own), else the total
// split the same way as tasks; memory is
// MemPerNodeMB, else MemPerCPUMB × CPUs, else MemPerGPUMB × GPUs, else
// defMemPerCPU × CPUs. MemPerNodeMB 0 means "not given" here, never "the
// whole node". A sliced spec (GPUMemMB or GPUComputePct) gives every
// slot the slice size, and one slice per node when it names no GPU
// count.
func fillSlots(dst []Slot, s *api.JobSpec, n int, defMemPerCPU int64) []Slot {
	dst = dst[:0]
	if n < 1 {
		n = 1
	}
	cpt := s.ReqCPUsPerTask()

	var tBase, tRem int
	if s.TasksPerNode > 0 {
		tBase = s.TasksPerNode
	} else {
		t := s.Tasks
		if t <= 0 {
			t = n
		}
		tBase, tRem = t/n, t%n
	}

	var gBase, gRem int
	perTask := false
	switch {
	case s.GPUsPerNode > 0:
		gBase = s.GPUsPerNode
	case s.GPUsPerTask > 0:
		perTask = true
	case s.GPUs > 0:
		gBase, gRem = s.GPUs/n, s.GPUs%n
	}

	for i := range n {
		tasks := tBase
		if i < tRem {
			tasks++
		}
		gpus := gBase
		if i < gRem {
			gpus++
		}
		if perTask {
			gpus = s.GPUsPerTask * tasks
		}
		sliced := s.GPUMemMB > 0 || s.GPUComputePct > 0
		if sliced && gBase == 0 && gRem == 0 && !perTask {
			gpus = 1
		}
		dst = append(dst, slotOf(s, tasks, gpus, cpt, defMemPerCPU))
	}
	return dst
}

// slotOf is the need of one node that runs tasks tasks of spec with gpus
// GPUs (slices for a sliced spec): CPUs and memory follow from them.
func slotOf(s *api.JobSpec, tasks, gpus, cpt int, defMemPerCPU int64) Slot {
	cpus := max(tasks*cpt, 1)
	if s.Overcommit {
		// Slurm's --overcommit: CPUs as if the node ran one task, which
		// all of its tasks share.
		cpus = cpt
	}
	cpus = max(cpus, s.MinCPUs)
	if s.CPUsPerGPU > 0 {
		cpus = max(cpus, gpus*s.CPUsPerGPU)
	}
	var mem int64
	whole := false
	switch {
	case s.MemPerNodeMB == api.MemWholeNode:
		whole = true
	case s.MemPerNodeMB > 0:
		mem = s.MemPerNodeMB
	case s.MemPerCPUMB > 0:
		mem = s.MemPerCPUMB * int64(cpus)
	case s.MemPerGPUMB > 0:
		mem = s.MemPerGPUMB * int64(gpus)
	default:
		mem = defMemPerCPU * int64(cpus)
	}
	slot := Slot{Tasks: tasks, CPUs: cpus, MemMB: mem, GPUs: gpus, WholeMem: whole}
	if s.GPUMemMB > 0 || s.GPUComputePct > 0 {
		slot.GPUMemMB, slot.GPUComputePct = s.GPUMemMB, s.GPUComputePct
	}
	return slot
}

// spansNodes reports whether spec's per-node need shrinks as it gets
// more nodes, so that without -N (or within a -N min-max range) it may
// span several (Slurm's reading of a total): a GPU total (--gpus) or a
// task total (-n, with its CPUs and --gpus-per-task GPUs) that no
// per-node count pins.
func spansNodes(s *api.JobSpec) bool {
	if s.Nodes > 0 && s.MaxNodes <= s.Nodes || s.GPUsPerNode > 0 && s.TasksPerNode > 0 {
		return false
	}
	gpuTotal := s.GPUs > 0 && s.GPUsPerNode == 0 && s.GPUsPerTask == 0
	taskTotal := s.Tasks > 1 && s.TasksPerNode == 0
	return gpuTotal || taskTotal
}

// largestSlot is the first (largest) of fillSlots(spec, n)'s slots,
// computed without building the others.
func largestSlot(s *api.JobSpec, n int, defMemPerCPU int64) Slot {
	n = max(n, 1)
	tasks := s.TasksPerNode
	if tasks <= 0 {
		t := s.Tasks
		if t <= 0 {
			t = n
		}
		tasks = (t + n - 1) / n
	}
	var gpus int
	switch {
	case s.GPUsPerNode > 0:
		gpus = s.GPUsPerNode
	case s.GPUsPerTask > 0:
		gpus = s.GPUsPerTask * tasks
	case s.GPUs > 0:
		gpus = (s.GPUs + n - 1) / n
	case s.GPUMemMB > 0 || s.GPUComputePct > 0:
		gpus = 1
	}
	return slotOf(s, tasks, gpus, s.ReqCPUsPerTask(), defMemPerCPU)
}

// effectiveTimeLimit is the job's limit, else the partition's default,
// else (as Slurm does when DefaultTime is unset) the partition's MaxTime,
// else api.Infinite.
func effectiveTimeLimit(s *api.JobSpec, part *PartitionInfo) int64 {
	return effectiveLimit(s.TimeLimit, part)
}

// effectiveLimit is effectiveTimeLimit of a job whose --time is limit.
func effectiveLimit(limit int64, part *PartitionInfo) int64 {
	switch {
	case limit != 0:
		return limit
	case part.DefaultTime != 0:
		return part.DefaultTime
	case part.MaxTime != 0:
		return part.MaxTime
	}
	return api.Infinite
}

// exceedsMaxTime reports whether limit is above the partition's MaxTime
// (MaxTime api.Infinite or 0 means no maximum).
func exceedsMaxTime(limit int64, part *PartitionInfo) bool {
	if part.MaxTime == api.Infinite || part.MaxTime <= 0 {
		return false
	}
	return limit == api.Infinite || limit > part.MaxTime
}

// priorityOf is the priority the pass orders by: the effective priority,
// else the job's explicit one.
func priorityOf(j *api.Job) uint32 {
	if j.EffPriority != 0 {
		return j.EffPriority
	}
	return j.Priority
}
