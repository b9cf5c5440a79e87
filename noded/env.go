package noded

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/internal/envlist"
)

// defaultPath is given to jobs whose captured environment has no PATH
// (sbatch --export=NONE), so that scripts still find sleep and friends.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// nodeAlloc returns node's part of the allocation; the batch script runs
// on the first node, so that one stands in when node is not listed.
func nodeAlloc(spec *api.LaunchSpec, node string) api.NodeAlloc {
	for _, a := range spec.Alloc {
		if a.Node == node {
			return a
		}
	}
	if len(spec.Alloc) > 0 {
		return spec.Alloc[0]
	}
	return api.NodeAlloc{Node: node}
}

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

// mergeWithTwins sets ours's variables in e, then the TIDE_* twin of
// each SLURM_* one.
func mergeWithTwins(e, ours *envlist.List) {
	ours.Each(func(k, _, kv string) { e.SetEntry(k, kv) })
	ours.Each(func(k, v, _ string) {
		if t, ok := tideTwin(k); ok {
			e.Set(t, v)
		}
	})
}

// setSliceEnv sets the limits of a job's GPU slices, for the CUDA MPS
// client (they bind only where an MPS control daemon serves the GPU;
// without one CUDA ignores them) and, as TIDE_GPU_MEM_MB and
// TIDE_GPU_COMPUTE_PCT, for frameworks that cap themselves.
//
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT is NVIDIA's comma list of
// "ordinal=limit" with the ordinals CUDA gives the visible devices
// (0..n-1 after CUDA_VISIBLE_DEVICES), the limit in MB ("0=8192M").
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE is one percentage for every device.
func setSliceEnv(set func(k, v string), a api.NodeAlloc) {
	if a.GPUMemMB > 0 {
		limit := strconv.FormatInt(a.GPUMemMB, 10) + "M"
		parts := make([]string, len(a.GPUs))
		for i := range a.GPUs {
			parts[i] = strconv.Itoa(i) + "=" + limit
		}
		set("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", strings.Join(parts, ","))
		set("TIDE_GPU_MEM_MB", strconv.FormatInt(a.GPUMemMB, 10))
	}
	if a.GPUComputePct > 0 {
		set("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", strconv.Itoa(a.GPUComputePct))
		set("TIDE_GPU_COMPUTE_PCT", strconv.Itoa(a.GPUComputePct))
	}
}

// MPS client variables: where a process finds its GPU's MPS control
// daemon (see mps.go).
const (
	envMPSPipe = "CUDA_MPS_PIPE_DIRECTORY"
	envMPSLog  = "CUDA_MPS_LOG_DIRECTORY"
)

// sliceEnvKeys are the variables setSliceEnv may set.
var sliceEnvKeys = []string{"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "TIDE_GPU_MEM_MB", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "TIDE_GPU_COMPUTE_PCT"}

// setMPSEnv points a process that sees the sliced GPUs gpus at its
// GPU's MPS control daemon (dirs holds the GPUs whose daemon runs). An
// MPS client talks to one control daemon, and a daemon serves the one
// GPU it was started for; so only a process that sees exactly one
// sliced GPU is made a client. One that sees several (a batch script of
// a job with slices on several GPUs) gets no MPS variables: it runs
// without MPS, with every GPU it was given visible and its limits
// advisory; its srun --gpus-per-task=1 tasks each get their GPU's daemon.
func setMPSEnv(set func(k, v string), gpus []int, dirs map[int]mpsDirs) {
	if len(gpus) != 1 {
		return
	}
	d, ok := dirs[gpus[0]]
	if !ok {
		return
	}
	set(envMPSPipe, d.Pipe)
	set(envMPSLog, d.Log)
}

// withMPSEnv is env with setMPSEnv's variables for a process that sees
// the sliced GPUs gpus; it is pure.
func withMPSEnv(env []string, gpus []int, dirs map[int]mpsDirs) []string {
	e := envlist.New(len(env) + 2)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != envMPSPipe && k != envMPSLog {
			e.SetEntry(k, kv)
		}
	}
	setMPSEnv(e.Set, gpus, dirs)
	return e.Entries()
}

// tideTwin names the TIDE_* twin of a SLURM_* variable.
func tideTwin(k string) (string, bool) {
	if k == "SLURMD_NODENAME" {
		return "TIDE_NODENAME", true
	}
	if rest, ok := strings.CutPrefix(k, "SLURM_"); ok {
		return "TIDE_" + rest, true
	}
	return "", false
}

// compressCounts writes per-node counts the way SLURM_JOB_CPUS_PER_NODE
// and SLURM_TASKS_PER_NODE do: runs of equal values as "N(xK)", e.g.
// [4 4 2] → "4(x2),2".
func compressCounts(ns []int) string {
	var b strings.Builder
	for i := 0; i < len(ns); {
		j := i
		for j < len(ns) && ns[j] == ns[i] {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ns[i]))
		if j-i > 1 {
			b.WriteString("(x" + strconv.Itoa(j-i) + ")")
		}
		i = j
	}
	return b.String()
}

// JobFiles are a job's standard files as absolute paths.
type JobFiles struct {
	Stdin  string
	Stdout string
	// Stderr is empty when stderr goes to stdout's file descriptor.
	Stderr string
}

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

// umaskFromEnv reads SLURM_UMASK (octal, set by sbatch) from a captured
// environment; -1 when absent or malformed.
func umaskFromEnv(env []string) int {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "SLURM_UMASK="); ok {
			n, err := strconv.ParseUint(v, 8, 32)
			if err != nil || n > 0o777 {
				return -1
			}
			return int(n)
		}
	}
	return -1
}
