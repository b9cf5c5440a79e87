package api

import (
	"fmt"
	"strings"
	"time"
)

// JobState is a job's state word, as Slurm spells it.
type JobState string

// The job states. Terminal states never change again, except that a
// requeue turns a job back to PENDING with its restart count raised.
const (
	StatePending    JobState = "PENDING"
	StateRunning    JobState = "RUNNING"
	StateCompleting JobState = "COMPLETING"
	StateCompleted  JobState = "COMPLETED"
	StateFailed     JobState = "FAILED"
	StateCancelled  JobState = "CANCELLED"
	StateTimeout    JobState = "TIMEOUT"
	StateNodeFail   JobState = "NODE_FAIL"
	StateOOM        JobState = "OUT_OF_MEMORY"
	// StatePreempted ends a job preempted in cancel mode (a debug job
	// evicted, a --no-requeue job); requeue-mode preemption returns the
	// job to PENDING instead and records PREEMPTED only in its trail.
	StatePreempted JobState = "PREEMPTED"
	// StateSuspended is a CPU-only job stopped (SIGSTOP) by a preemptor in
	// suspend mode; it keeps its allocation and resumes with SIGCONT.
	StateSuspended JobState = "SUSPENDED"
)

// AllJobStates lists every state in Slurm's order, for -t parsing.
var AllJobStates = []JobState{StatePending, StateRunning, StateCompleting, StateCompleted,
	StateFailed, StateCancelled, StateTimeout, StateNodeFail, StateOOM, StatePreempted, StateSuspended}

// Terminal reports whether s is a final state.
func (s JobState) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateCancelled, StateTimeout, StateNodeFail, StateOOM, StatePreempted:
		return true
	}
	return false
}

// Active reports whether a job in state s holds resources.
func (s JobState) Active() bool {
	return s == StateRunning || s == StateCompleting || s == StateSuspended
}

// Short is squeue's two-letter %t code.
func (s JobState) Short() string {
	switch s {
	case StatePending:
		return "PD"
	case StateRunning:
		return "R"
	case StateCompleting:
		return "CG"
	case StateCompleted:
		return "CD"
	case StateFailed:
		return "F"
	case StateCancelled:
		return "CA"
	case StateTimeout:
		return "TO"
	case StateNodeFail:
		return "NF"
	case StateOOM:
		return "OOM"
	case StatePreempted:
		return "PR"
	case StateSuspended:
		return "S"
	}
	return "??"
}

// ParseJobState accepts a state name or its short code (case-insensitive),
// as squeue -t and sacct -s do.
func ParseJobState(s string) (JobState, error) {
	for _, st := range AllJobStates {
		if strings.EqualFold(s, string(st)) || strings.EqualFold(s, st.Short()) {
			return st, nil
		}
	}
	if strings.EqualFold(s, "CANCELED") {
		return StateCancelled, nil
	}
	return "", Invalid("invalid job state specified: %s", s)
}

// Hold says who holds a pending job, if anyone.
type Hold string

// Hold kinds: a user hold can be released by the owner, an admin hold only
// by an operator.
const (
	HoldNone  Hold = ""
	HoldUser  Hold = "user"
	HoldAdmin Hold = "admin"
)

// ExitStatus is a job's exit as Slurm reports it: "code:signal".
type ExitStatus struct {
	Code   int `json:"code"`
	Signal int `json:"signal"`
}

func (e ExitStatus) String() string { return fmt.Sprintf("%d:%d", e.Code, e.Signal) }

// SignalSpec is --signal=[{R|B}:]SIG[@TIME]: send SIG that many seconds
// before the time limit. As in Slurm, the signal goes to the job's steps
// (the tasks srun started), not the batch shell; BatchOnly (B:) sends it
// to the batch shell alone instead. It is also the job's checkpoint
// signal when it is preempted, with the same target.
type SignalSpec struct {
	Signal    int  `json:"signal"`
	Seconds   int  `json:"seconds"`
	BatchOnly bool `json:"batch_only,omitempty"`
}

// JobSpec is what a submission asks for. Zero values mean "not given";
// the controller fills defaults from the partition.
type JobSpec struct {
	Name      string `json:"name"`
	Account   string `json:"account,omitempty"`
	Partition string `json:"partition,omitempty"`
	QOS       string `json:"qos,omitempty"`
	Comment   string `json:"comment,omitempty"`

	// Script is the batch script, kept in the controller's spool.
	Script string `json:"script,omitempty"`
	// ScriptArgs are the arguments after the script path on sbatch's
	// command line, passed to the script.
	ScriptArgs []string `json:"script_args,omitempty"`
	// WorkDir is where the script starts (-D, default the submit dir).
	WorkDir string `json:"work_dir"`
	// SubmitDir and SubmitHost describe where sbatch ran.
	SubmitDir  string `json:"submit_dir,omitempty"`
	SubmitHost string `json:"submit_host,omitempty"`
	// Environment is captured at submit (--export), KEY=VALUE.
	Environment []string `json:"environment,omitempty"`

	// Resources. Nodes is the minimum node count (-N); MaxNodes the upper
	// end of a range (0 = same as Nodes).
	Nodes        int `json:"nodes,omitempty"`
	MaxNodes     int `json:"max_nodes,omitempty"`
	Tasks        int `json:"tasks,omitempty"`
	TasksPerNode int `json:"tasks_per_node,omitempty"`
	CPUsPerTask  int `json:"cpus_per_task,omitempty"`
	// MemPerNodeMB is --mem; MemWholeNode (--mem=0) asks for all the
	// memory of each node.
	MemPerNodeMB int64 `json:"mem_per_node_mb,omitempty"`
	MemPerCPUMB  int64 `json:"mem_per_cpu_mb,omitempty"`
	MemPerGPUMB  int64 `json:"mem_per_gpu_mb,omitempty"`
	CPUsPerGPU   int   `json:"cpus_per_gpu,omitempty"`
	// GPUs is the total GPU count (--gpus), GPUsPerNode --gpus-per-node or
	// --gres=gpu:N, GPUsPerTask --gpus-per-task. GPUType restricts the model.
	GPUs        int    `json:"gpus,omitempty"`
	GPUsPerNode int    `json:"gpus_per_node,omitempty"`
	GPUsPerTask int    `json:"gpus_per_task,omitempty"`
	GPUType     string `json:"gpu_type,omitempty"`
	// GPUMemMB (--gpu-mem) and GPUComputePct (--gpu-compute, 1-100) turn
	// the job's GPUs into slices: each GPU count above then means that
	// many slices of this size on as many different GPUs, and without a
	// count one slice per node. GPUShards (--gres=shard:N) asks for N
	// shards of one GPU; the controller turns it into GPUMemMB at submit
	// (a shard is the GPU memory divided by the partition's
	// shards_per_gpu) and keeps it for display. --gres=mps:PCT sets
	// GPUComputePct.
	GPUMemMB      int64 `json:"gpu_mem_mb,omitempty"`
	GPUComputePct int   `json:"gpu_compute_pct,omitempty"`
	GPUShards     int   `json:"gpu_shards,omitempty"`
	Exclusive     bool  `json:"exclusive,omitempty"`
	// Switches (--switches=N[@wait]) asks for at most N leaf switches
	// under the job's nodes, waiting up to SwitchWait seconds from when
	// the job became eligible before taking any placement.
	Switches int `json:"switches,omitempty"`
	// Comm is the job's parallelism (--comm): "model" needs every node's
	// GPUs inside one NVLink domain, "data" (or "") lets them be anywhere.
	Comm       string `json:"comm,omitempty"`
	SwitchWait int64  `json:"switch_wait,omitempty"`
	// NodeList (-w) must all be part of the allocation; Exclude (-x) never.
	NodeList   []string `json:"node_list,omitempty"`
	Exclude    []string `json:"exclude,omitempty"`
	Constraint string   `json:"constraint,omitempty"`
	// MinCPUs is --mincpus: every node of the job gives it at least this
	// many CPUs (Slurm's pn_min_cpus), so only nodes that have as many
	// can take it. 0 = not given.
	MinCPUs int `json:"min_cpus,omitempty"`
	// TmpDiskMB is --tmp: the temporary disk in MB each node of the job
	// must have (the node's TmpDisk, Node.TmpDiskMB). As in Slurm it is a
	// property the node must have, not an amount jobs take from it. 0 =
	// any node.
	TmpDiskMB int64 `json:"tmp_disk_mb,omitempty"`
	// Overcommit is -O/--overcommit: each node gives the job -c CPUs (at
	// least MinCPUs) whatever its task count there, as if it ran one
	// task per node, so a node may run more tasks than it has CPUs, up
	// to MaxTasksPerNode. Tasks then share those CPUs.
	Overcommit bool `json:"overcommit,omitempty"`

	// TimeLimit and TimeMin are seconds (Infinite = UNLIMITED, 0 = unset).
	TimeLimit int64 `json:"time_limit,omitempty"`
	TimeMin   int64 `json:"time_min,omitempty"`
	// BeginTime is --begin: the job is not eligible before it.
	BeginTime time.Time `json:"begin_time,omitzero"`
	Hold      bool      `json:"hold,omitempty"`
	Nice      int       `json:"nice,omitempty"`
	// Priority is the job's level, 1 (lowest) to 10 (--priority); 0
	// takes its QOS's default. Users may lower their own jobs' level;
	// only operators raise it (see share.go).
	Priority uint32 `json:"priority,omitempty"`

	// Output patterns (ExpandPattern's letters), relative to WorkDir.
	Stdout   string `json:"stdout,omitempty"`
	Stderr   string `json:"stderr,omitempty"`
	Stdin    string `json:"stdin,omitempty"`
	OpenMode string `json:"open_mode,omitempty"` // "append" or "truncate"

	// Requeue is nil when not given (cluster default applies).
	Requeue *bool       `json:"requeue,omitempty"`
	Signal  *SignalSpec `json:"signal,omitempty"`

	// Dependency is --dependency. The controller keeps it in Slurm's
	// display form with each item's state ("afterok:12(unfulfilled)",
	// see ParseDependency) and clears it once it is satisfied.
	Dependency string `json:"dependency,omitempty"`
	// KillInvalidDep (--kill-on-invalid-dep=yes) cancels the job when
	// its dependency can never be satisfied instead of leaving it
	// pending with reason DependencyNeverSatisfied.
	KillInvalidDep bool `json:"kill_invalid_dep,omitempty"`
	// Array is --array as written ("0-99:4%8"); every task keeps it, so
	// that its SLURM_ARRAY_TASK_COUNT/MIN/MAX/STEP describe the array.
	Array string `json:"array,omitempty"`
	// MailType and MailUser are recorded; no mail is sent.
	MailType string `json:"mail_type,omitempty"`
	MailUser string `json:"mail_user,omitempty"`

	// Allocation marks an allocation-only job (srun outside an
	// allocation, salloc): it has no script, the controller launches
	// nothing for it and holds it RUNNING until it is released (POST
	// /api/v1/jobs/{id}/release), cancelled or reaches its time limit.
	// Issue 7 steps.
	Allocation bool `json:"allocation,omitempty"`

	// ContainerImage (--container-image) runs the batch script inside
	// this image on a node with the containerd feature; the controller
	// stores it normalised ("docker.io/library/ubuntu:latest").
	ContainerImage string `json:"container_image,omitempty"`
	// ContainerMounts (--container-mounts) are host paths bound into the
	// container besides the work and output directories.
	ContainerMounts []ContainerMount `json:"container_mounts,omitempty"`
}

// MemWholeNode is MemPerNodeMB for --mem=0: all memory of each node.
const MemWholeNode int64 = -1

// OvercommitTasksPerNode is Slurm's default MaxTasksPerNode (512): the
// tasks an overcommitted job (--overcommit) may run on one node when
// the node has fewer CPUs. Without --overcommit every task has a CPU of
// its own, so a node's CPUs bound its tasks anyway.
const OvercommitTasksPerNode = 512

// MaxTasksPerNode is the most tasks of one job a node of cpus CPUs
// runs: one per CPU, or OvercommitTasksPerNode when that is more (only
// an overcommitted job gets there).
func MaxTasksPerNode(cpus int) int { return max(cpus, OvercommitTasksPerNode) }

// NodeAlloc is what one node gives a running job.
type NodeAlloc struct {
	Node     string `json:"node"`
	CPUs     int    `json:"cpus"`
	MemoryMB int64  `json:"memory_mb"`
	// GPUs are the GPU indices the job uses on the node: whole GPUs, or,
	// when GPUMemMB or GPUComputePct is set, GPUs that the job shares
	// with other slices, one slice of that size on each.
	GPUs          []int `json:"gpus,omitempty"`
	GPUMemMB      int64 `json:"gpu_mem_mb,omitempty"`
	GPUComputePct int   `json:"gpu_compute_pct,omitempty"`
	Tasks         int   `json:"tasks"`
	// NUMA lists, ascending, the NUMA nodes of the allocated GPUs when the
	// node reported them: the scheduler keeps a job's GPUs on as few NUMA
	// nodes as their link score allows, and the launcher binds the job's
	// CPUs and memory there once it confines jobs with cgroups (issue 6).
	// Empty without GPUs or NUMA data.
	NUMA []int `json:"numa,omitempty"`
}

// Sliced reports whether the allocation's GPUs are slices of shared
// GPUs rather than whole GPUs.
func (a *NodeAlloc) Sliced() bool { return a.GPUMemMB > 0 || a.GPUComputePct > 0 }

// Job is the controller's record of one job.
type Job struct {
	ID uint64 `json:"job_id"`
	JobSpec

	UserID  uint32 `json:"user_id"`
	GroupID uint32 `json:"group_id"`
	User    string `json:"user"`
	Group   string `json:"group"`

	State JobState `json:"state"`
	// Reason is a Slurm reason word for pending jobs (Resources,
	// Priority, BeginTime…) or why a job ended; ReasonDetail says more in
	// numbers ("0/4 nodes: 4 InsufficientGPU").
	Reason       ReasonCode `json:"reason"`
	ReasonDetail string     `json:"reason_detail,omitempty"`
	// Placement is why the scheduler put the running job where it is
	// ("best fit on 2 whole nodes gpu[01-02] under leaf s1; link score
	// …"), kept for scontrol show job; the start event carries it too.
	Placement string `json:"placement,omitempty"`
	HoldKind  Hold   `json:"hold_kind,omitempty"`
	// PartitionList keeps the partitions a job submitted to several (-p
	// a,b) may run in once it has started in one of them, which
	// Partition then names; empty for other jobs. A requeued job is
	// eligible in all of them again (ReqPartition).
	PartitionList string `json:"partition_list,omitempty"`

	// EffPriority is the priority the scheduler ordered by.
	EffPriority uint32 `json:"eff_priority"`

	SubmitTime   time.Time `json:"submit_time"`
	EligibleTime time.Time `json:"eligible_time,omitzero"`
	StartTime    time.Time `json:"start_time,omitzero"`
	EndTime      time.Time `json:"end_time,omitzero"`
	// LastSchedEval is when the scheduler last looked at the job.
	LastSchedEval time.Time `json:"last_sched_eval,omitzero"`

	Alloc    []NodeAlloc `json:"alloc,omitempty"`
	Restarts int         `json:"restarts"`
	Exit     ExitStatus  `json:"exit"`
	// CancelRequested records that a cancel reached the job while it ran,
	// so that its end is CANCELLED whatever its exit code.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// TimedOut records that the node ended the job at its time limit.
	TimedOut bool `json:"timed_out,omitempty"`
	// Launched records that the batch host reported the job, so a job
	// the node no longer knows was lost rather than not yet delivered.
	Launched bool `json:"launched,omitempty"`
	// LaunchFailures counts the job's launches in a row that its nodes
	// could not carry out (NodeJobReport.LaunchFailed: nothing of the job
	// ran). Each requeues the job; at the controller's
	// scheduler.launch_fail_limit it is held instead. Any other requeue
	// starts the count again (ctld/launchfail.go).
	LaunchFailures int `json:"launch_failures,omitempty"`
	// LaunchFailNodes are the nodes those launches failed on, the latest
	// last: placement takes them only when no other node will do.
	LaunchFailNodes []string `json:"launch_fail_nodes,omitempty"`
	// RequeueRequested turns the end of the running incarnation into a
	// requeue instead of a final state.
	RequeueRequested bool `json:"requeue_requested,omitempty"`
	// CancelledBy is the uid that cancelled the job (sacct's
	// "CANCELLED by UID").
	CancelledBy *uint32 `json:"cancelled_by,omitempty"`
	// Cluster is the cluster the job ran on.
	Cluster string `json:"cluster,omitempty"`

	// ArrayJobID is the array's id (the job id its submission got) for
	// array jobs, 0 for other jobs. ArrayTaskID is the task this record
	// runs; it means nothing while ArrayPending is not empty.
	ArrayJobID  uint64 `json:"array_job_id,omitempty"`
	ArrayTaskID int    `json:"array_task_id,omitempty"`
	// ArrayPending holds, on the array's meta record, the tasks that
	// have not been split off into records of their own: one record
	// stands for thousands of waiting tasks, and a task gets its own
	// record (and job id) only when it starts or is held, cancelled or
	// updated alone. The last task takes over the meta record itself.
	ArrayPending TaskSet `json:"array_pending,omitempty"`
	// ArrayThrottle is the %N of --array: at most that many of the
	// array's tasks run at once (0 = no limit).
	ArrayThrottle int `json:"array_throttle,omitempty"`
	// SubmitToken is the submission's idempotency token
	// (SubmitRequest.Token), kept with the job so that a retried
	// submission finds it after a controller restart too.
	SubmitToken string `json:"submit_token,omitempty"`

	// Sharing state (queues, aging, preemption; see share.go).
	Share
}

// BatchHost is the node that runs the batch script ("" before start).
func (j *Job) BatchHost() string {
	if len(j.Alloc) == 0 {
		return ""
	}
	return j.Alloc[0].Node
}

// NodeNames lists the allocated nodes in allocation order.
func (j *Job) NodeNames() []string {
	out := make([]string, len(j.Alloc))
	for i, a := range j.Alloc {
		out[i] = a.Node
	}
	return out
}

// AllocCPUs sums the CPUs over the allocation.
func (j *Job) AllocCPUs() int {
	n := 0
	for _, a := range j.Alloc {
		n += a.CPUs
	}
	return n
}

// AllocGPUs sums the GPUs over the allocation.
func (j *Job) AllocGPUs() int {
	n := 0
	for _, a := range j.Alloc {
		n += len(a.GPUs)
	}
	return n
}

// ReqNodes is the node count the job asks for (at least 1).
func (s *JobSpec) ReqNodes() int {
	if s.Nodes > 0 {
		return s.Nodes
	}
	return 1
}

// ReqTasks is the total task count (-n, else tasks-per-node × nodes, else
// one per node).
func (s *JobSpec) ReqTasks() int {
	switch {
	case s.Tasks > 0:
		return s.Tasks
	case s.TasksPerNode > 0:
		return s.TasksPerNode * s.ReqNodes()
	}
	return s.ReqNodes()
}

// ReqCPUsPerTask is -c (at least 1).
func (s *JobSpec) ReqCPUsPerTask() int {
	if s.CPUsPerTask > 0 {
		return s.CPUsPerTask
	}
	return 1
}

// MinCPUsPerNode is the fewest CPUs each node of the job gives it
// (Slurm's pn_min_cpus, scontrol's MinCPUsNode): -c, times
// --ntasks-per-node unless --overcommit, and at least --mincpus.
func (s *JobSpec) MinCPUsPerNode() int {
	n := s.ReqCPUsPerTask()
	if s.TasksPerNode > 0 && !s.Overcommit {
		n *= s.TasksPerNode
	}
	return max(n, s.MinCPUs)
}

// ReqCPUs is the CPU count the job asks for over all its nodes, as
// squeue and scontrol show it before the job runs: tasks × -c (with
// --overcommit -c per node, its tasks sharing them), at least
// --mincpus per node and --cpus-per-gpu per GPU.
func (s *JobSpec) ReqCPUs() int {
	n := s.ReqTasks() * s.ReqCPUsPerTask()
	if s.Overcommit {
		n = s.ReqNodes() * s.ReqCPUsPerTask()
	}
	n = max(n, s.ReqNodes()*s.MinCPUs)
	if g := s.ReqGPUs() * s.CPUsPerGPU; g > n {
		n = g
	}
	return n
}

// ReqGPUs is the total GPU count the job asks for over all its nodes:
// whole GPUs, or for a sliced job the GPUs its slices go on (one per
// node when no count is given).
func (s *JobSpec) ReqGPUs() int {
	switch {
	case s.GPUs > 0:
		return s.GPUs
	case s.GPUsPerNode > 0:
		return s.GPUsPerNode * s.ReqNodes()
	case s.GPUsPerTask > 0:
		return s.GPUsPerTask * s.ReqTasks()
	case s.Sliced():
		return s.ReqNodes()
	}
	return 0
}

// Sliced reports whether the job asks for GPU slices (memory, compute
// or shards of shared GPUs) rather than whole GPUs.
func (s *JobSpec) Sliced() bool {
	return s.GPUMemMB > 0 || s.GPUComputePct > 0 || s.GPUShards > 0
}

// SubmitRequest is the body of POST /api/v1/jobs.
type SubmitRequest struct {
	Spec JobSpec `json:"spec"`
	// TestOnly validates and reports where the job would start, without
	// submitting it (sbatch --test-only).
	TestOnly bool `json:"test_only,omitempty"`
	// User and Group (sbatch --uid, --gid: a name or a number) submit
	// the job as another user or group; only root and operators may.
	User  string `json:"user,omitempty"`
	Group string `json:"group,omitempty"`
	// Token makes a submission idempotent: the controller answers a
	// repeat of the same caller's token (a retry whose first answer was
	// lost, perhaps across a controller restart) with the job the first
	// one created instead of a second job. Clients make it random.
	Token string `json:"token,omitempty"`
}

// MaxTokenLen bounds SubmitRequest.Token.
const MaxTokenLen = 128

// SubmitResponse answers a submission.
type SubmitResponse struct {
	JobID    uint64   `json:"job_id"`
	Warnings []string `json:"warnings,omitempty"`
	// For TestOnly: when and where the job would start.
	TestStart     time.Time `json:"test_start,omitzero"`
	TestNodes     string    `json:"test_nodes,omitempty"`
	TestCPUs      int       `json:"test_cpus,omitempty"`
	TestPartition string    `json:"test_partition,omitempty"`
}

// JobFilter selects jobs for listing, cancelling and accounting.
type JobFilter struct {
	// IDs match a job's id and, for arrays, the array id: "-j 7"
	// selects every task of array 7. Tasks select single array tasks
	// ("7_3"), whether split off already or still on the meta record.
	IDs        []uint64   `json:"ids,omitempty"`
	Tasks      []TaskRef  `json:"tasks,omitempty"`
	Users      []string   `json:"users,omitempty"`
	Names      []string   `json:"names,omitempty"`
	Partitions []string   `json:"partitions,omitempty"`
	Accounts   []string   `json:"accounts,omitempty"`
	States     []JobState `json:"states,omitempty"`
	// Since and Until bound sacct's window (-S, -E) on the job's
	// activity (it was eligible or running in the window).
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// All includes finished jobs that squeue no longer shows.
	All bool `json:"all,omitempty"`
	// Clusters are sacct -M's clusters whose accounting to read: none
	// means the controller's own, "all" every cluster of a shared
	// store. Only the accounting query reads it; live listings are the
	// controller's own cluster.
	Clusters []string `json:"clusters,omitempty"`
}

// JobList answers GET /api/v1/jobs.
type JobList struct {
	Jobs []Job     `json:"jobs"`
	Now  time.Time `json:"now"`
}

// CancelRequest is the body of POST /api/v1/jobs/cancel.
type CancelRequest struct {
	Filter JobFilter `json:"filter"`
	// Signal, when non-zero, is sent instead of cancelling. As in Slurm
	// it goes to the job's steps only, not the batch shell, unless
	// BatchOnly or Full says otherwise; SIGKILL without BatchOnly
	// cancels the job.
	Signal int `json:"signal,omitempty"`
	// BatchOnly sends the signal to the batch shell alone, not its
	// children (scancel -b); without Signal it sends SIGKILL there.
	BatchOnly bool `json:"batch_only,omitempty"`
	// Full sends the signal to the batch shell and its children, srun
	// among them, which passes it on to its tasks (scancel -f); it wins
	// over BatchOnly, which then only keeps SIGKILL from being a cancel
	// (scancel -b -f).
	Full bool `json:"full,omitempty"`
	// Steps are steps to cancel or, with Signal, to signal (scancel
	// J.S): only those steps' tasks get it, SIGKILL when no Signal is
	// given. Filter may then be empty.
	Steps []StepRef `json:"steps,omitempty"`
}

// CancelResponse says what a cancel did, job by job.
type CancelResponse struct {
	Results []JobResult `json:"results"`
}

// JobResult is the outcome of an action on one job; Error is empty on
// success.
type JobResult struct {
	JobID uint64 `json:"job_id"`
	// ID is the id as the request named it when that was an array task
	// ("7_3"), for messages; empty otherwise.
	ID    string `json:"id,omitempty"`
	Error string `json:"error,omitempty"`
}

// JobUpdate is scontrol's hold/release/requeue/update on jobs.
type JobUpdate struct {
	IDs []uint64 `json:"ids"`
	// Tasks name single array tasks ("7_3"); a task still on its
	// array's meta record is split off first, so that only it changes.
	Tasks  []TaskRef `json:"tasks,omitempty"`
	Action string    `json:"action"` // hold, uhold, release, requeue, update
	// Fields for update; nil means unchanged.
	TimeLimit *int64  `json:"time_limit,omitempty"`
	Name      *string `json:"name,omitempty"`
	Comment   *string `json:"comment,omitempty"`
	Partition *string `json:"partition,omitempty"`
	Priority  *uint32 `json:"priority,omitempty"`
	Nice      *int    `json:"nice,omitempty"`
	Account   *string `json:"account,omitempty"`
	// Dependency replaces a pending job's dependency ("" removes it).
	Dependency *string `json:"dependency,omitempty"`
	// ArrayThrottle changes an array's %N (0 = no limit).
	ArrayThrottle *int `json:"array_throttle,omitempty"`
}

// Event is one entry of a job's trail: a state change or a scheduling
// decision with its reason.
type Event struct {
	JobID   uint64    `json:"job_id"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	State   JobState  `json:"state,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
	Actor   string    `json:"actor,omitempty"`
}

// Event kinds.
const (
	EventSubmit   = "submit"
	EventPending  = "pending"
	EventStart    = "start"
	EventEnd      = "end"
	EventCancel   = "cancel"
	EventSignal   = "signal"
	EventHold     = "hold"
	EventRelease  = "release"
	EventRequeue  = "requeue"
	EventUpdate   = "update"
	EventNodeFail = "node_fail"
	EventLaunch   = "launch"
	// EventReclaim records a GPU memory reclaim step that changed a
	// running job without ending it (a slice grown into free memory), or
	// why reclaim could not act.
	EventReclaim = "reclaim"
	// EventBorrow: a job started on GPUs its queue borrowed from others.
	EventBorrow = "borrow"
	// EventPreempt: a job was chosen as a preemption victim (its
	// checkpoint signal sent); the message names the preemptor and why.
	EventPreempt = "preempt"
	// EventCheckpoint: a job acknowledged its checkpoint.
	EventCheckpoint = "checkpoint"
	// EventBackfill: a job started ahead of a reserved one because it
	// ends before the reservation or stays off its nodes.
	EventBackfill = "backfill"
	// EventStarving: a pending job passed the starvation threshold.
	EventStarving = "starving"
	// EventSuspend and EventResume: a CPU-only job stopped or continued.
	EventSuspend = "suspend"
	EventResume  = "resume"
)

// AuditRecord records who did what to which object.
type AuditRecord struct {
	Time   time.Time `json:"time"`
	UID    uint32    `json:"uid"`
	User   string    `json:"user"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Detail string    `json:"detail,omitempty"`
}
