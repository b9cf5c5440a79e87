package api

// ReasonCode is why a job is pending or how it ended. The words follow
// Slurm's REASON column so scripts that grep squeue keep working. What
// a code means (whether the job waits in line, is a sharing reason, …)
// is its row in reasonTable, read through the methods below: adding a
// code is a constant here and a row there (TestReasonTable fails on a
// constant without one).
type ReasonCode string

// Slurm reason words.
const (
	ReasonNone               ReasonCode = "None"
	ReasonResources          ReasonCode = "Resources"
	ReasonPriority           ReasonCode = "Priority"
	ReasonBeginTime          ReasonCode = "BeginTime"
	ReasonJobHeldUser        ReasonCode = "JobHeldUser"
	ReasonJobHeldAdmin       ReasonCode = "JobHeldAdmin"
	ReasonPartitionTimeLimit ReasonCode = "PartitionTimeLimit"
	ReasonPartitionNodeLimit ReasonCode = "PartitionNodeLimit"
	ReasonPartitionDown      ReasonCode = "PartitionDown"
	ReasonReqNodeNotAvail    ReasonCode = "ReqNodeNotAvail"
	ReasonNodeDown           ReasonCode = "NodeDown"
	ReasonBadConstraints     ReasonCode = "BadConstraints"
	ReasonDependency         ReasonCode = "Dependency"
	// ReasonDependencyNeverSatisfied: a dependency failed (afterok on
	// a job that failed…); the job waits until its dependency is
	// changed or it is cancelled (at once with --kill-on-invalid-dep).
	ReasonDependencyNeverSatisfied ReasonCode = "DependencyNeverSatisfied"
	// ReasonJobArrayTaskLimit: the array runs as many tasks as its %N
	// throttle allows.
	ReasonJobArrayTaskLimit ReasonCode = "JobArrayTaskLimit"
	ReasonTimeLimit         ReasonCode = "TimeLimit"
	ReasonCancelled         ReasonCode = "Cancelled"
	ReasonNonZeroExit       ReasonCode = "NonZeroExitCode"
	ReasonLaunchFailed      ReasonCode = "LaunchFailed"
	// ReasonOutOfMemory: the kernel's OOM killer ended a process of the
	// job at its memory limit.
	ReasonOutOfMemory ReasonCode = "OutOfMemory"
	// ReasonTopology: the job waits for a placement within its
	// --switches limit (until its wait runs out).
	ReasonTopology ReasonCode = "Topology"
	// ReasonGPUMemReclaim: the job's GPU slice was preempted (requeued)
	// or grown because a shared GPU's memory use crossed its high
	// watermark.
	ReasonGPUMemReclaim ReasonCode = "GPUMemReclaim"
	// ReasonQuotaExceeded: the job's queue holds its hard cap of GPUs
	// ("QuotaExceeded: queue moba 48/48 GPUs").
	ReasonQuotaExceeded ReasonCode = "QuotaExceeded"
	// ReasonUserLimit: a per-user limit of the job's queue (running jobs,
	// GPUs) is reached.
	ReasonUserLimit ReasonCode = "UserLimit"
	// ReasonWaitingForReclaim: the job's queue takes back GPUs it lent;
	// the borrowers are checkpointing.
	ReasonWaitingForReclaim ReasonCode = "WaitingForReclaim"
	// ReasonPreempting: lower-priority jobs were preempted for this one
	// and are checkpointing.
	ReasonPreempting ReasonCode = "Preempting"
	// ReasonPreempted ends a job preempted without requeue, and marks a
	// requeued job's trail.
	ReasonPreempted ReasonCode = "Preempted"
	// ReasonQOSTimeLimit: the time limit exceeds the job's QOS MaxTime.
	ReasonQOSTimeLimit ReasonCode = "QOSMaxWallDurationPerJobLimit"
	// ReasonBuffered: the job was accepted during a submission burst and
	// waits in its queue's submission buffer, released at the queue's
	// submit rate in arrival order.
	ReasonBuffered ReasonCode = "SubmitBuffer"
)

// DetailCode is why the scheduler turned one node away for a job. A
// pending job's ReasonDetail counts them k8s-style ("0/4 nodes
// available: 3 InsufficientGPU, 1 NodeDrained"), so their words are
// part of the output and of stored job records. Each has a row in
// detailTable.
type DetailCode string

// Detail codes used in per-node diagnosis histograms.
const (
	DetailInsufficientCPU    DetailCode = "InsufficientCPU"
	DetailInsufficientMemory DetailCode = "InsufficientMemory"
	DetailInsufficientGPU    DetailCode = "InsufficientGPU"
	// DetailInsufficientGPUMem: the node has GPUs a slice may use, but
	// too few with the slice's memory left under their cap (GPU memory
	// × the partition's gpu_mem_oversubscribe).
	DetailInsufficientGPUMem DetailCode = "InsufficientGPUMem"
	// DetailInsufficientGPUCompute: as above for compute percent.
	DetailInsufficientGPUCompute DetailCode = "InsufficientGPUCompute"
	DetailGPUType                DetailCode = "NoMatchingGPUModel"
	DetailNodeDrained            DetailCode = "NodeDrained"
	DetailNodeDown               DetailCode = "NodeDown"
	DetailNodeExcluded           DetailCode = "NodeExcluded"
	DetailNodeNotRequested       DetailCode = "NodeNotRequested"
	DetailNodeBusy               DetailCode = "NodeNotIdle"
	DetailNoNVLinkSet            DetailCode = "NoNVLinkSet"
	// DetailNodeFeatures: the node lacks the features the job's
	// --constraint asks for.
	DetailNodeFeatures DetailCode = "NodeFeatures"
	// DetailInsufficientTmpDisk: the node's TmpDisk is below the job's
	// --tmp.
	DetailInsufficientTmpDisk DetailCode = "InsufficientTmpDisk"
	// DetailTooManyTasks: an overcommitted job asks for more tasks per
	// node than MaxTasksPerNode allows there.
	DetailTooManyTasks DetailCode = "TooManyTasks"
	// DetailReservedForPriority: a higher-priority pending job waits for
	// the node. It never reaches a Decision's Detail: a job turned away
	// by it is pending for Priority, whose detail is a constant.
	DetailReservedForPriority DetailCode = "ReservedForPriority"
)

// ReasonInfo is what a reason code means: its row of the reasons table.
// The scheduler, the controller and the CLI ask the table (through the
// ReasonCode methods) rather than list codes of their own.
type ReasonInfo struct {
	Code ReasonCode
	// Slurm: Slurm prints the same word for the same condition, so
	// scripts written for Slurm know it; else the word is Tide's own.
	Slurm bool
	// WaitsInLine: the job waits for resources in its queue's order, so
	// the jobs ahead of it matter ("N jobs ahead in queue …"), and a
	// job pending in several partitions reports one where it waits in
	// line. Not for holds, begin times, limits or broken requests,
	// which no amount of waiting in line lifts.
	WaitsInLine bool
	// Blocks: the job passed its gates and would start once running
	// jobs end, so under the fifo policy every job behind it waits too.
	// Implies WaitsInLine.
	Blocks bool
	// Reclaims: jobs are giving resources back for this one (borrowers
	// or lower-priority jobs are checkpointing): the job goes first in
	// the next pass, and a job pending in several partitions reports
	// it. Implies WaitsInLine and Sharing.
	Reclaims bool
	// Sharing: a reason of the sharing machinery (queues, classes,
	// per-user limits, the submission buffer): its decisive detail is
	// short and names the queue or jobs, so listings print it with the
	// word ("QuotaExceeded: queue moba 48/48 GPUs").
	Sharing bool
	// Dependency: the job waits on its --dependency; clearing the
	// dependency clears the reason.
	Dependency bool
	// Ends: a finished job can carry it, as how it ended (a pending or
	// requeued job may carry some of these too).
	Ends bool
	// Help says in a line what the reason means, for docs and for
	// commands that explain a job.
	Help string
}

// reasonTable holds every ReasonCode's attributes: None, the reasons of
// jobs that wait in line, the other pending reasons, then how jobs end.
var reasonTable = [...]ReasonInfo{
	{Code: ReasonNone, Slurm: true, Ends: true,
		Help: "no reason: the job runs, ended normally, or no scheduling pass has looked at it yet"},
	{Code: ReasonPriority, Slurm: true, WaitsInLine: true, Blocks: true,
		Help: "higher-priority jobs come first: the nodes it could use are held for them, or the pass started as many jobs as it may"},
	{Code: ReasonResources, Slurm: true, WaitsInLine: true, Blocks: true,
		Help: "waits for free CPUs, memory or GPUs on the nodes it may use; running jobs will free them"},
	{Code: ReasonQuotaExceeded, WaitsInLine: true, Sharing: true,
		Help: "its queue holds its hard cap of GPUs, or holds its quota for a starving job of the queue"},
	{Code: ReasonUserLimit, WaitsInLine: true, Sharing: true,
		Help: "a per-user limit of its queue (running jobs, GPUs) is reached"},
	{Code: ReasonWaitingForReclaim, WaitsInLine: true, Reclaims: true, Sharing: true,
		Help: "its queue takes back GPUs it lent; the borrowing jobs are checkpointing"},
	{Code: ReasonPreempting, WaitsInLine: true, Reclaims: true, Sharing: true,
		Help: "lower-priority jobs were preempted for it and are checkpointing"},
	{Code: ReasonTopology, WaitsInLine: true, Blocks: true,
		Help: "waits for nodes under at most --switches leaf switches, until its switch wait runs out"},
	{Code: ReasonNodeDown, Slurm: true, WaitsInLine: true, Ends: true,
		Help: "pending: it fits only once down or drained nodes return; ended: a node of the job failed (NODE_FAIL)"},
	{Code: ReasonBuffered, Sharing: true,
		Help: "accepted during a submission burst: waits in its queue's submission buffer, released at the queue's submit rate in arrival order"},
	{Code: ReasonQOSTimeLimit, Slurm: true, Sharing: true,
		Help: "its time limit exceeds the MaxTime of its class (QOS)"},
	{Code: ReasonDependency, Slurm: true, Dependency: true,
		Help: "waits for its --dependency to be satisfied"},
	{Code: ReasonDependencyNeverSatisfied, Slurm: true, Dependency: true, Ends: true,
		Help: "its dependency can never be satisfied: it waits until the dependency is changed or the job is cancelled (at once with --kill-on-invalid-dep)"},
	{Code: ReasonJobArrayTaskLimit, Slurm: true,
		Help: "its array runs as many tasks at once as its %N throttle allows"},
	{Code: ReasonBeginTime, Slurm: true,
		Help: "waits for its --begin time"},
	{Code: ReasonJobHeldUser, Slurm: true,
		Help: "held by its user (sbatch -H, scontrol hold or uhold) until scontrol release"},
	{Code: ReasonJobHeldAdmin, Slurm: true,
		Help: "held by an operator, or after too many launch failures in a row, until scontrol release"},
	{Code: ReasonPartitionTimeLimit, Slurm: true,
		Help: "its time limit exceeds its partition's MaxTime"},
	{Code: ReasonPartitionNodeLimit, Slurm: true,
		Help: "it asks for more nodes than its partition's MaxNodes or node count"},
	{Code: ReasonPartitionDown, Slurm: true,
		Help: "its partition is down"},
	{Code: ReasonReqNodeNotAvail, Slurm: true,
		Help: "a node it requires (-w) is down, drained or not registered"},
	{Code: ReasonBadConstraints, Slurm: true,
		Help: "its request can never fit its partition; the detail says which part"},
	{Code: ReasonLaunchFailed, Ends: true,
		Help: "the node could not launch it: the job failed, or was requeued when the node was at fault"},
	{Code: ReasonTimeLimit, Slurm: true, Ends: true,
		Help: "it ran into its time limit (TIMEOUT)"},
	{Code: ReasonCancelled, Ends: true,
		Help: "cancelled (scancel, or an operator)"},
	{Code: ReasonNonZeroExit, Slurm: true, Ends: true,
		Help: "its batch script exited with a non-zero code (FAILED)"},
	{Code: ReasonOutOfMemory, Slurm: true, Ends: true,
		Help: "the kernel's OOM killer ended a process of the job at its memory limit (OUT_OF_MEMORY)"},
	{Code: ReasonPreempted, Ends: true,
		Help: "evicted for a higher-priority job (PREEMPTED), or requeued for one"},
	{Code: ReasonGPUMemReclaim,
		Help: "its GPU slice was requeued or grown because the shared GPU's memory use crossed its high watermark"},
}

// The scheduler looks a code up for every pending job of a pass, so the
// tables are found through a small open-addressing index built once
// from them: a lookup costs a hash of the length and three bytes and
// about one string comparison, as the switches it replaces did, for a
// code in the table and for one not in it ("" or a newer controller's).
// A linear scan cost up to 70 ns for a code near the end or absent
// (BenchmarkReasonLookup); a map would be built in the initialisation
// of every CLI command and hashes the whole word.
const indexSize = 128 // a power of two, well over twice the rows

// codeIndex holds, per hash slot, a table row + 1 (0: empty slot).
type codeIndex [indexSize]uint8

var (
	reasonIndex = newCodeIndex(len(reasonTable), func(i int) string { return string(reasonTable[i].Code) })
	detailIndex = newCodeIndex(len(detailTable), func(i int) string { return string(detailTable[i].Code) })
)

// codeHash mixes the length and the first, middle and last bytes of a
// code: the words differ in those for all but a few pairs, which the
// probe then tells apart.
func codeHash(s string) uint32 {
	h := uint32(len(s))
	if len(s) > 0 {
		h ^= uint32(s[0])<<8 ^ uint32(s[len(s)/2])<<16 ^ uint32(s[len(s)-1])<<24
	}
	return (h * 0x9E3779B1) >> (32 - 7) // 7 bits: indexSize slots
}

// newCodeIndex indexes rows codes, read through code.
func newCodeIndex(rows int, code func(int) string) codeIndex {
	if rows >= indexSize/2 {
		panic("api: reason table outgrew its index: raise indexSize")
	}
	var ix codeIndex
	for i := range rows {
		h := codeHash(code(i))
		for ix[h] != 0 {
			h = (h + 1) & (indexSize - 1)
		}
		ix[h] = uint8(i + 1)
	}
	return ix
}

// reasonInfo is r's row of reasonTable, nil for a code not in it (a
// record written by a newer controller).
func reasonInfo(r ReasonCode) *ReasonInfo {
	// The index has empty slots (newCodeIndex), so the probe ends.
	for h := codeHash(string(r)); ; h = (h + 1) & (indexSize - 1) {
		k := reasonIndex[h]
		if k == 0 {
			return nil
		}
		if in := &reasonTable[k-1]; in.Code == r {
			return in
		}
	}
}

// Info is r's row of the reasons table; for a code not in it, only Code
// is set (every attribute false, no help).
func (r ReasonCode) Info() ReasonInfo {
	if in := reasonInfo(r); in != nil {
		return *in
	}
	return ReasonInfo{Code: r}
}

// Known reports whether r is a reason code of this version.
func (r ReasonCode) Known() bool { return reasonInfo(r) != nil }

// WaitsInLine reports whether a job pending for r waits for resources in
// its queue's order (ReasonInfo.WaitsInLine).
func (r ReasonCode) WaitsInLine() bool {
	in := reasonInfo(r)
	return in != nil && in.WaitsInLine
}

// Blocks reports whether a job pending for r holds back the jobs behind
// it under the fifo policy (ReasonInfo.Blocks).
func (r ReasonCode) Blocks() bool {
	in := reasonInfo(r)
	return in != nil && in.Blocks
}

// Reclaims reports whether jobs are giving resources back for a job
// pending for r (ReasonInfo.Reclaims).
func (r ReasonCode) Reclaims() bool {
	in := reasonInfo(r)
	return in != nil && in.Reclaims
}

// Sharing reports whether r is a reason of the sharing machinery, whose
// decisive detail listings print with the word (ReasonInfo.Sharing).
func (r ReasonCode) Sharing() bool {
	in := reasonInfo(r)
	return in != nil && in.Sharing
}

// Dependency reports whether r says the job waits on its --dependency
// (ReasonInfo.Dependency).
func (r ReasonCode) Dependency() bool {
	in := reasonInfo(r)
	return in != nil && in.Dependency
}

// Reasons returns a copy of the reasons table, in its order.
func Reasons() []ReasonInfo {
	out := make([]ReasonInfo, len(reasonTable))
	copy(out, reasonTable[:])
	return out
}

// DetailInfo is what a detail code means: its row of the details table.
type DetailInfo struct {
	Code DetailCode
	// Help says in a line why the node was turned away.
	Help string
}

// detailTable holds every DetailCode, in the node-filter chain's order.
var detailTable = [...]DetailInfo{
	{DetailNodeDown, "the node is down or has not registered"},
	{DetailNodeDrained, "the node is drained"},
	{DetailNodeExcluded, "the job excludes the node (-x)"},
	{DetailNodeNotRequested, "the job runs only on the nodes it names (-w), and this is not one"},
	{DetailGPUType, "the node's GPUs are not the model the job asks for"},
	{DetailNodeFeatures, "the node lacks the features the job's --constraint asks for"},
	{DetailInsufficientTmpDisk, "the node's temporary disk (TmpDisk) is below the job's --tmp"},
	{DetailReservedForPriority, "a higher-priority pending job waits for the node (the job is then pending for Priority)"},
	{DetailNodeBusy, "the job wants whole nodes (--exclusive) and the node is not idle"},
	{DetailInsufficientCPU, "too few free CPUs"},
	{DetailTooManyTasks, "the job overcommits CPUs and asks for more tasks than the node's MaxTasksPerNode"},
	{DetailInsufficientMemory, "too little free memory"},
	{DetailInsufficientGPU, "too few free GPUs (for a GPU slice: too few GPUs it may share)"},
	{DetailInsufficientGPUMem, "too few GPUs with the slice's memory left under their cap (GPU memory × gpu_mem_oversubscribe)"},
	{DetailInsufficientGPUCompute, "too few GPUs with the slice's compute percent left"},
	{DetailNoNVLinkSet, "no NVLink island of the node has as many free GPUs as the job needs (--comm=model)"},
}

// Info is d's row of the details table; for a code not in it, only Code
// is set.
func (d DetailCode) Info() DetailInfo {
	for h := codeHash(string(d)); ; h = (h + 1) & (indexSize - 1) {
		k := detailIndex[h]
		if k == 0 {
			return DetailInfo{Code: d}
		}
		if in := &detailTable[k-1]; in.Code == d {
			return *in
		}
	}
}

// Details returns a copy of the details table, in its order.
func Details() []DetailInfo {
	out := make([]DetailInfo, len(detailTable))
	copy(out, detailTable[:])
	return out
}
