package api

import (
	"slices"
	"strings"
	"time"

	"github.com/tide-hpc/tide/gres"
)

// NodeState is a node's base state; Drain is a flag on top of it.
type NodeState string

// Node base states.
const (
	NodeUnknown   NodeState = "UNKNOWN"
	NodeIdle      NodeState = "IDLE"
	NodeMixed     NodeState = "MIXED"
	NodeAllocated NodeState = "ALLOCATED"
	NodeDown      NodeState = "DOWN"
)

// Node is the controller's view of one node.
type Node struct {
	Name string `json:"name"`
	Addr string `json:"addr,omitempty"`
	// StepAddr is where the node daemon accepts srun's step connections
	// (host:port; empty when it has no step listener). Issue 7 steps.
	StepAddr   string    `json:"step_addr,omitempty"`
	Hostname   string    `json:"hostname,omitempty"`
	State      NodeState `json:"state"`
	Drain      bool      `json:"drain,omitempty"`
	Responding bool      `json:"responding"`
	CPUs       int       `json:"cpus"`
	MemoryMB   int64     `json:"memory_mb"`
	// TmpDiskMB is the node's temporary disk in MB, as its daemon
	// reported it (tided's tmp_disk_mb, by default the size of /tmp):
	// Slurm's TmpDisk, which --tmp asks for.
	TmpDiskMB  int64         `json:"tmp_disk_mb"`
	GPUs       []gres.Device `json:"gpus,omitempty"`
	Features   []string      `json:"features,omitempty"`
	Partitions []string      `json:"partitions,omitempty"`
	Switch     string        `json:"switch,omitempty"`

	AllocCPUs  int   `json:"alloc_cpus"`
	AllocMemMB int64 `json:"alloc_mem_mb"`
	AllocGPUs  []int `json:"alloc_gpus,omitempty"`

	Reason     string    `json:"reason,omitempty"`
	ReasonUser string    `json:"reason_user,omitempty"`
	ReasonTime time.Time `json:"reason_time,omitzero"`

	Version    string    `json:"version,omitempty"`
	OS         string    `json:"os,omitempty"`
	Arch       string    `json:"arch,omitempty"`
	BootTime   time.Time `json:"boot_time,omitzero"`
	Registered time.Time `json:"registered,omitzero"`
	LastSeen   time.Time `json:"last_seen,omitzero"`
	CPULoad    float64   `json:"cpu_load"`
	FreeMemMB  int64     `json:"free_mem_mb"`
	// GPUStatus is the last health and usage the node reported.
	GPUStatus []gres.Status `json:"gpu_status,omitempty"`
	// SharedGPUs lists the GPUs that running slices hold, in index order,
	// with what the slices commit on each. A GPU is free, whole-allocated
	// (in AllocGPUs but not here) or shared (here). The controller
	// replaces the slice on every change, never edits it in place.
	SharedGPUs []GPUShare `json:"shared_gpus,omitempty"`
}

// GPUShare is one GPU held by slices and what they commit on it, so that
// sinfo, scontrol and metrics can show how full shared GPUs are without
// summing every job's allocation.
type GPUShare struct {
	Index  int `json:"index"`
	Slices int `json:"slices"`
	// MemMB is the slices' committed memory; it may pass the GPU's
	// memory when the partition oversubscribes, and grows when reclaim
	// records a slice that overran.
	MemMB      int64 `json:"mem_mb"`
	ComputePct int   `json:"compute_pct,omitempty"`
}

// GPUCounts splits the node's GPUs into whole-allocated, shared by
// slices and free (unhealthy free GPUs included), for sinfo, scontrol
// and metrics.
func (n *Node) GPUCounts() (whole, shared, free int) {
	inUse := n.GPUsInUse()
	shared = len(n.SharedGPUs)
	return max(inUse-shared, 0), shared, max(len(n.GPUs)-inUse, 0)
}

// GPUMemoryMB returns the memory of GPU index (0 when the node does not
// report it).
func (n *Node) GPUMemoryMB(index int) int64 {
	for i := range n.GPUs {
		if n.GPUs[i].Index == index {
			return n.GPUs[i].MemoryMB
		}
	}
	return 0
}

// GPUModel returns the model of the node's GPUs ("" without GPUs).
func (n *Node) GPUModel() string {
	if len(n.GPUs) == 0 {
		return ""
	}
	return n.GPUs[0].ModelShort()
}

// GPUsInUse counts the distinct GPUs that jobs hold, whole or by
// slices. AllocGPUs lists a shared GPU once per slice on it, so its
// length overcounts; node state (ALLOCATED only when every GPU is in
// use) and GPU metrics should use this count.
func (n *Node) GPUsInUse() int {
	seen := make(map[int]struct{}, len(n.AllocGPUs))
	for _, g := range n.AllocGPUs {
		seen[g] = struct{}{}
	}
	return len(seen)
}

// SinfoState is sinfo's short state: idle, mix, alloc, drain, drng, down,
// unk, with a '*' when the node does not respond (Slurm's marker).
func (n *Node) SinfoState() string {
	var s string
	busy := n.AllocCPUs > 0 || len(n.AllocGPUs) > 0
	switch {
	case n.State == NodeDown:
		s = "down"
	case n.Drain && busy:
		s = "drng"
	case n.Drain:
		s = "drain"
	case n.State == NodeUnknown:
		s = "unk"
	case n.State == NodeAllocated:
		s = "alloc"
	case n.State == NodeMixed:
		s = "mix"
	default:
		s = "idle"
	}
	if !n.Responding && n.State != NodeUnknown {
		s += "*"
	}
	return s
}

// LongState is scontrol's State= value, e.g. IDLE+DRAIN or
// DOWN+NOT_RESPONDING.
func (n *Node) LongState() string {
	s := string(n.State)
	if n.Drain {
		s += "+DRAIN"
	}
	if !n.Responding && n.State != NodeUnknown {
		s += "+NOT_RESPONDING"
	}
	return s
}

// Partition is a named set of nodes with limits.
type Partition struct {
	Name        string   `json:"name"`
	NodesExpr   string   `json:"nodes_expr"`
	Nodes       []string `json:"nodes"`
	Default     bool     `json:"default,omitempty"`
	DefaultTime int64    `json:"default_time"`
	MaxTime     int64    `json:"max_time"`
	MaxNodes    int      `json:"max_nodes,omitempty"`
	// DefCPUsPerGPU and DefMemPerGPUMB are reserved per GPU for jobs that
	// do not ask (0 = not set).
	DefCPUsPerGPU  int   `json:"def_cpus_per_gpu,omitempty"`
	DefMemPerGPUMB int64 `json:"def_mem_per_gpu_mb,omitempty"`
	// Comm is the default --comm of the partition's jobs.
	Comm string `json:"comm,omitempty"`
	// Spread places jobs on the emptiest nodes first (policy spread).
	Spread bool `json:"spread,omitempty"`
	// GPUSlicing lets jobs take slices of shared GPUs (--gpu-mem,
	// --gpu-compute, --gres=shard/mps). GPUMemOversubscribe and
	// GPUComputeOversubscribe are the ratios a shared GPU's committed
	// memory and compute may reach (1.0 = exactly its capacity); 0 reads
	// as 1.0. ShardsPerGPU divides a GPU's memory into --gres=shard units.
	GPUSlicing              bool    `json:"gpu_slicing"`
	GPUMemOversubscribe     float64 `json:"gpu_mem_oversubscribe,omitempty"`
	GPUComputeOversubscribe float64 `json:"gpu_compute_oversubscribe,omitempty"`
	ShardsPerGPU            int     `json:"shards_per_gpu,omitempty"`
	// GPUMemHighWatermark is the fraction of a shared GPU's physical
	// memory above which the controller reclaims (grows the slice that
	// overran, else preempts the lowest-priority slice); see
	// docs/operations.md. 0 reads as the controller's default.
	GPUMemHighWatermark float64 `json:"gpu_mem_high_watermark,omitempty"`
	State               string  `json:"state"`
	// Priority is the partition's priority tier (Slurm's PriorityTier).
	Priority int `json:"priority_tier,omitempty"`
	// Access says who may submit to the partition.
	Access PartitionAccess `json:"access,omitzero"`
}

// PartitionAccess is Slurm's AllowGroups, AllowAccounts, AllowQos,
// DenyAccounts and DenyQos of a partition. An empty Allow list is ALL;
// a Deny list is only set when its Allow list is empty.
type PartitionAccess struct {
	AllowGroups   []string `json:"allow_groups,omitempty"`
	AllowAccounts []string `json:"allow_accounts,omitempty"`
	AllowQOS      []string `json:"allow_qos,omitempty"`
	DenyAccounts  []string `json:"deny_accounts,omitempty"`
	DenyQOS       []string `json:"deny_qos,omitempty"`
}

// GroupOK reports whether a user in groups may use the partition.
func (a *PartitionAccess) GroupOK(groups []string) bool {
	return len(a.AllowGroups) == 0 || slices.ContainsFunc(groups, func(g string) bool { return slices.Contains(a.AllowGroups, g) })
}

// AccountOK reports whether jobs of account may run in the partition.
func (a *PartitionAccess) AccountOK(account string) bool {
	return allowed(a.AllowAccounts, a.DenyAccounts, account)
}

// QOSOK reports whether jobs of class qos may run in the partition.
func (a *PartitionAccess) QOSOK(qos string) bool { return allowed(a.AllowQOS, a.DenyQOS, qos) }

func allowed(allow, deny []string, v string) bool {
	if len(allow) > 0 {
		return slices.Contains(allow, v)
	}
	return !slices.Contains(deny, v)
}

// FormatAccessList is an access list as scontrol show partition prints it: the names
// joined by commas, or ALL.
func FormatAccessList(l []string) string {
	if len(l) == 0 {
		return "ALL"
	}
	return strings.Join(l, ",")
}

// ClusterInfo answers GET /api/v1/cluster: the controller's identity and
// the settings clients show (scontrol show config).
type ClusterInfo struct {
	Name        string            `json:"name"`
	Version     string            `json:"version"`
	StartTime   time.Time         `json:"start_time"`
	Now         time.Time         `json:"now"`
	Config      map[string]string `json:"config,omitempty"`
	Partitions  []Partition       `json:"partitions"`
	CallerUID   uint32            `json:"caller_uid"`
	CallerUser  string            `json:"caller_user"`
	CallerAdmin bool              `json:"caller_admin"`
	// Limits are the controller's bounds on a submission, for clients
	// that check before sending.
	Limits SpecLimits `json:"limits"`
}

// NodeList answers GET /api/v1/nodes.
type NodeList struct {
	Nodes      []Node      `json:"nodes"`
	Partitions []Partition `json:"partitions"`
	Now        time.Time   `json:"now"`
}

// NodeUpdate is scontrol update NodeName=… State=DRAIN|RESUME|DOWN Reason=….
type NodeUpdate struct {
	Names  []string `json:"names"`
	State  string   `json:"state"`
	Reason string   `json:"reason,omitempty"`
}

// --- node daemon protocol (TCP, cluster key) ---

// NodeJobState is what a node daemon knows of a job it launched.
type NodeJobState string

// Node-side job states.
const (
	NodeJobRunning  NodeJobState = "running"
	NodeJobFinished NodeJobState = "finished"
	// NodeJobLaunching is a job whose launch the node has begun but not
	// committed (its job directory is not complete): nothing of it runs
	// yet, and a node daemon that dies now leaves nothing behind, so the
	// controller does not count it launched (it launches it again when
	// the node no longer reports it) but may already kill it.
	NodeJobLaunching NodeJobState = "launching"
)

// NodeJobReport is a node daemon's report of one job incarnation. Reports
// of finished jobs are kept on the node until the controller acknowledges
// them, so neither side's restart loses an exit status.
type NodeJobReport struct {
	JobID     uint64       `json:"job_id"`
	Restart   int          `json:"restart"`
	State     NodeJobState `json:"state"`
	StartTime time.Time    `json:"start_time,omitzero"`
	EndTime   time.Time    `json:"end_time,omitzero"`
	Exit      ExitStatus   `json:"exit"`
	// TimedOut: the node ended the job at its time limit. Killed: the
	// node ended it on the controller's cancel.
	TimedOut bool `json:"timed_out,omitempty"`
	Killed   bool `json:"killed,omitempty"`
	// Error explains a launch that failed before the script ran.
	Error string `json:"error,omitempty"`
	// OOM: the kernel killed a process of the job for exceeding its
	// memory limit (the job ends OUT_OF_MEMORY).
	OOM bool `json:"oom,omitempty"`
	// CheckpointAck: the job touched its $TIDE_CHECKPOINT_ACK file
	// (reported while it runs, after a checkpoint signal).
	CheckpointAck bool `json:"checkpoint_ack,omitempty"`
	// LaunchFailed: the node could not launch the job (its job
	// directory, its supervisor, the launch timed out), so nothing of it
	// ran and another node may succeed; Error says why. An Error without
	// it is the job's own (its files, its work directory).
	LaunchFailed bool `json:"launch_failed,omitempty"`
	// Usage is what the batch step used on the node (finished reports;
	// see usage.go).
	Usage *NodeUsage `json:"usage,omitempty"`
}

// NodeRegistration is the body of POST /api/v1/node/register.
type NodeRegistration struct {
	Name     string `json:"name"`
	Hostname string `json:"hostname"`
	Addr     string `json:"addr,omitempty"`
	// StepAddr is the bound step listener (issue 7 steps); a host of
	// 0.0.0.0 or :: means "the node's own address".
	StepAddr string `json:"step_addr,omitempty"`
	CPUs     int    `json:"cpus"`
	MemoryMB int64  `json:"memory_mb"`
	// TmpDiskMB is the node's temporary disk in MB (Slurm's TmpDisk;
	// tided's tmp_disk_mb); 0 from a daemon that does not report it.
	TmpDiskMB int64           `json:"tmp_disk_mb,omitempty"`
	GPUs      []gres.Device   `json:"gpus,omitempty"`
	Features  []string        `json:"features,omitempty"`
	Version   string          `json:"version"`
	OS        string          `json:"os,omitempty"`
	Arch      string          `json:"arch,omitempty"`
	BootTime  time.Time       `json:"boot_time,omitzero"`
	Jobs      []NodeJobReport `json:"jobs,omitempty"`
	// Seq numbers Jobs in the node's sequence of reports (see
	// NodeSyncRequest.Seq); a registration starts the controller's
	// count for the node afresh.
	Seq uint64 `json:"seq,omitempty"`
}

// NodeSyncRequest is the body of POST /api/v1/node/sync: the heartbeat,
// carrying every job the node knows. The controller answers at once when
// it has commands or the request carries news, and otherwise holds the
// request up to WaitMS so that new work reaches the node without polling
// delay.
type NodeSyncRequest struct {
	Name   string          `json:"name"`
	Jobs   []NodeJobReport `json:"jobs,omitempty"`
	WaitMS int             `json:"wait_ms,omitempty"`
	// Seq grows with every report the node takes of its jobs. tided
	// sends its held long poll and its at-once reports on different
	// connections, so a request can reach the controller after a newer
	// one: the controller ignores the Jobs (and the load and GPU
	// readings) of a request whose Seq is not above the last it applied,
	// which would otherwise make a finished job look running again or a
	// just-launched one look lost. Zero (an older node daemon) is never
	// stale. tided starts the count from its start time in nanoseconds,
	// so that a restarted daemon's reports stay above its predecessor's.
	Seq uint64 `json:"seq,omitempty"`
	// GPUStatus is the GPUs' health and usage, sent with each new reading
	// (every few seconds, at once after an XID error) and absent from the
	// syncs in between: the controller keeps the last one.
	GPUStatus []gres.Status `json:"gpu_status,omitempty"`
	CPULoad   float64       `json:"cpu_load,omitempty"`
	FreeMemMB int64         `json:"free_mem_mb,omitempty"`
	// GPUProcJobs maps the host pids of GPUStatus's processes to the jobs
	// they belong to, as far as the node can tell (a process in a job's
	// session). The controller uses it to find the slice that overran a
	// shared GPU; pids missing here are not attributed to any job.
	GPUProcJobs map[int]uint64 `json:"gpu_proc_jobs,omitempty"`
	// HostedGen is the NodeSyncResponse.HostedGen of the hosted-job list
	// the node holds (zero before it got one): the controller sends the
	// list again while this differs from its own.
	HostedGen uint64 `json:"hosted_gen,omitempty"`
	// Usage reports the node's part of steps (usage.go): the final
	// usage of srun steps that ended here, and the running values of
	// batch and srun steps, taken every acct_gather_frequency.
	Usage []NodeUsage `json:"usage,omitempty"`
}

// NodeSyncResponse carries the controller's commands for a node.
type NodeSyncResponse struct {
	Launch  []LaunchSpec    `json:"launch,omitempty"`
	Signals []SignalCommand `json:"signals,omitempty"`
	Limits  []LimitUpdate   `json:"limits,omitempty"`
	// Ack lists finished reports the controller has stored; the node
	// may forget them.
	Ack []JobRef `json:"ack,omitempty"`
	// Forget lists incarnations the controller no longer wants on this
	// node (cancelled before launch, requeued, or unknown): kill if
	// running and drop.
	Forget []JobRef `json:"forget,omitempty"`
	// Unregistered asks the node to register again (the controller lost
	// or never had its registration).
	Unregistered bool `json:"unregistered,omitempty"`
	// StepKey is the controller's public key for step grants (Ed25519,
	// 32 bytes in standard base64), sent in registration answers. The
	// node pins it: see docs/architecture.md "Steps".
	StepKey string `json:"step_key,omitempty"`
	// Hosted is, when HostedGen is set, the complete list of jobs that
	// hold a share of the node without the node having launched them
	// (absent: none). HostedGen names that list (a hash of it); the node
	// echoes it in NodeSyncRequest.HostedGen, and the controller repeats
	// the list until the echo matches.
	Hosted    []HostedJob `json:"hosted,omitempty"`
	HostedGen uint64      `json:"hosted_gen,omitempty"`
	// Epoch is the answering primary's lease epoch (PingResponse.Epoch;
	// 0 without a lease). A node keeps the highest it has seen and
	// ignores answers of a lower one: they come from a controller that
	// has since lost the lease.
	Epoch uint64 `json:"epoch,omitempty"`
}

// HostedJob is a running job that holds a share of a node which did not
// launch it: an allocation-only job (salloc, srun outside a batch job),
// or a job whose batch script runs on another node. A node daemon starts
// steps only of the jobs it launched and of these, as their user.
type HostedJob struct {
	JobRef
	UserID  uint32 `json:"user_id"`
	GroupID uint32 `json:"group_id"`
}

// JobRef names one incarnation of a job.
type JobRef struct {
	JobID   uint64 `json:"job_id"`
	Restart int    `json:"restart"`
}

// SignalCommand asks a node to signal or kill a job.
type SignalCommand struct {
	JobRef
	// Signal is sent to the batch shell's process group (the shell and
	// its children, scancel --full), unless BatchOnly or Steps narrows
	// it. With Kill set the node sends SIGTERM (or Signal if set), waits
	// the kill wait, then SIGKILL, and reports the job as killed.
	Signal int  `json:"signal,omitempty"`
	Kill   bool `json:"kill,omitempty"`
	// BatchOnly sends Signal to the batch shell alone, not its children
	// (scancel --batch, --signal=B:).
	BatchOnly bool `json:"batch_only,omitempty"`
	// Steps sends Signal to the tasks of the job's steps running on the
	// node and to nothing else, the batch shell included: Slurm's
	// default target of scancel --signal and --signal=SIG@TIME. Any
	// node of the job may get it, not only the batch host; one that
	// runs no step of the job does nothing.
	Steps bool `json:"steps,omitempty"`
	// StepIDs, with Steps, narrows the signal to these steps of the job
	// (scancel J.S); a SIGKILL for them cancels them.
	StepIDs []uint32 `json:"step_ids,omitempty"`
}

// LimitUpdate changes a running job's time limit.
type LimitUpdate struct {
	JobRef
	TimeLimit int64 `json:"time_limit"`
}

// LaunchSpec is everything a node needs to start a batch job.
type LaunchSpec struct {
	JobRef
	Name      string `json:"name"`
	UserID    uint32 `json:"user_id"`
	GroupID   uint32 `json:"group_id"`
	User      string `json:"user"`
	Partition string `json:"partition"`
	Account   string `json:"account,omitempty"`
	Cluster   string `json:"cluster"`
	Script    string `json:"script"`
	// Args are the script's arguments (after the script path on sbatch's
	// command line).
	Args       []string `json:"args,omitempty"`
	WorkDir    string   `json:"work_dir"`
	SubmitDir  string   `json:"submit_dir"`
	SubmitHost string   `json:"submit_host,omitempty"`
	Env        []string `json:"env,omitempty"`
	Stdout     string   `json:"stdout"`
	Stderr     string   `json:"stderr,omitempty"`
	Stdin      string   `json:"stdin,omitempty"`
	OpenMode   string   `json:"open_mode,omitempty"`
	// TimeLimit in seconds (Infinite for none), counted from StartTime.
	TimeLimit int64       `json:"time_limit"`
	StartTime time.Time   `json:"start_time"`
	KillWait  int64       `json:"kill_wait"`
	Signal    *SignalSpec `json:"signal,omitempty"`
	// Alloc lists every node of the job; the batch script runs on the
	// first.
	Alloc       []NodeAlloc `json:"alloc"`
	NumTasks    int         `json:"num_tasks"`
	CPUsPerTask int         `json:"cpus_per_task"`
	GPUUUIDs    []string    `json:"gpu_uuids,omitempty"`
	// Array is set when the job is an array task: tided exports it as
	// SLURM_ARRAY_* and expands %A and %a in output patterns with it.
	Array *ArrayLaunch `json:"array,omitempty"`
	// ContainerImage and ContainerMounts are the job's --container-image
	// and --container-mounts: set, the node runs the job as a containerd
	// task instead of a process.
	ContainerImage  string           `json:"container_image,omitempty"`
	ContainerMounts []ContainerMount `json:"container_mounts,omitempty"`
	// QOS is the job's class (SLURM_JOB_QOS); empty when it has none.
	QOS string `json:"qos,omitempty"`
	// Request is what the job asked for that the batch environment
	// reports (SLURM_GPUS, SLURM_MEM_PER_NODE, ...); nil from a
	// controller that does not send it.
	Request *EnvRequest `json:"request,omitempty"`
	// TopoAddr and TopoPattern are the batch host's place in the switch
	// tree, Slurm's SLURM_TOPOLOGY_ADDR and SLURM_TOPOLOGY_ADDR_PATTERN
	// ("spine.s1.gpu01", "switch.switch.node"); empty from a controller
	// that does not send them.
	TopoAddr    string `json:"topo_addr,omitempty"`
	TopoPattern string `json:"topo_pattern,omitempty"`
}

// EnvRequest is the part of a job's request that Slurm reports in the
// job's environment: the options as the controller accepted them, zero
// where not given. MemPerCPUMB holds the cluster's default memory per
// CPU when the job asked for no memory and the cluster has one, as
// Slurm's DefMemPerCPU shows in SLURM_MEM_PER_CPU.
type EnvRequest struct {
	GPUs         int    `json:"gpus,omitempty"`
	GPUsPerNode  int    `json:"gpus_per_node,omitempty"`
	GPUsPerTask  int    `json:"gpus_per_task,omitempty"`
	GPUType      string `json:"gpu_type,omitempty"`
	GPUShards    int    `json:"gpu_shards,omitempty"`
	CPUsPerGPU   int    `json:"cpus_per_gpu,omitempty"`
	TasksPerNode int    `json:"tasks_per_node,omitempty"`
	// MemPerNodeMB is --mem (MemWholeNode for --mem=0), MemPerCPUMB
	// --mem-per-cpu and MemPerGPUMB --mem-per-gpu.
	MemPerNodeMB int64 `json:"mem_per_node_mb,omitempty"`
	MemPerCPUMB  int64 `json:"mem_per_cpu_mb,omitempty"`
	MemPerGPUMB  int64 `json:"mem_per_gpu_mb,omitempty"`
	// Overcommit is --overcommit (SLURM_OVERCOMMIT=1).
	Overcommit bool `json:"overcommit,omitempty"`
}

// EnvRequestOf is s's EnvRequest; defMemPerCPU is the cluster's default
// memory per CPU (0: none).
func EnvRequestOf(s *JobSpec, defMemPerCPU int64) *EnvRequest {
	r := &EnvRequest{GPUs: s.GPUs, GPUsPerNode: s.GPUsPerNode, GPUsPerTask: s.GPUsPerTask, GPUType: s.GPUType,
		GPUShards: s.GPUShards, CPUsPerGPU: s.CPUsPerGPU, TasksPerNode: s.TasksPerNode,
		MemPerNodeMB: s.MemPerNodeMB, MemPerCPUMB: s.MemPerCPUMB, MemPerGPUMB: s.MemPerGPUMB,
		Overcommit: s.Overcommit}
	if r.MemPerNodeMB == 0 && r.MemPerCPUMB == 0 && r.MemPerGPUMB == 0 && defMemPerCPU > 0 {
		r.MemPerCPUMB = defMemPerCPU
	}
	return r
}

// ArrayLaunch describes the array task a launch runs: its array id and
// task id, and the whole array's task count, lowest and highest id and
// step (SLURM_ARRAY_TASK_COUNT, _MIN, _MAX, _STEP).
type ArrayLaunch struct {
	JobID uint64 `json:"job_id"`
	Task  int    `json:"task"`
	Count int    `json:"count"`
	Min   int    `json:"min"`
	Max   int    `json:"max"`
	Step  int    `json:"step"`
}
