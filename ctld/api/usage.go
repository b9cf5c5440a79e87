package api

import (
	"slices"
	"sort"
)

// Usage accounting (issue 22): what a job's steps used, for sacct's
// usage fields (TotalCPU, MaxRSS, AveVMSize, TRESUsageInTot, …).
//
// Each node measures its part of a step task by task (a task is a
// process and its descendants: the batch script, or one srun rank) and
// reports a NodeUsage: with the step's end (Final), and while it runs
// (the running values, for sstat). The controller stores the reports
// per job, step and node and sums them into a StepUsage, Slurm's step
// statistics: totals over the tasks, and the highest and lowest task
// with its node and rank.

// BatchStepID is the step id of a job's batch step in usage records
// (Slurm's SLURM_BATCH_SCRIPT); srun steps count from 0.
const BatchStepID uint32 = 0xfffffffb

// TaskUsage is what one task used on its node. Times are microseconds
// of CPU, sizes bytes. CPU, Pages and the byte counts are totals since
// the task started; RSS, VMSize and the GPU readings are the highest
// the node saw.
type TaskUsage struct {
	// Task is the global rank (SLURM_PROCID); 0 for the batch script.
	Task       int    `json:"task"`
	UserUsec   uint64 `json:"user_usec,omitempty"`
	SystemUsec uint64 `json:"system_usec,omitempty"`
	// RSS and VMSize are the task's resident and virtual memory, its
	// processes' summed, at the sample where they were highest (or the
	// largest process's peak the kernel kept, when that is higher).
	RSS    uint64 `json:"rss,omitempty"`
	VMSize uint64 `json:"vmsize,omitempty"`
	// Pages counts major page faults.
	Pages uint64 `json:"pages,omitempty"`
	// ReadBytes and WriteBytes are what the task read from and wrote to
	// storage (block I/O).
	ReadBytes  uint64 `json:"read_bytes,omitempty"`
	WriteBytes uint64 `json:"write_bytes,omitempty"`
	// GPUMem is the device memory the task's processes held (bytes) and
	// GPUUtil the utilisation of the GPUs they ran on (percent, summed
	// over GPUs), both at their highest; read only where the node has
	// NVML (NodeUsage.GPU).
	GPUMem  uint64 `json:"gpu_mem,omitempty"`
	GPUUtil uint64 `json:"gpu_util,omitempty"`
}

// CgroupTotals is what the cgroup of a node's part of a step counted:
// it holds the tasks and anything that left their process trees, so
// its totals may exceed the tasks' sum. HasIO: the cgroup counts block
// I/O (cgroup v2 with the io controller).
type CgroupTotals struct {
	UserUsec   uint64 `json:"user_usec,omitempty"`
	SystemUsec uint64 `json:"system_usec,omitempty"`
	ReadBytes  uint64 `json:"read_bytes,omitempty"`
	WriteBytes uint64 `json:"write_bytes,omitempty"`
	HasIO      bool   `json:"has_io,omitempty"`
}

// NodeUsage is one node's report of its part of a step.
type NodeUsage struct {
	JobID uint64 `json:"job_id"`
	// StepID is the srun step id, or BatchStepID.
	StepID uint32 `json:"step_id"`
	// Restart is the job's incarnation the batch step belongs to.
	Restart int `json:"restart,omitempty"`
	// Node is the reporting node; the controller sets it (and UserID,
	// the job's owner) from what it knows, whatever the node sent.
	Node   string `json:"node,omitempty"`
	UserID uint32 `json:"user_id,omitempty"`
	// Final: the step ended on the node, and these are its totals;
	// otherwise the values so far.
	Final bool `json:"final,omitempty"`
	// GPU: the node read GPU use (NVML); the GPU fields of its tasks
	// mean something.
	GPU bool `json:"gpu,omitempty"`
	// Samples counts the periodic samples behind the peaks (0: only
	// what the end of the tasks gave).
	Samples int           `json:"samples,omitempty"`
	Cgroup  *CgroupTotals `json:"cgroup,omitempty"`
	Tasks   []TaskUsage   `json:"tasks"`
}

// MaxUsageTasks bounds the tasks of one NodeUsage: a node runs at most
// one task per CPU, and far fewer CPUs than this.
const MaxUsageTasks = 65536

// UsageStat is one quantity over a step's tasks: the total, and the
// highest and lowest task with its node and rank (ties go to the first
// node by name, then the lowest rank).
type UsageStat struct {
	Tot     uint64 `json:"tot"`
	Max     uint64 `json:"max"`
	MaxNode string `json:"max_node,omitempty"`
	MaxTask int    `json:"max_task"`
	Min     uint64 `json:"min"`
	MinNode string `json:"min_node,omitempty"`
	MinTask int    `json:"min_task"`
}

// Ave is the mean over n tasks (0 for none).
func (s UsageStat) Ave(n int) uint64 {
	if n <= 0 {
		return 0
	}
	return s.Tot / uint64(n)
}

// StepUsage is a step's usage summed over its nodes and tasks: what
// sacct prints on the step's row.
type StepUsage struct {
	JobID  uint64 `json:"job_id"`
	StepID uint32 `json:"step_id"`
	UserID uint32 `json:"user_id"`
	// Nodes and Tasks count what reported.
	Nodes int `json:"nodes"`
	Tasks int `json:"tasks"`
	// Final: every node's report is its final one.
	Final bool `json:"final"`
	// UserUsec and SystemUsec are the step's CPU time (its cgroups'
	// where they saw more than the tasks).
	UserUsec   uint64 `json:"user_usec"`
	SystemUsec uint64 `json:"system_usec"`
	// CPU is per task CPU time (user + system) in microseconds; its Tot
	// is UserUsec + SystemUsec.
	CPU       UsageStat `json:"cpu"`
	RSS       UsageStat `json:"rss"`
	VMSize    UsageStat `json:"vmsize"`
	Pages     UsageStat `json:"pages"`
	DiskRead  UsageStat `json:"disk_read"`
	DiskWrite UsageStat `json:"disk_write"`
	// GPU: some node read GPU use; GPUMem and GPUUtil are its tasks'.
	GPU     bool      `json:"gpu,omitempty"`
	GPUMem  UsageStat `json:"gpu_mem"`
	GPUUtil UsageStat `json:"gpu_util"`
}

// UsageList answers GET /api/v1/accounting/usage.
type UsageList struct {
	Usage []StepUsage `json:"usage"`
	// Cluster names the other cluster whose usage this is when the
	// request asked for one (&cluster=), so that a client can tell it
	// from the answer of a controller that ignores the parameter.
	Cluster string `json:"cluster,omitempty"`
}

// SummarizeUsage sums the node reports of one step (same JobID and
// StepID) into its StepUsage. It is pure; nil for no reports.
func SummarizeUsage(reports []NodeUsage) *StepUsage {
	if len(reports) == 0 {
		return nil
	}
	rs := slices.Clone(reports)
	sort.SliceStable(rs, func(a, b int) bool { return rs[a].Node < rs[b].Node })
	out := &StepUsage{JobID: rs[0].JobID, StepID: rs[0].StepID, UserID: rs[0].UserID, Final: true}
	stats := []*UsageStat{&out.CPU, &out.RSS, &out.VMSize, &out.Pages, &out.DiskRead, &out.DiskWrite, &out.GPUMem, &out.GPUUtil}
	first := true
	for i := range rs {
		r := &rs[i]
		out.Nodes++
		out.Final = out.Final && r.Final
		out.GPU = out.GPU || r.GPU
		tasks := slices.Clone(r.Tasks)
		sort.SliceStable(tasks, func(a, b int) bool { return tasks[a].Task < tasks[b].Task })
		var user, sys, read, write uint64
		for _, t := range tasks {
			out.Tasks++
			user += t.UserUsec
			sys += t.SystemUsec
			read += t.ReadBytes
			write += t.WriteBytes
			vals := []uint64{t.UserUsec + t.SystemUsec, t.RSS, t.VMSize, t.Pages, t.ReadBytes, t.WriteBytes, t.GPUMem, t.GPUUtil}
			for k, v := range vals {
				s := stats[k]
				s.Tot += v
				if first || v > s.Max {
					s.Max, s.MaxNode, s.MaxTask = v, r.Node, t.Task
				}
				if first || v < s.Min {
					s.Min, s.MinNode, s.MinTask = v, r.Node, t.Task
				}
			}
			first = false
		}
		if c := r.Cgroup; c != nil {
			// The cgroup also saw what left the tasks' process trees:
			// the node's totals are the higher of the two.
			user, sys = max(user, c.UserUsec), max(sys, c.SystemUsec)
			if c.HasIO {
				out.DiskRead.Tot += c.ReadBytes - min(c.ReadBytes, read)
				out.DiskWrite.Tot += c.WriteBytes - min(c.WriteBytes, write)
			}
		}
		out.UserUsec += user
		out.SystemUsec += sys
	}
	out.CPU.Tot = out.UserUsec + out.SystemUsec
	return out
}
