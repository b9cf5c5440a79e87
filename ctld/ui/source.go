package ui

import (
	"net/http"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/topology"
)

// Source is what the dashboard reads, always for the caller of one
// request. The controller implements it with the functions its API
// handlers use (ctld/dashboard.go), so that a page never holds anything
// the API would refuse the same caller: private_data's rules are
// applied there, not here.
type Source interface {
	// Identity is who sent r, as the API's authentication established
	// it (Known false: nobody, on a public page).
	Identity(r *http.Request) Identity
	// Cluster is the controller's identity and the settings pages show.
	Cluster(r *http.Request) Cluster
	// Nodes lists nodes and partitions (GET /api/v1/nodes); an error
	// of class api.ErrPermissionDenied under private_data: nodes.
	Nodes(r *http.Request) (api.NodeList, error)
	// Jobs lists the jobs in memory that match f and that the caller
	// sees (GET /api/v1/jobs), in id order.
	Jobs(r *http.Request, f api.JobFilter) api.JobList
	// Running lists the running (and completing and suspended) jobs
	// the caller sees, with only what the cluster map draws: lighter
	// than Jobs on a cluster of thousands of running jobs.
	Running(r *http.Request) []RunningJob
	// Job returns one job, from memory or the store (scontrol show
	// job); api.ErrNotFound for a job that does not exist or is hidden.
	Job(r *http.Request, id uint64) (api.Job, error)
	// Events is the job's trail (tide events), or the API's refusal.
	Events(r *http.Request, id uint64) ([]api.Event, error)
	// Queues is the queue listing the caller may see (GET
	// /api/v1/queues).
	Queues(r *http.Request) api.QueueList
	// Usage is what the job uses, as far as the caller may see it.
	Usage(r *http.Request, j *api.Job) JobUsage
	// History is the cluster's recent utilisation, fragmentation and
	// queue use, as far as the caller may see them.
	History(r *http.Request) History
	// CheckToken verifies a token from `tide token` for the login page:
	// its user and expiry, or why it is refused.
	CheckToken(token string) (user string, expires time.Time, err error)
}

// Identity is who asks.
type Identity struct {
	User string
	// Operator: root, the controller's own user or one of operators.
	Operator bool
	// Known is false for a request that proved no identity.
	Known bool
	// Method is how the caller authenticated: MethodSocket, "jwt" or
	// "munge".
	Method string
}

// MethodSocket is Identity.Method of a caller on the unix socket,
// whose identity the kernel vouches for (SO_PEERCRED).
const MethodSocket = "socket"

// Remote reports whether the caller came over api_addr (with a token
// cookie or an Authorization header), where signing out means
// something.
func (id Identity) Remote() bool { return id.Known && id.Method != MethodSocket }

// Cluster is the controller's identity and what pages show of its
// settings.
type Cluster struct {
	Name, Version string
	Now, Started  time.Time
	// Scheduler is Slurm's name of the policy (sched/backfill, ...).
	Scheduler string
	// Tree is the switch topology (nil without one); read only.
	Tree *topology.Tree
	// Partitions names the partitions in configuration order.
	Partitions []string
}

// RunningJob is a job on the cluster map.
type RunningJob struct {
	ID uint64
	// Label is the id squeue prints (api.Job.ArrayID).
	Label string
	User  string
	Alloc []api.NodeAlloc
}

// JobUsage is what one job uses.
type JobUsage struct {
	// GPUs are the job's GPUs as their nodes last reported them.
	GPUs []GPUReading
	// Steps are the job's steps' usage: running values while the job
	// runs (sstat), else what was stored (sacct); nil when the caller
	// may not see it or nothing was measured.
	Steps []api.StepUsage
	// Series is the job's use over time, oldest first; nil when the
	// controller keeps none for it.
	Series []UsagePoint
	// Hidden says why usage is not shown ("" when it is).
	Hidden string
}

// GPUReading is one GPU of a job as its node last reported it.
type GPUReading struct {
	Node  string
	Index int
	Model string
	// MemoryMB is the GPU's memory; MemUsedMB and UtilPct its use by
	// every process on it (other slices' included), valid when Known.
	MemoryMB  int64
	MemUsedMB int64
	UtilPct   int
	Known     bool
	Healthy   bool
	// Slice: the job holds a slice of this GPU, of SliceMemMB memory
	// and SlicePct compute (either may be 0).
	Slice      bool
	SliceMemMB int64
	SlicePct   int
}

// UsagePoint is one sample of a job's use. A negative value is
// unknown.
type UsagePoint struct {
	Time time.Time
	// GPUUtilPct is the mean utilisation of the job's GPUs; GPUMemMB
	// the device memory its processes hold, summed over its GPUs.
	GPUUtilPct float64
	GPUMemMB   float64
	// CPUPct is CPU use in percent of one CPU (400 = four CPUs busy);
	// RSSMB the resident memory of its processes.
	CPUPct float64
	RSSMB  float64
}

// History is the cluster's recent past, sampled by the controller.
type History struct {
	// Every is the sampling interval.
	Every time.Duration
	// Samples are oldest first.
	Samples []Sample
	// ClusterHidden says why cluster-wide figures (utilisation,
	// fragmentation) are not shown to this caller ("" when they are);
	// Samples then carry only the queues the caller may see.
	ClusterHidden string
}

// Sample is the cluster at one time.
type Sample struct {
	Time time.Time
	// GPUs counts the GPUs of registered nodes; Allocated those jobs
	// hold (whole or by slices); Stranded the free GPUs no pending GPU
	// job's per-node request fits (tide_gpus_stranded).
	GPUs, Allocated, Stranded int
	// UtilPct is the mean utilisation the nodes measured over the GPUs
	// that report one; negative when none does.
	UtilPct float64
	// Running and Pending count jobs (an array's pending tasks each).
	Running, Pending int
	Queues           []QueueSample
}

// QueueSample is one queue at one time.
type QueueSample struct {
	Name                    string
	Used, Borrowed, Pending int
}
