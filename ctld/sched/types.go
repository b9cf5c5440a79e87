package sched

import (
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/topology"
)

// NodeInfo is one node as the scheduler sees it in a snapshot. Free
// amounts already subtract every running job.
type NodeInfo struct {
	Name string
	// Usable is false when the node is down, not responding, drained or
	// not registered; Unusable then names the detail code
	// (api.DetailNodeDown, api.DetailNodeDrained).
	Usable   bool
	Unusable api.DetailCode

	CPUs      int
	FreeCPUs  int
	MemoryMB  int64
	FreeMemMB int64
	// TmpDiskMB is the node's temporary disk (Slurm's TmpDisk), which a
	// job's --tmp must not exceed; jobs do not use it up.
	// TmpDiskUnknown (a node that has not registered yet) lets any --tmp
	// fit, as GPUMemUnknown does slices.
	TmpDiskMB int64
	// GPUModel is the lower-case model of the node's GPUs ("" without).
	GPUModel string
	GPUs     int
	// FreeGPUs lists the free GPU indices in ascending order: neither
	// whole-allocated nor shared by slices.
	FreeGPUs []int
	// Shared lists the GPUs that running slices hold, with what they
	// commit (see slices.go). An index is free, shared, or (in neither
	// list) whole-allocated. GPUMemMB is the memory of each GPU (the
	// smallest when they differ): 0 means unknown, so that memory slices
	// never fit, and GPUMemUnknown (capacity views of nodes that have not
	// registered yet) lets any slice fit.
	Shared   []SharedGPU
	GPUMemMB int64
	// Idle is true when no job holds anything on the node (needed by
	// --exclusive).
	Idle bool
	// Switch is the node's leaf switch ("" when no topology is set).
	Switch string
	// Matrix is the link matrix of the node's GPUs, indexed like
	// FreeGPUs. With it a slot gets the free GPU set with the best
	// aggregate link score (and a 1-GPU slot the least-linked free GPU,
	// so NVLink islands stay whole); nil means no link data and the
	// lowest free indices are taken. It is shared, never modified.
	Matrix *topology.Matrix
	// Features are the node's features (configured, plus containerd
	// where tided runs containers), sorted; --constraint matches them.
	// They are shared, never modified.
	Features []string
	// Releases lists what the node's running jobs give back and when
	// their time limits expire (start + limit; jobs without a limit are
	// left out, and never come back). PolicyBackfill and PolicyEASY
	// build their plan in time from it; the other policies read it for
	// the expected start of blocked jobs. Nil is fine.
	Releases []Release
}

// Release is what one running job frees on one node at its latest
// expected end (start + time limit).
type Release struct {
	At    time.Time
	CPUs  int
	MemMB int64
	// GPUs are the indices the job holds on the node.
	GPUs []int
}

// PartitionInfo is a partition's limits and members.
type PartitionInfo struct {
	Name  string
	Nodes []string // node names, in config order
	Up    bool
	// DefaultTime and MaxTime are seconds; api.Infinite means unlimited.
	DefaultTime int64
	MaxTime     int64
	MaxNodes    int // 0 = unlimited
	// Spread places jobs on the emptiest nodes and leaves first instead
	// of packing them (the default).
	Spread bool
	// NoGPUSlicing refuses GPU slices in the partition. GPUMemRatio and
	// GPUComputeRatio cap what a shared GPU's slices may commit: its
	// memory × GPUMemRatio and 100% × GPUComputeRatio (0 reads as 1.0).
	NoGPUSlicing                 bool
	GPUMemRatio, GPUComputeRatio float64
}

// Snapshot is the immutable input of one scheduling pass.
type Snapshot struct {
	Nodes      []NodeInfo
	Partitions map[string]*PartitionInfo
	// Pending holds the pending jobs in any order; Schedule orders them.
	// The scheduler never modifies them.
	Pending []*api.Job
	// Queues are the cluster's queues by name (Slurm accounts); nil or
	// empty turns quotas, borrowing and reclaim off. A pending job whose
	// Account names no queue belongs to no queue: no quota applies (see
	// share.go and order.go for how such jobs share the cluster). With
	// neither Queues nor QOS the pass orders by EffPriority as before.
	Queues map[string]*QueueInfo
	// QOS are the job classes by name; a job whose QOS is empty or
	// unknown gets DefaultQOS's class (when present).
	QOS        map[string]*QOSInfo
	DefaultQOS string
	// Running lists the running jobs: quota use, borrowing and
	// preemption victims come from it. Nil is fine without queues and
	// preemption.
	Running []RunningJob
	// Workload is the target workload whose fragmentation the default
	// placement (and SliceFGD) measures: task shapes with their
	// popularity. Nil derives it from Pending and Running (see fgd.go);
	// the simulator's packing experiment passes the trace's.
	Workload []WorkloadShape
	// Tree is the switch tree between the nodes (nil = no topology). With
	// it a multi-node job goes under the lowest switch that can hold it
	// whole, and single-node jobs fill partly used leaves first so that
	// whole leaves stay free. Nodes the tree does not name are used only
	// when no single switch holds a job.
	Tree *topology.Tree
	// Usage is each account's decayed GPU-time (any unit, the same for
	// all), the input of the multifactor fair-share factor; nil leaves
	// that factor neutral.
	Usage map[string]float64
	// Probes names pending jobs (by ID) that the pass only tries (see
	// probe.go): such a job starts where it fits now, but one that does
	// not leaves no trace on the rest of the pass (no hold, reservation,
	// estimate or test count) and gets no diagnosis. Nil probes nothing.
	Probes map[uint64]bool
}

// Config tunes a pass.
type Config struct {
	// MaxStarts bounds the jobs started in one pass (0 = no bound).
	MaxStarts int
	// DefMemPerCPUMB is the memory reserved per CPU when a job asks for
	// none (0 = memory is not reserved for such jobs).
	DefMemPerCPUMB int64
	// Policy decides what jobs behind one that does not fit may do (see
	// backfill.go); the zero value is priority blocking (the controller's
	// default is PolicyTide, set by its configuration).
	Policy Policy
	// StarvationAge is how long a job may wait eligible before it is
	// Starving and rises one level per further StarvationAge (0 = 30
	// minutes; negative turns aging off).
	StarvationAge time.Duration
	// Backfill tunes PolicyBackfill's plan (see backfill.go); its zero
	// value is Slurm's defaults. BackfillMaxJobTest also bounds how many
	// blocked jobs get an expected start under PolicyPriority and
	// PolicyFIFO.
	Backfill BackfillConfig
	// NoPreemption turns preemption off (jobs then only wait).
	NoPreemption bool
	// Priority orders passes without queues or classes by multifactor
	// priority (multifactor.go); nil orders them by EffPriority.
	Priority *Multifactor
	// SliceFit chooses how GPU slices (and jobs, for the rules that
	// measure fragmentation) are placed: SliceFragAware (the default,
	// see fgd.go and slices.go), or SliceBestFit, SliceFirstFit and
	// SliceFGD, the rules the simulator compares it with.
	SliceFit SliceFit
}

// BackfillConfig holds the limits of the multi-reservation backfill
// (PolicyBackfill), named after Slurm's SchedulerParameters. Zero values
// take the defaults below; negative ones read as zero.
type BackfillConfig struct {
	// MaxJobTest bounds the jobs a pass tests once a job of their
	// partition could not start (Slurm's bf_max_job_test; 0 =
	// DefaultBackfillMaxJobTest): each of them starts now or gets a
	// reservation; later ones stay pending for Priority untested.
	MaxJobTest int
	// MaxJobUser and MaxJobPart bound the jobs tested per user and per
	// partition (bf_max_job_user, bf_max_job_part; 0 = no bound).
	MaxJobUser, MaxJobPart int
	// Resolution is the plan's time step (bf_resolution; 0 =
	// DefaultBackfillResolution): running jobs' ends and reservations'
	// starts and ends are rounded up to multiples of it (since the Unix
	// epoch), which bounds the plan's size.
	Resolution time.Duration
	// Window is how far ahead reservations are made (bf_window; 0 =
	// DefaultBackfillWindow): a job whose earliest start is later gets
	// no reservation (and no start).
	Window time.Duration
	// ReserveDepth bounds the blocked jobs a pass reserves for (Maui's
	// RESERVATIONDEPTH): once that many hold reservations, later jobs
	// are tested as EASY tests them, for a start now that delays no
	// reservation, without a reservation of their own and without
	// counting against MaxJobTest and its per-user and per-partition
	// bounds. 0 takes the policy's default: every tested job under
	// PolicyBackfill (Slurm's), DefaultTideReserveDepth under PolicyTide.
	ReserveDepth int
}

// Defaults of BackfillConfig: Slurm's, except the window. Slurm's
// bf_window is a day, and its manual asks for one at least as long as
// the longest time limit; GPU sites commonly allow 7 days, and with a
// day's window a job asking for the 7-day maximum got no reservation,
// so shorter jobs kept taking what it waited for (trace replays, issue
// 24: Philly's 9–32-GPU p99 1.00× → 0.86× EASY's, Alibaba's at load 20
// 1.01× → 0.96×, at no cost in pass time).
const (
	DefaultBackfillMaxJobTest = 500
	DefaultBackfillResolution = time.Minute
	DefaultBackfillWindow     = 7 * 24 * time.Hour
)

// SliceFit is a placement rule for GPU slices (and, for the rules that
// measure fragmentation, for every job).
type SliceFit int

// Placement rules.
const (
	// SliceFragAware, the default, places every job where the
	// fragmentation of the target workload grows least (FGD's measure,
	// see fgd.go), then by best fit: the node with the most shared GPUs
	// that take the slice, fewest free GPUs, fewest free CPUs; on the
	// node each slice goes where the measure grows least, then on the
	// shared GPU with the least room left. Unlike SliceFGD it keeps
	// Tide's other rules (whole-node holes, spread partitions), and
	// without GPU shapes to measure it is SliceBestFit.
	SliceFragAware SliceFit = iota
	// SliceBestFit fills the shared GPU with the least room left that
	// still fits, on the node with the most such GPUs, before it breaks
	// a free GPU; whole-GPU jobs go to the node with the fewest free
	// GPUs. The default before issue 24, kept for comparison.
	SliceBestFit
	// SliceFirstFit takes the first node in configuration order with
	// room and on it the lowest-indexed GPU, shared or free, that fits:
	// what a scheduler without a slice policy does.
	SliceFirstFit
	// SliceFGD places every job (slices, whole GPUs, CPUs only) where
	// the fragmentation of the target workload grows least, and nothing
	// else: the FGD heuristic of Weng et al., ATC '23 (see fgd.go), the
	// simulator's "+fgd".
	SliceFGD
)

// QueueInfo is one queue (a Slurm account) as the scheduler sees it.
// GPU amounts are whole GPUs over the whole cluster; the controller
// resolves percentages before the pass.
type QueueInfo struct {
	Name string
	// Parent is the enclosing queue ("" at the top): a child's jobs count
	// against its parent's cap and guarantee too.
	Parent string
	// Guaranteed is the queue's share: its jobs may always use that many
	// GPUs, taking them back from borrowers. Cap is the most its jobs may
	// hold at once, borrowed GPUs included (0 = no cap).
	Guaranteed int
	Cap        int
	// LendLimit bounds how many idle guaranteed GPUs other queues may
	// borrow from it (-1 = all of them); BorrowLimit how many GPUs beyond
	// Guaranteed its own jobs may borrow (-1 = up to Cap).
	LendLimit   int
	BorrowLimit int
	// Per-user limits inside the queue and its children (0 = none):
	// running jobs and GPUs held. Submitted-job limits are the
	// controller's (at submit).
	MaxRunningPerUser int
	MaxGPUsPerUser    int
}

// QOSInfo is one job class (--qos).
type QOSInfo struct {
	Name string
	// MinLevel and MaxLevel bound the levels of its jobs; DefaultLevel is
	// the level of jobs that ask for none.
	MinLevel, MaxLevel, DefaultLevel int
	// Mode is what preemption does to its jobs; api.PreemptNever (or
	// "") means they are never preempted, not even by reclaim, and then
	// they never borrow either.
	Mode api.PreemptMode
	// PreemptGap is how many levels higher a same-queue job must be to
	// preempt one of its jobs (1 = any higher level; reclaim ignores it).
	PreemptGap int
	// GraceTime is seconds between the checkpoint signal and SIGTERM;
	// MaxTime the longest time limit its jobs may ask (0 = no limit);
	// MinRuntime how long its jobs run before they may be preempted.
	GraceTime  int64
	MaxTime    int64
	MinRuntime int64
}

// RunningJob is a running job as quotas and preemption see it.
type RunningJob struct {
	JobID     uint64
	Partition string
	// Queue is the job's account ("" = no queue), QOS its class, User
	// its owner.
	Queue, QOS, User string
	// Level is its priority level (1-10; 0 reads as its class's
	// default).
	Level int
	Start time.Time
	// LastCheckpoint is the job's last acknowledged checkpoint (zero =
	// none): the run time a preemption loses is counted from it.
	LastCheckpoint time.Time
	Alloc          []api.NodeAlloc
	// Starved: the job started while Starving; no same-queue job
	// preempts it by priority (api.Share.StartedStarving).
	Starved bool
	// Borrowing: the job runs on GPUs its queue borrowed (Start.Borrowed
	// was > 0). With queues, jobs outside any queue count as borrowing
	// too for reclaim: they own no share.
	Borrowing bool
	// Preempting: the job is already a victim and leaves soon; its
	// resources count for the job it makes room for, and it is never
	// chosen again.
	Preempting bool
	// PreemptFor is the job it makes room for when Preempting.
	PreemptFor uint64
	// NoRequeue is --no-requeue: a preemption cancels the job.
	NoRequeue bool
}

// Preemption is one victim the pass chose.
type Preemption struct {
	Victim uint64
	// For is the pending job the victim makes room for.
	For uint64
	// Reclaim is true when For's queue takes back GPUs the victim's
	// queue borrowed; false for a same-queue higher-priority preemption.
	Reclaim bool
	Mode    api.PreemptMode
	// Grace is the victim's QOS grace time in seconds.
	Grace int64
	// Why names both jobs, their queues and levels, and the rule.
	Why string
}

// Start is one job to start, with its allocation and why it went there.
type Start struct {
	JobID uint64
	// Partition is, for a job submitted to a list of partitions (-p
	// a,b), the one it starts in: the first in its list where it fits
	// now. Empty for a job of one partition.
	Partition string
	Alloc     []api.NodeAlloc
	// TimeLimit is the effective limit (partition default applied).
	TimeLimit int64
	Why       string
	// Borrowed is how many of the job's GPUs its queue borrows beyond its
	// guarantee (the job is then a reclaim victim first); Backfilled is
	// set when it started ahead of a reserved job.
	Borrowed   int
	Backfilled bool
}

// Decision is why a job stays pending.
type Decision struct {
	JobID  uint64
	Reason api.ReasonCode
	// Detail is the k8s-style histogram: "0/4 nodes available: 3
	// InsufficientGPU, 1 NodeDrained".
	Detail string
	// More lists the other reasons that apply after the decisive one
	// ("Starving since 2026-11-30T10:42:00Z", "Priority: 3 jobs ahead in
	// queue moba", "Borrowing: queue moba would borrow 8 GPUs of idle
	// share"). Decisions of one pass may share More's backing array.
	More []string
	// Level is the job's aged level (its level plus one per starvation
	// period beyond the first, see AgedLevel); Starving when it passed
	// the starvation threshold, since StarvingSince. More, Level and
	// StarvingSince are filled when the snapshot names queues or classes
	// (without them levels mean nothing: jobs go by EffPriority).
	Level         int
	StarvingSince time.Time
	// ExpectedStart is the job's planned start (zero when unknown), for
	// squeue --start: its reservation under PolicyBackfill and
	// PolicyEASY, the estimate of an unreserved start under the others.
	ExpectedStart time.Time
}

// Plan is the output of one pass: the jobs to start and a decision for
// every job left pending.
type Plan struct {
	Starts  []Start
	Pending []Decision
	// Now is the time the pass was computed for.
	Now time.Time
	// Closed lists, sorted, the partitions in which a job ordered after
	// every job of the pass could not have started (every node reserved
	// or unusable, a strict-FIFO block, or MaxStarts reached). Callers
	// may then decide such jobs without a pass: the simulator schedules
	// a deep queue in growing prefixes and stops at the first prefix
	// that closes every partition.
	Closed []string
	// Reservations lists the pass's reservations in time, in the order
	// they were made (PolicyBackfill: one per tested job that could not
	// start and fits within the window; PolicyEASY: at most one): the
	// blocked job, when it is planned to start and the nodes it would
	// get then. A job ordered after it starts only where what it takes
	// until its own limit leaves the reserved job's resources free from
	// At (see timeline.go). The simulator reads it to decide the jobs a
	// prefix pass left out.
	Reservations []Reservation
	// Preemptions are the victims chosen in this pass; the jobs they make
	// room for stay pending (WaitingForReclaim or Preempting) until the
	// victims leave.
	Preemptions []Preemption
}

// Reservation is one job's backfill reservation in time.
type Reservation struct {
	JobID uint64
	// At is the earliest instant (on the resolution grid, or now) at
	// which the job fits for its whole time limit once running jobs end
	// at their time limits, around the reservations made before it.
	At time.Time
	// Nodes are the nodes it would get then, in slot order.
	Nodes []string
}
