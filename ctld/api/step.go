package api

import (
	"fmt"
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
	// Partition and Cluster are exported to the tasks.
	Partition string `json:"partition,omitempty"`
	Cluster   string `json:"cluster,omitempty"`
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

// StepRecord is a step in accounting (sacct's N.0, N.1 rows).
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
}

// StepList answers GET /api/v1/accounting/steps.
type StepList struct {
	Steps []StepRecord `json:"steps"`
}

// Event kinds of steps, in the job's trail.
const (
	EventStepStart = "step_start"
	EventStepEnd   = "step_end"
)
