package noded

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/internal/envlist"
	"github.com/tide-hpc/tide/noded/jobenv"
	"github.com/tide-hpc/tide/noded/runtime"
)

// The environment rules a batch script shares with srun's tasks live in
// noded/jobenv; these names keep the daemon's code in its own words.
const defaultPath = jobenv.DefaultPath

var (
	nodeAlloc      = jobenv.NodeAlloc
	mergeWithTwins = jobenv.MergeWithTwins
	setSliceEnv    = jobenv.SetSliceEnv
	withMPSEnv     = jobenv.WithMPSEnv
	tideTwin       = jobenv.TideTwin
	compressCounts = jobenv.CompressCounts
	umaskFromEnv   = jobenv.UmaskFromEnv
)

// BuildEnv returns the batch script's environment: the environment
// captured at submit, overridden by the SLURM_* variables slurmstepd
// sets for a batch step (compare samples/job-env*.txt) and a TIDE_* twin
// of each (SLURMD_NODENAME's twin is TIDE_NODENAME). SLURM_TASK_PID is
// added by the exec child, which alone knows the pid.
//
// Like Slurm, SLURM_ARRAY_* appear only on array tasks,
// SLURM_RESTART_COUNT only on a requeued job, SLURM_JOB_ACCOUNT and
// SLURM_JOB_QOS only when the job has them, SLURM_NTASKS/SLURM_NPROCS
// and SLURM_CPUS_PER_TASK only when the launch carries them, the
// request's variables (SLURM_GPUS, SLURM_MEM_PER_NODE, ...) only for
// the options given (setRequestEnv), and the GPU variables only when
// this node gives the job GPUs. SLURM_UMASK and SLURM_RLIMIT_* are
// applied by the launcher and removed, as slurmstepd does. BuildEnv is pure.
func BuildEnv(spec *api.LaunchSpec, node string) []string {
	// slurmstepd applies SLURM_UMASK (umaskFromEnv) and SLURM_RLIMIT_*
	// (planRlimits) and takes them out of the batch script's environment.
	e := envlist.New(len(spec.Env) + 64)
	for _, kv := range spec.Env {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" && k != "SLURM_UMASK" && !strings.HasPrefix(k, "SLURM_RLIMIT_") {
			e.SetEntry(k, kv)
		}
	}
	if !e.Has("PATH") {
		e.Set("PATH", defaultPath)
	}

	mine := nodeAlloc(spec, node)
	nodes := make([]string, len(spec.Alloc))
	cpus := make([]int, len(spec.Alloc))
	tasks := make([]int, len(spec.Alloc))
	for i, a := range spec.Alloc {
		nodes[i] = a.Node
		cpus[i] = a.CPUs
		tasks[i] = max(a.Tasks, 1)
	}
	if len(nodes) == 0 {
		nodes, cpus, tasks = []string{node}, []int{mine.CPUs}, []int{1}
	}
	nodelist := hostlist.Compress(nodes)
	id := strconv.FormatUint(spec.JobID, 10)

	ours := envlist.New(64)
	set := ours.Set
	set("SLURM_JOB_ID", id)
	set("SLURM_JOBID", id)
	if a := spec.Array; a != nil {
		set("SLURM_ARRAY_JOB_ID", strconv.FormatUint(a.JobID, 10))
		set("SLURM_ARRAY_TASK_ID", strconv.Itoa(a.Task))
		set("SLURM_ARRAY_TASK_COUNT", strconv.Itoa(a.Count))
		set("SLURM_ARRAY_TASK_MAX", strconv.Itoa(a.Max))
		set("SLURM_ARRAY_TASK_MIN", strconv.Itoa(a.Min))
		set("SLURM_ARRAY_TASK_STEP", strconv.Itoa(a.Step))
	}
	set("SLURM_JOB_NAME", spec.Name)
	set("SLURM_JOB_USER", spec.User)
	set("SLURM_JOB_UID", strconv.FormatUint(uint64(spec.UserID), 10))
	set("SLURM_JOB_GID", strconv.FormatUint(uint64(spec.GroupID), 10))
	set("SLURM_SUBMIT_DIR", spec.SubmitDir)
	set("SLURM_SUBMIT_HOST", spec.SubmitHost)
	set("SLURM_JOB_NODELIST", nodelist)
	set("SLURM_NODELIST", nodelist)
	set("SLURM_NNODES", strconv.Itoa(len(nodes)))
	set("SLURM_JOB_NUM_NODES", strconv.Itoa(len(nodes)))
	if spec.NumTasks > 0 {
		set("SLURM_NTASKS", strconv.Itoa(spec.NumTasks))
		set("SLURM_NPROCS", strconv.Itoa(spec.NumTasks))
	}
	if spec.CPUsPerTask > 0 {
		set("SLURM_CPUS_PER_TASK", strconv.Itoa(spec.CPUsPerTask))
	}
	set("SLURM_CPUS_ON_NODE", strconv.Itoa(mine.CPUs))
	set("SLURM_JOB_CPUS_PER_NODE", compressCounts(cpus))
	set("SLURM_TASKS_PER_NODE", compressCounts(tasks))
	set("SLURM_JOB_PARTITION", spec.Partition)
	if spec.Account != "" {
		set("SLURM_JOB_ACCOUNT", spec.Account)
	}
	if spec.QOS != "" {
		set("SLURM_JOB_QOS", spec.QOS)
	}
	if spec.Restart > 0 {
		set("SLURM_RESTART_COUNT", strconv.Itoa(spec.Restart))
	}
	setRequestEnv(set, spec.Request, mine)
	set("SLURM_CLUSTER_NAME", spec.Cluster)
	set("SLURMD_NODENAME", node)
	set("SLURM_NODEID", "0")
	set("SLURM_PROCID", "0")
	set("SLURM_LOCALID", "0")
	set("SLURM_GTIDS", "0")
	// sbatch passes the submitter's nice value on.
	prio := "0"
	if kv, ok := e.Entry("SLURM_PRIO_PROCESS"); ok && isInt(kv[len("SLURM_PRIO_PROCESS="):]) {
		prio = kv[len("SLURM_PRIO_PROCESS="):]
	}
	set("SLURM_PRIO_PROCESS", prio)
	addr, pattern := spec.TopoAddr, spec.TopoPattern
	if addr == "" || pattern == "" {
		addr, pattern = node, "node"
	}
	set("SLURM_TOPOLOGY_ADDR", addr)
	set("SLURM_TOPOLOGY_ADDR_PATTERN", pattern)
	if len(mine.GPUs) > 0 {
		idx := gres.FormatIndices(mine.GPUs)
		set("SLURM_JOB_GPUS", idx)
		set("SLURM_GPUS_ON_NODE", strconv.Itoa(len(mine.GPUs)))
		if r := spec.Request; r != nil && r.GPUShards > 0 && mine.Sliced() {
			set("SLURM_SHARDS_ON_NODE", strconv.Itoa(r.GPUShards))
		}
		set("CUDA_VISIBLE_DEVICES", idx)
		set("GPU_DEVICE_ORDINAL", idx)
		set("ROCR_VISIBLE_DEVICES", idx)
		// The indices are NVML's, which follow PCI bus order; CUDA's own
		// default order is fastest first.
		set("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
		if len(spec.GPUUUIDs) > 0 {
			// For containers (the NVIDIA runtime selects by UUID).
			set("NVIDIA_VISIBLE_DEVICES", strings.Join(spec.GPUUUIDs, ","))
		}
		if mine.Sliced() {
			setSliceEnv(set, mine)
		}
	}
	mergeWithTwins(e, ours)
	return e.Entries()
}

// setRequestEnv sets what the job asked for, as Slurm reports it in
// the batch script's environment: the GPU options (only those given,
// as sbatch sets them), --cpus-per-gpu, --ntasks-per-node, the
// memory request and --overcommit. A whole-node --mem=0 reports the
// memory this node gives the job. r is nil from a controller that does
// not send it.
func setRequestEnv(set func(k, v string), r *api.EnvRequest, mine api.NodeAlloc) {
	if r == nil {
		return
	}
	gpus := func(n int) string {
		if r.GPUType != "" {
			return r.GPUType + ":" + strconv.Itoa(n)
		}
		return strconv.Itoa(n)
	}
	if r.GPUs > 0 {
		set("SLURM_GPUS", gpus(r.GPUs))
	}
	if r.GPUsPerNode > 0 {
		set("SLURM_GPUS_PER_NODE", gpus(r.GPUsPerNode))
	}
	if r.GPUsPerTask > 0 {
		set("SLURM_GPUS_PER_TASK", gpus(r.GPUsPerTask))
	}
	if r.CPUsPerGPU > 0 {
		set("SLURM_CPUS_PER_GPU", strconv.Itoa(r.CPUsPerGPU))
	}
	if r.TasksPerNode > 0 {
		set("SLURM_NTASKS_PER_NODE", strconv.Itoa(r.TasksPerNode))
	}
	switch {
	case r.MemPerCPUMB > 0:
		set("SLURM_MEM_PER_CPU", strconv.FormatInt(r.MemPerCPUMB, 10))
	case r.MemPerNodeMB > 0:
		set("SLURM_MEM_PER_NODE", strconv.FormatInt(r.MemPerNodeMB, 10))
	case r.MemPerNodeMB == api.MemWholeNode && mine.MemoryMB > 0:
		set("SLURM_MEM_PER_NODE", strconv.FormatInt(mine.MemoryMB, 10))
	}
	if r.MemPerGPUMB > 0 {
		set("SLURM_MEM_PER_GPU", strconv.FormatInt(r.MemPerGPUMB, 10))
	}
	if r.Overcommit {
		set("SLURM_OVERCOMMIT", "1")
	}
}

// isInt reports whether s is a decimal integer, sign allowed.
func isInt(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// JobFiles are a job's standard files as absolute paths; Stderr is
// empty when stderr goes to stdout's file descriptor.
type JobFiles = runtime.Files

// ResolveFiles expands the job's -o/-e/-i patterns (every letter of
// api.ExpandPattern, %J %s %n %t as Slurm's batch step has them) for
// node and makes them absolute against the work directory, as
// slurmstepd does: stdout defaults to slurm-%j.out, stderr to the stdout
// descriptor, stdin to /dev/null. ResolveFiles is pure.
func ResolveFiles(spec *api.LaunchSpec, node string) JobFiles {
	vars := api.PatternVars{JobID: spec.JobID, Name: spec.Name, User: spec.User, Node: node, ArrayTask: -1,
		Step: &api.StepVars{Batch: true}} // %J %s %n %t as for Slurm's batch step
	if a := spec.Array; a != nil {
		vars.ArrayJobID, vars.ArrayTask = a.JobID, a.Task
	}
	wd := workDir(spec)
	abs := func(p string) string {
		p = api.ExpandPattern(p, vars)
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(wd, p)
	}
	out := spec.Stdout
	if out == "" {
		out = api.DefaultStdout
	}
	f := JobFiles{Stdin: "/dev/null", Stdout: abs(out)}
	if spec.Stdin != "" {
		f.Stdin = abs(spec.Stdin)
	}
	if spec.Stderr != "" {
		if e := abs(spec.Stderr); e != f.Stdout {
			f.Stderr = e
		}
	}
	return f
}

// workDir is where the script starts: -D, else the submit directory,
// else "/".
func workDir(spec *api.LaunchSpec) string {
	switch {
	case spec.WorkDir != "":
		return spec.WorkDir
	case spec.SubmitDir != "":
		return spec.SubmitDir
	}
	return "/"
}
