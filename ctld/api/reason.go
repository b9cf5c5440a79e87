package api

// ReasonCode is why a job is pending or how it ended. The words follow
// Slurm's REASON column so scripts that grep squeue keep working; the
// detail codes (InsufficientGPU…) count nodes in a job's ReasonDetail.
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

// Detail codes used in per-node diagnosis histograms.
const (
	DetailInsufficientCPU    = "InsufficientCPU"
	DetailInsufficientMemory = "InsufficientMemory"
	DetailInsufficientGPU    = "InsufficientGPU"
	// DetailInsufficientGPUMem: the node has GPUs a slice may use, but
	// too few with the slice's memory left under their cap (GPU memory
	// × the partition's gpu_mem_oversubscribe).
	DetailInsufficientGPUMem = "InsufficientGPUMem"
	// DetailInsufficientGPUCompute: as above for compute percent.
	DetailInsufficientGPUCompute = "InsufficientGPUCompute"
	DetailGPUType                = "NoMatchingGPUModel"
	DetailNodeDrained            = "NodeDrained"
	DetailNodeDown               = "NodeDown"
	DetailNodeExcluded           = "NodeExcluded"
	DetailNodeNotRequested       = "NodeNotRequested"
	DetailNodeBusy               = "NodeNotIdle"
	DetailNoNVLinkSet            = "NoNVLinkSet"
	// DetailNodeFeatures: the node lacks the features the job's
	// --constraint asks for.
	DetailNodeFeatures = "NodeFeatures"
	// DetailInsufficientTmpDisk: the node's TmpDisk is below the job's
	// --tmp.
	DetailInsufficientTmpDisk = "InsufficientTmpDisk"
	// DetailTooManyTasks: an overcommitted job asks for more tasks per
	// node than MaxTasksPerNode allows there.
	DetailTooManyTasks = "TooManyTasks"
)
