// Package schedtest builds scheduler fixtures fluently, in the style of
// the Kubernetes scheduler's test wrappers, so that a test states only
// what matters to it: MakeJob().ID(3).GPUs(2).Obj().
package schedtest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/topology"
)

// Epoch is the submit time of jobs built here unless Submit says
// otherwise, and a convenient "now" for tests.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultPartition is the partition jobs ask for unless Partition says
// otherwise.
const DefaultPartition = "gpu"

// JobWrapper builds an *api.Job.
type JobWrapper struct{ j api.Job }

// MakeJob starts a pending job with ID 1 in DefaultPartition, one node,
// one task, submitted at Epoch. Set ID when a test has several jobs.
func MakeJob() *JobWrapper {
	return &JobWrapper{j: api.Job{
		ID:         1,
		JobSpec:    api.JobSpec{Name: "job", Partition: DefaultPartition},
		State:      api.StatePending,
		SubmitTime: Epoch,
	}}
}

// Obj returns a copy of the job built so far.
func (w *JobWrapper) Obj() *api.Job {
	j := w.j
	j.NodeList = slices.Clone(w.j.NodeList)
	j.Exclude = slices.Clone(w.j.Exclude)
	return &j
}

// ID sets the job id.
func (w *JobWrapper) ID(id uint64) *JobWrapper { w.j.ID = id; return w }

// Name sets the job name.
func (w *JobWrapper) Name(n string) *JobWrapper { w.j.Name = n; return w }

// Partition sets the partition.
func (w *JobWrapper) Partition(p string) *JobWrapper { w.j.Partition = p; return w }

// Priority sets the effective priority the scheduler orders by.
func (w *JobWrapper) Priority(p uint32) *JobWrapper { w.j.EffPriority = p; return w }

// SpecPriority sets the explicit priority, used when EffPriority is 0.
func (w *JobWrapper) SpecPriority(p uint32) *JobWrapper { w.j.JobSpec.Priority = p; return w }

// Submit sets the submit time.
func (w *JobWrapper) Submit(t time.Time) *JobWrapper { w.j.SubmitTime = t; return w }

// Nodes sets -N.
func (w *JobWrapper) Nodes(n int) *JobWrapper { w.j.Nodes = n; return w }

// Tasks sets -n.
func (w *JobWrapper) Tasks(n int) *JobWrapper { w.j.Tasks = n; return w }

// TasksPerNode sets --ntasks-per-node.
func (w *JobWrapper) TasksPerNode(n int) *JobWrapper { w.j.TasksPerNode = n; return w }

// CPUsPerTask sets -c.
func (w *JobWrapper) CPUsPerTask(n int) *JobWrapper { w.j.CPUsPerTask = n; return w }

// CPUsPerGPU sets --cpus-per-gpu.
func (w *JobWrapper) CPUsPerGPU(n int) *JobWrapper { w.j.CPUsPerGPU = n; return w }

// Mem sets --mem (MB per node).
func (w *JobWrapper) Mem(mb int64) *JobWrapper { w.j.MemPerNodeMB = mb; return w }

// MemPerCPU sets --mem-per-cpu (MB).
func (w *JobWrapper) MemPerCPU(mb int64) *JobWrapper { w.j.MemPerCPUMB = mb; return w }

// MemPerGPU sets --mem-per-gpu (MB).
func (w *JobWrapper) MemPerGPU(mb int64) *JobWrapper { w.j.MemPerGPUMB = mb; return w }

// GPUs sets --gpus (total over all nodes).
func (w *JobWrapper) GPUs(n int) *JobWrapper { w.j.GPUs = n; return w }

// GPUsPerNode sets --gpus-per-node.
func (w *JobWrapper) GPUsPerNode(n int) *JobWrapper { w.j.GPUsPerNode = n; return w }

// GPUsPerTask sets --gpus-per-task.
func (w *JobWrapper) GPUsPerTask(n int) *JobWrapper { w.j.GPUsPerTask = n; return w }

// GPUType sets the GPU model (--gpus=TYPE:N).
func (w *JobWrapper) GPUType(t string) *JobWrapper { w.j.GPUType = t; return w }

// GPUMem sets --gpu-mem (MB per slice).
func (w *JobWrapper) GPUMem(mb int64) *JobWrapper { w.j.GPUMemMB = mb; return w }

// GPUCompute sets --gpu-compute (percent per slice).
func (w *JobWrapper) GPUCompute(pct int) *JobWrapper { w.j.GPUComputePct = pct; return w }

// Exclusive sets --exclusive.
func (w *JobWrapper) Exclusive() *JobWrapper { w.j.Exclusive = true; return w }

// Overcommit sets -O/--overcommit.
func (w *JobWrapper) Overcommit() *JobWrapper { w.j.Overcommit = true; return w }

// MinCPUs sets --mincpus.
func (w *JobWrapper) MinCPUs(n int) *JobWrapper { w.j.MinCPUs = n; return w }

// Tmp sets --tmp in MB.
func (w *JobWrapper) Tmp(mb int64) *JobWrapper { w.j.TmpDiskMB = mb; return w }

// NodeList sets -w.
func (w *JobWrapper) NodeList(names ...string) *JobWrapper { w.j.NodeList = names; return w }

// Exclude sets -x.
func (w *JobWrapper) Exclude(names ...string) *JobWrapper { w.j.Exclude = names; return w }

// TimeLimit sets -t in seconds (api.Infinite for UNLIMITED).
func (w *JobWrapper) TimeLimit(secs int64) *JobWrapper { w.j.TimeLimit = secs; return w }

// Begin sets --begin.
func (w *JobWrapper) Begin(t time.Time) *JobWrapper { w.j.BeginTime = t; return w }

// Hold holds the job (api.HoldUser or api.HoldAdmin).
func (w *JobWrapper) Hold(kind api.Hold) *JobWrapper {
	w.j.HoldKind = kind
	w.j.JobSpec.Hold = kind != api.HoldNone
	return w
}

// NodeWrapper builds a sched.NodeInfo.
type NodeWrapper struct{ n sched.NodeInfo }

// MakeNode starts an idle, usable node with 64 CPUs, 256000 MB and no
// GPUs.
func MakeNode(name string) *NodeWrapper {
	return &NodeWrapper{n: sched.NodeInfo{
		Name: name, Usable: true, Idle: true,
		CPUs: 64, FreeCPUs: 64, MemoryMB: 256000, FreeMemMB: 256000,
	}}
}

// Obj returns a copy of the node built so far.
func (w *NodeWrapper) Obj() sched.NodeInfo {
	n := w.n
	n.FreeGPUs = slices.Clone(w.n.FreeGPUs)
	n.Shared = slices.Clone(w.n.Shared)
	return n
}

// TmpDisk sets the node's temporary disk in MB (sched.TmpDiskUnknown:
// not registered yet).
func (w *NodeWrapper) TmpDisk(mb int64) *NodeWrapper { w.n.TmpDiskMB = mb; return w }

// GPUMem sets the memory of each GPU in MB.
func (w *NodeWrapper) GPUMem(mb int64) *NodeWrapper { w.n.GPUMemMB = mb; return w }

// SharedGPU marks GPU idx as shared by slices committing memMB and pct
// (it leaves the free list; the node is no longer idle).
func (w *NodeWrapper) SharedGPU(idx int, memMB int64, pct, slices int) *NodeWrapper {
	w.UsedGPUs(idx)
	w.n.Shared = append(w.n.Shared, sched.SharedGPU{Index: idx, MemMB: memMB, ComputePct: pct, Slices: slices})
	return w
}

// CPUs sets the CPU count, all free.
func (w *NodeWrapper) CPUs(n int) *NodeWrapper { w.n.CPUs, w.n.FreeCPUs = n, n; return w }

// Mem sets the memory in MB, all free.
func (w *NodeWrapper) Mem(mb int64) *NodeWrapper { w.n.MemoryMB, w.n.FreeMemMB = mb, mb; return w }

// GPUs gives the node n free GPUs (indices 0..n-1), model "a100" unless
// Model set one.
func (w *NodeWrapper) GPUs(n int) *NodeWrapper {
	w.n.GPUs = n
	w.n.FreeGPUs = make([]int, n)
	for i := range n {
		w.n.FreeGPUs[i] = i
	}
	if w.n.GPUModel == "" && n > 0 {
		w.n.GPUModel = "a100"
	}
	return w
}

// Model sets the GPU model (stored lower-case, as nodes report it).
func (w *NodeWrapper) Model(m string) *NodeWrapper { w.n.GPUModel = strings.ToLower(m); return w }

// UsedCPUs marks n CPUs as held by running jobs (the node is no longer
// idle unless n is 0).
func (w *NodeWrapper) UsedCPUs(n int) *NodeWrapper {
	w.n.FreeCPUs -= n
	w.n.Idle = w.n.Idle && n == 0
	return w
}

// UsedMem marks mb MB as held by running jobs (the node is no longer
// idle unless mb is 0).
func (w *NodeWrapper) UsedMem(mb int64) *NodeWrapper {
	w.n.FreeMemMB -= mb
	w.n.Idle = w.n.Idle && mb == 0
	return w
}

// UsedGPUs marks the given GPU indices as held by running jobs (the node
// is no longer idle unless idx is empty).
func (w *NodeWrapper) UsedGPUs(idx ...int) *NodeWrapper {
	w.n.FreeGPUs = slices.DeleteFunc(w.n.FreeGPUs, func(i int) bool { return slices.Contains(idx, i) })
	w.n.Idle = w.n.Idle && len(idx) == 0
	return w
}

// Down marks the node down (not usable, api.DetailNodeDown).
func (w *NodeWrapper) Down() *NodeWrapper {
	w.n.Usable, w.n.Unusable = false, api.DetailNodeDown
	return w
}

// Drained marks the node drained (not usable, api.DetailNodeDrained).
func (w *NodeWrapper) Drained() *NodeWrapper {
	w.n.Usable, w.n.Unusable = false, api.DetailNodeDrained
	return w
}

// Switch sets the node's leaf switch.
func (w *NodeWrapper) Switch(s string) *NodeWrapper { w.n.Switch = s; return w }

// Matrix sets the link matrix of the node's GPUs (topotest's machines
// have one).
func (w *NodeWrapper) Matrix(m *topology.Matrix) *NodeWrapper { w.n.Matrix = m; return w }

// PartitionWrapper builds a *sched.PartitionInfo.
type PartitionWrapper struct{ p sched.PartitionInfo }

// MakePartition starts an up partition with no time or node limits.
func MakePartition(name string, nodes ...string) *PartitionWrapper {
	return &PartitionWrapper{p: sched.PartitionInfo{
		Name: name, Nodes: nodes, Up: true, MaxTime: api.Infinite,
	}}
}

// Obj returns a copy of the partition built so far.
func (w *PartitionWrapper) Obj() *sched.PartitionInfo {
	p := w.p
	p.Nodes = slices.Clone(w.p.Nodes)
	return &p
}

// Nodes sets the member nodes.
func (w *PartitionWrapper) Nodes(names ...string) *PartitionWrapper { w.p.Nodes = names; return w }

// Down marks the partition down.
func (w *PartitionWrapper) Down() *PartitionWrapper { w.p.Up = false; return w }

// DefaultTime sets the default time limit in seconds.
func (w *PartitionWrapper) DefaultTime(secs int64) *PartitionWrapper {
	w.p.DefaultTime = secs
	return w
}

// MaxTime sets the maximum time limit in seconds (api.Infinite = none).
func (w *PartitionWrapper) MaxTime(secs int64) *PartitionWrapper { w.p.MaxTime = secs; return w }

// MaxNodes sets the per-job node limit (0 = none).
func (w *PartitionWrapper) MaxNodes(n int) *PartitionWrapper { w.p.MaxNodes = n; return w }

// NoSlicing refuses GPU slices in the partition.
func (w *PartitionWrapper) NoSlicing() *PartitionWrapper { w.p.NoGPUSlicing = true; return w }

// Oversubscribe sets the GPU memory and compute ratios of shared GPUs.
func (w *PartitionWrapper) Oversubscribe(mem, compute float64) *PartitionWrapper {
	w.p.GPUMemRatio, w.p.GPUComputeRatio = mem, compute
	return w
}

// SnapshotWrapper builds a *sched.Snapshot.
type SnapshotWrapper struct{ s sched.Snapshot }

// MakeSnapshot starts an empty snapshot.
func MakeSnapshot() *SnapshotWrapper {
	return &SnapshotWrapper{s: sched.Snapshot{Partitions: map[string]*sched.PartitionInfo{}}}
}

// Nodes appends nodes.
func (w *SnapshotWrapper) Nodes(nodes ...sched.NodeInfo) *SnapshotWrapper {
	w.s.Nodes = append(w.s.Nodes, nodes...)
	return w
}

// Partitions adds partitions by name.
func (w *SnapshotWrapper) Partitions(parts ...*sched.PartitionInfo) *SnapshotWrapper {
	for _, p := range parts {
		w.s.Partitions[p.Name] = p
	}
	return w
}

// Jobs appends pending jobs.
func (w *SnapshotWrapper) Jobs(jobs ...*api.Job) *SnapshotWrapper {
	w.s.Pending = append(w.s.Pending, jobs...)
	return w
}

// Tree sets the switch tree and each node's leaf switch from it.
func (w *SnapshotWrapper) Tree(t *topology.Tree) *SnapshotWrapper {
	w.s.Tree = t
	for i := range w.s.Nodes {
		w.s.Nodes[i].Switch = t.LeafOf(w.s.Nodes[i].Name)
	}
	return w
}

// Matrix sets the same link matrix on every node.
func (w *SnapshotWrapper) Matrix(m *topology.Matrix) *SnapshotWrapper {
	for i := range w.s.Nodes {
		w.s.Nodes[i].Matrix = m
	}
	return w
}

// Obj returns the snapshot. Unlike the other wrappers it shares its
// nodes, partitions and jobs with the wrapper.
func (w *SnapshotWrapper) Obj() *sched.Snapshot { return &w.s }

// Cluster is a shortcut for the common fixture: n identical nodes
// prefix01..prefixNN with cpus CPUs, memMB memory and gpus GPUs, all in
// DefaultPartition.
func Cluster(prefix string, n, cpus int, memMB int64, gpus int) *SnapshotWrapper {
	nodes := make([]sched.NodeInfo, n)
	names := make([]string, n)
	for i := range n {
		names[i] = nodeName(prefix, i+1, n)
		nodes[i] = MakeNode(names[i]).CPUs(cpus).Mem(memMB).GPUs(gpus).Obj()
	}
	return MakeSnapshot().Nodes(nodes...).Partitions(MakePartition(DefaultPartition, names...).Obj())
}

// nodeName pads the number to at least two digits, and more when the
// cluster needs them (gpu001 for 512 nodes).
func nodeName(prefix string, i, n int) string {
	width := max(2, len(strconv.Itoa(n)))
	return fmt.Sprintf("%s%0*d", prefix, width, i)
}

// Account sets the job's queue (-A).
func (w *JobWrapper) Account(q string) *JobWrapper { w.j.Account = q; return w }

// QOS sets the job's class (--qos).
func (w *JobWrapper) QOS(q string) *JobWrapper { w.j.JobSpec.QOS = q; return w }

// Level sets the level the controller resolved (Job.Level).
func (w *JobWrapper) Level(l int) *JobWrapper { w.j.Share.Level = l; return w }

// User sets the job's owner.
func (w *JobWrapper) User(u string) *JobWrapper { w.j.User = u; return w }

// Nice sets --nice.
func (w *JobWrapper) Nice(n int) *JobWrapper { w.j.Nice = n; return w }

// Eligible sets the time the job became eligible.
func (w *JobWrapper) Eligible(t time.Time) *JobWrapper { w.j.EligibleTime = t; return w }

// PrevNodes sets the nodes of the job's previous incarnation.
func (w *JobWrapper) PrevNodes(names ...string) *JobWrapper { w.j.PrevNodes = names; return w }

// Reason sets the pending reason the last pass gave the job.
func (w *JobWrapper) Reason(r api.ReasonCode) *JobWrapper { w.j.Reason = r; return w }

// RunWrapper builds a sched.RunningJob.
type RunWrapper struct{ r sched.RunningJob }

// MakeRun starts a running job of id started at Epoch, on no nodes.
func MakeRun(id uint64) *RunWrapper {
	return &RunWrapper{r: sched.RunningJob{JobID: id, Partition: DefaultPartition, Start: Epoch}}
}

// Obj returns a copy of the running job built so far.
func (w *RunWrapper) Obj() sched.RunningJob {
	r := w.r
	r.Alloc = slices.Clone(w.r.Alloc)
	return r
}

// On adds GPUs idx of node (with 1 CPU per GPU, at least 1, and no
// memory) to the allocation.
func (w *RunWrapper) On(node string, idx ...int) *RunWrapper {
	w.r.Alloc = append(w.r.Alloc, api.NodeAlloc{Node: node, CPUs: max(len(idx), 1), GPUs: slices.Clone(idx), Tasks: 1})
	return w
}

// Queue sets the running job's queue, QOS its class, User its owner.
func (w *RunWrapper) Queue(q string) *RunWrapper { w.r.Queue = q; return w }

// QOS sets the running job's class.
func (w *RunWrapper) QOS(q string) *RunWrapper { w.r.QOS = q; return w }

// User sets the running job's owner.
func (w *RunWrapper) User(u string) *RunWrapper { w.r.User = u; return w }

// Level sets the running job's level.
func (w *RunWrapper) Level(l int) *RunWrapper { w.r.Level = l; return w }

// Start sets when it started; Checkpoint its last checkpoint.
func (w *RunWrapper) Start(t time.Time) *RunWrapper { w.r.Start = t; return w }

// Checkpoint sets its last acknowledged checkpoint.
func (w *RunWrapper) Checkpoint(t time.Time) *RunWrapper { w.r.LastCheckpoint = t; return w }

// Borrowing marks it as running on borrowed GPUs.
func (w *RunWrapper) Borrowing() *RunWrapper { w.r.Borrowing = true; return w }

// Starved marks the job as started while Starving.
func (w *RunWrapper) Starved() *RunWrapper { w.r.Starved = true; return w }

// PreemptingFor marks it as a victim leaving for pending job id.
func (w *RunWrapper) PreemptingFor(id uint64) *RunWrapper {
	w.r.Preempting, w.r.PreemptFor = true, id
	return w
}

// NoRequeue sets --no-requeue.
func (w *RunWrapper) NoRequeue() *RunWrapper { w.r.NoRequeue = true; return w }

// Queues sets the queues.
func (w *SnapshotWrapper) Queues(qs ...*sched.QueueInfo) *SnapshotWrapper {
	if w.s.Queues == nil {
		w.s.Queues = map[string]*sched.QueueInfo{}
	}
	for _, q := range qs {
		w.s.Queues[q.Name] = q
	}
	return w
}

// QOS sets the job classes and the default class.
func (w *SnapshotWrapper) QOS(classes map[string]*sched.QOSInfo, def string) *SnapshotWrapper {
	w.s.QOS, w.s.DefaultQOS = classes, def
	return w
}

// Run adds running jobs and takes what they hold from their nodes
// (their GPUs, CPUs and memory leave the free amounts; the nodes are no
// longer idle), so that the snapshot stays consistent. Add nodes first.
func (w *SnapshotWrapper) Run(jobs ...sched.RunningJob) *SnapshotWrapper {
	for _, rj := range jobs {
		w.s.Running = append(w.s.Running, rj)
		for _, a := range rj.Alloc {
			for i := range w.s.Nodes {
				n := &w.s.Nodes[i]
				if n.Name != a.Node {
					continue
				}
				n.FreeGPUs = slices.DeleteFunc(slices.Clone(n.FreeGPUs), func(g int) bool { return slices.Contains(a.GPUs, g) })
				n.FreeCPUs -= a.CPUs
				n.FreeMemMB -= a.MemoryMB
				n.Idle = false
			}
		}
	}
	return w
}

// Queue builds a queue with a guarantee and a cap and no lending or
// borrowing limits (-1).
func Queue(name string, guaranteed, capGPUs int) *sched.QueueInfo {
	return &sched.QueueInfo{Name: name, Guaranteed: guaranteed, Cap: capGPUs, LendLimit: -1, BorrowLimit: -1}
}
