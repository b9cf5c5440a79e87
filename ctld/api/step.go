package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// StepRequest is the body of POST /api/v1/jobs/{id}/steps: srun asking
// to run a job step inside a running allocation. Zero counts mean "not
// given"; the controller lays the step out (see the Nodes, Tasks and
// TasksPerNode rules in docs/architecture.md "Steps").
type StepRequest struct {
	// Argv is the command every task runs; Argv[0] is resolved on the
	// node with the task's PATH and Cwd.
	Argv []string `json:"argv"`
	// Name is the step's name in accounting (default: Argv[0]'s base).
	Name string `json:"name,omitempty"`
	// Nodes is -N, Tasks -n, TasksPerNode --ntasks-per-node,
	// CPUsPerTask -c and GPUsPerTask --gpus-per-task.
	Nodes        int `json:"nodes,omitempty"`
	Tasks        int `json:"tasks,omitempty"`
	TasksPerNode int `json:"tasks_per_node,omitempty"`
	CPUsPerTask  int `json:"cpus_per_task,omitempty"`
	GPUsPerTask  int `json:"gpus_per_task,omitempty"`
	// Cwd is where the tasks start; Env their environment before the
	// per-task variables.
	Cwd string   `json:"cwd"`
	Env []string `json:"env,omitempty"`
	// Pty runs one task in a pseudo-terminal (srun --pty).
	Pty bool `json:"pty,omitempty"`

	// The step's own resources inside the allocation (see "Steps" in
	// docs/architecture.md). Exact (--exact, implied by -c and
	// --exclusive) gives the step only the CPUs its tasks ask for;
	// without it the step takes every CPU of the job on its nodes.
	// Overlap (--overlap) shares the step's resources with the other
	// steps: it neither waits for them nor holds them. Overcommit (-O)
	// lets more tasks than CPUs run.
	Exact      bool `json:"exact,omitempty"`
	Overlap    bool `json:"overlap,omitempty"`
	Overcommit bool `json:"overcommit,omitempty"`
	// Whole (--whole) takes every free CPU of the job on the step's
	// nodes even where -c would imply --exact.
	Whole bool `json:"whole,omitempty"`
	// GPUs is --gpus (the step's total, spread over its nodes) and
	// GPUsPerNode --gpus-per-node (or --gres=gpu:N); without any GPU
	// option every task sees the job's GPUs on its node and the step
	// holds none of them.
	GPUs        int `json:"gpus,omitempty"`
	GPUsPerNode int `json:"gpus_per_node,omitempty"`
	// MemPerNodeMB is --mem and MemPerCPUMB --mem-per-cpu, in MB; the
	// step holds that much of the job's memory on each node. Zero asks
	// for none (the step may use the job's memory, holding none).
	MemPerNodeMB int64 `json:"mem_per_node_mb,omitempty"`
	MemPerCPUMB  int64 `json:"mem_per_cpu_mb,omitempty"`
	// NodeList (-w) and Exclude (-x) pick or leave out nodes of the
	// job; Relative (-r, --relative) starts the step at that node of
	// the job (counted from 0); nil for none.
	NodeList []string `json:"nodelist,omitempty"`
	Exclude  []string `json:"exclude,omitempty"`
	Relative *int     `json:"relative,omitempty"`
	// Distribution is -m's first part: block (default), cyclic,
	// plane=N or arbitrary (laid out as TaskHosts says, else as block).
	Distribution string `json:"distribution,omitempty"`
	// TaskHosts (-m arbitrary with SLURM_HOSTFILE) names the node of
	// each task, task 0 first: the step runs on those nodes of the job,
	// rank i on TaskHosts[i].
	TaskHosts []string `json:"task_hosts,omitempty"`
	// TimeLimit is the step's -t in seconds (0: the job's end).
	TimeLimit int64 `json:"time_limit,omitempty"`
	// GPUBind is --gpu-bind: how each task's GPUs are chosen among the
	// step's on its node (closest, map_gpu:, mask_gpu:, single:N,
	// per_task:N, none; a "verbose," prefix reports it).
	GPUBind string `json:"gpu_bind,omitempty"`
	// CPUBind is --cpu-bind as given; the node binds each task with
	// sched_setaffinity (noded/steptask.go).
	CPUBind string `json:"cpu_bind,omitempty"`
	// TaskArgv is --multi-prog's configuration read by srun: the
	// command of each task by global rank (%t and %o expanded), in
	// place of Argv; it must name every task of the step.
	TaskArgv [][]string `json:"task_argv,omitempty"`
	// TaskProlog and TaskEpilog run before and after each task, as its
	// user; the prolog's "export NAME=value" lines set the task's
	// environment (--task-prolog, --task-epilog).
	TaskProlog string `json:"task_prolog,omitempty"`
	TaskEpilog string `json:"task_epilog,omitempty"`
	// MPI is --mpi: "none" or "pmi2" (its environment only).
	MPI string `json:"mpi,omitempty"`
	// PreserveEnv (-E) keeps SLURM_NNODES and SLURM_NTASKS of Env in
	// the tasks' environment rather than the step's counts.
	PreserveEnv bool `json:"preserve_env,omitempty"`
	// SrunHost and SrunPID name the srun that runs the step, for
	// scontrol show step (SrunHost=host:pid).
	SrunHost string `json:"srun_host,omitempty"`
	SrunPID  int    `json:"srun_pid,omitempty"`
}

// StepBusy is the text of a step that must wait for resources other
// steps of its job hold (Slurm's ESLURM_NODES_BUSY). The controller
// answers ErrConflict with it; srun retries ("step creation temporarily
// disabled") unless --immediate says not to wait.
const StepBusy = "Requested nodes are busy"

// StepRef names one step of a job: scancel J.S.
type StepRef struct {
	JobID  uint64 `json:"job_id"`
	StepID uint32 `json:"step_id"`
}

// String is "J.S".
func (r StepRef) String() string { return fmt.Sprintf("%d.%d", r.JobID, r.StepID) }

// ParseStepRef reads "J.S"; ok is false when s names no step.
func ParseStepRef(s string) (StepRef, bool) {
	j, st, found := strings.Cut(s, ".")
	if !found {
		return StepRef{}, false
	}
	jid, err := strconv.ParseUint(j, 10, 64)
	if err != nil || jid == 0 {
		return StepRef{}, false
	}
	sid, err := strconv.ParseUint(st, 10, 32)
	if err != nil {
		return StepRef{}, false
	}
	return StepRef{JobID: jid, StepID: uint32(sid)}, true
}

// StepNode is one node's part of a step.
type StepNode struct {
	Name string `json:"name"`
	// Addr is the node daemon's step listener, host:port.
	Addr string `json:"addr"`
	// Ranks are the global task ids (SLURM_PROCID) run on this node, in
	// local order (SLURM_LOCALID is the index).
	Ranks []int `json:"ranks"`
	// GPUs holds, per local task, the GPU indices the task sees.
	GPUs [][]int `json:"gpus,omitempty"`
	// CPUs is the job's CPU count on the node.
	CPUs int `json:"cpus"`
	// MemoryMB is the job's memory on the node (the step's cgroup limit
	// where the node runs no batch script of the job); GPUMemMB and
	// GPUComputePct are its slice size when its GPUs there are slices.
	MemoryMB      int64 `json:"memory_mb,omitempty"`
	GPUMemMB      int64 `json:"gpu_mem_mb,omitempty"`
	GPUComputePct int   `json:"gpu_compute_pct,omitempty"`
	// JobGPUs are the job's GPU indices on the node (SLURM_JOB_GPUS),
	// whichever of them the step's tasks see.
	JobGPUs []int `json:"job_gpus,omitempty"`
	// StepCPUs and StepMemMB are what the step holds of the job's CPUs
	// and memory on the node (all of the job's CPUs for a step without
	// --exact; 0 memory for one without --mem), and StepGPUs the GPUs
	// it holds (none without a GPU option, its tasks then seeing
	// JobGPUs).
	StepCPUs  int   `json:"step_cpus,omitempty"`
	StepMemMB int64 `json:"step_mem_mb,omitempty"`
	StepGPUs  []int `json:"step_gpus,omitempty"`
	// TopoAddr and TopoPattern are the node's place in the switch tree
	// (SLURM_TOPOLOGY_ADDR, SLURM_TOPOLOGY_ADDR_PATTERN); empty from a
	// controller that does not send them.
	TopoAddr    string `json:"topo_addr,omitempty"`
	TopoPattern string `json:"topo_pattern,omitempty"`
}

// StepGrant is what the controller grants a step: where its tasks run
// and as whom. It travels signed (SignedGrant), so that a node daemon can
// trust it without asking the controller; the node still checks that
// the job (JobID, Restart) runs there under UserID and GroupID.
type StepGrant struct {
	JobID uint64 `json:"job_id"`
	// Restart is the job's incarnation (Job.Restarts): a grant of an
	// earlier run is no grant for a requeued job.
	Restart int    `json:"restart"`
	StepID  uint32 `json:"step_id"`
	JobName string `json:"job_name"`
	UserID  uint32 `json:"user_id"`
	GroupID uint32 `json:"group_id"`
	User    string `json:"user"`
	// Partition, Cluster, Account and QOS are exported to the tasks.
	Partition string `json:"partition,omitempty"`
	Cluster   string `json:"cluster,omitempty"`
	Account   string `json:"account,omitempty"`
	QOS       string `json:"qos,omitempty"`
	// Issued is when the controller signed the grant. Expires is when the
	// grant stops being good for starting the step: shortly after Issued
	// (the time srun needs to reach the nodes), never after JobEnd. Node
	// daemons refuse it past Expires, and start a step once per node.
	Issued  time.Time `json:"issued"`
	Expires time.Time `json:"expires"`
	// JobEnd is the job's end at its time limit (far future for
	// unlimited jobs): node daemons end the step's tasks when it passes.
	JobEnd time.Time `json:"job_end"`
	// JobNodes are every node of the job, in allocation order.
	JobNodes []string   `json:"job_nodes"`
	Nodes    []StepNode `json:"nodes"`
	NTasks   int        `json:"ntasks"`
	Argv     []string   `json:"argv"`
	Cwd      string     `json:"cwd"`
	Env      []string   `json:"env,omitempty"`
	Pty      bool       `json:"pty,omitempty"`
	// What the node does for each task (noded/steptask.go): CPUBind,
	// GPUBind (reported with its verbose prefix; the GPUs themselves
	// are in Nodes), TaskArgv, TaskProlog, TaskEpilog and MPI, as in
	// StepRequest.
	CPUBind    string     `json:"cpu_bind,omitempty"`
	GPUBind    string     `json:"gpu_bind,omitempty"`
	TaskArgv   [][]string `json:"task_argv,omitempty"`
	TaskProlog string     `json:"task_prolog,omitempty"`
	TaskEpilog string     `json:"task_epilog,omitempty"`
	MPI        string     `json:"mpi,omitempty"`
	// PreserveEnv: see StepRequest.
	PreserveEnv bool `json:"preserve_env,omitempty"`
}

// NodeIndex returns the index of node name in the step (-1 if absent).
func (g *StepGrant) NodeIndex(name string) int {
	for i, n := range g.Nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// ID is the step's display id, "N.S".
func (g *StepGrant) ID() string { return fmt.Sprintf("%d.%d", g.JobID, g.StepID) }

// SignedGrant is a StepGrant as the controller encoded it (Body, JSON)
// and its credential: the Ed25519 signature of Body by the controller's
// step key, in standard base64 (see internal/stepcred). Body is kept as
// bytes so that what is verified is exactly what was signed.
type SignedGrant struct {
	Body []byte `json:"body"`
	Cred string `json:"cred"`
}

// StepResponse answers a StepRequest.
type StepResponse struct {
	Grant SignedGrant `json:"grant"`
	// CA is the cluster CA's certificate (PEM) when the nodes serve
	// their step listeners over TLS: srun connects to each node over
	// TLS and checks that it presents a certificate of this CA naming
	// it. Empty: plain TCP (a controller without TLS).
	CA string `json:"ca,omitempty"`
}

// StepEnd is the body of POST /api/v1/jobs/{id}/steps/{step}/end: srun
// reporting how the step ended (the highest task exit).
type StepEnd struct {
	Exit ExitStatus `json:"exit"`
	// Cancelled: srun tore the step down on a signal or a task failure
	// with --kill-on-bad-exit.
	Cancelled bool `json:"cancelled,omitempty"`
}

// ReleaseRequest is the body of POST /api/v1/jobs/{id}/release: srun or
// salloc giving an allocation-only job back. The job ends COMPLETED for
// exit 0:0 and FAILED otherwise.
type ReleaseRequest struct {
	Exit ExitStatus `json:"exit"`
}

// StepRecord is a step in accounting (sacct's N.0, N.1 rows), and of a
// running job the controller's view of its live steps (scontrol show
// step, squeue -s, sstat).
type StepRecord struct {
	JobID  uint64     `json:"job_id"`
	StepID uint32     `json:"step_id"`
	Name   string     `json:"name"`
	State  JobState   `json:"state"`
	Exit   ExitStatus `json:"exit"`
	UserID uint32     `json:"user_id"`
	Start  time.Time  `json:"start"`
	End    time.Time  `json:"end,omitzero"`
	Nodes  []string   `json:"nodes"`
	NTasks int        `json:"ntasks"`
	CPUs   int        `json:"cpus"`
	GPUs   int        `json:"gpus,omitempty"`
	// MemoryMB is the memory the step holds on all its nodes together
	// (0: none of its own, it uses the job's).
	MemoryMB int64 `json:"memory_mb,omitempty"`
	// Layout is the step's part on each of its nodes, in Nodes' order;
	// absent from records of steps older than it.
	Layout []StepNodeUse `json:"layout,omitempty"`
	// TimeLimit is the step's own -t in seconds (0: the job's).
	TimeLimit int64 `json:"time_limit,omitempty"`
	// Exact and Overlap are how the step shares the allocation (see
	// StepRequest).
	Exact   bool `json:"exact,omitempty"`
	Overlap bool `json:"overlap,omitempty"`
	// SrunHost and SrunPID name the srun that runs the step.
	SrunHost string `json:"srun_host,omitempty"`
	SrunPID  int    `json:"srun_pid,omitempty"`
	// Argv is the step's command.
	Argv []string `json:"argv,omitempty"`
}

// StepNodeUse is a step's part on one node: its tasks (global ranks),
// and the CPUs, memory and GPUs it holds there.
type StepNodeUse struct {
	Node     string `json:"node"`
	Tasks    []int  `json:"tasks"`
	CPUs     int    `json:"cpus"`
	MemoryMB int64  `json:"memory_mb,omitempty"`
	GPUs     []int  `json:"gpus,omitempty"`
}

// StepList answers GET /api/v1/accounting/steps.
type StepList struct {
	Steps []StepRecord `json:"steps"`
	// Cluster names the other cluster whose steps these are when the
	// request asked for one (&cluster=), so that a client can tell them
	// from the answer of a controller that ignores the parameter.
	Cluster string `json:"cluster,omitempty"`
}

// Event kinds of steps, in the job's trail.
const (
	EventStepStart = "step_start"
	EventStepEnd   = "step_end"
)
