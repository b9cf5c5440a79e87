package srun

import (
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/cli/sbatch/opts"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/internal/envlist"
)

// JobEnv lists the variables Slurm's salloc and srun set for an
// allocation they obtained themselves (env_array_for_job, with
// set_env_from_opts' request variables), in the order they are set:
// the job, its nodes, CPUs and tasks, its account and QOS, and what it
// asked for (SLURM_GPUS, SLURM_MEM_PER_NODE, ... only for the options
// given, SLURM_OVERCOMMIT with --overcommit). It is pure.
func JobEnv(j *api.Job) [][2]string {
	nodes := j.NodeNames()
	list := hostlist.Compress(nodes)
	cpus := make([]int, len(j.Alloc))
	tasks := make([]int, len(j.Alloc))
	for i, a := range j.Alloc {
		cpus[i], tasks[i] = a.CPUs, max(a.Tasks, 1)
	}
	itoa := strconv.Itoa
	id := strconv.FormatUint(j.ID, 10)
	vars := [][2]string{
		{"SLURM_JOB_ID", id}, {"SLURM_JOBID", id}, {"SLURM_JOB_NAME", j.Name},
		{"SLURM_JOB_NODELIST", list}, {"SLURM_NODELIST", list},
		{"SLURM_JOB_NUM_NODES", itoa(len(nodes))}, {"SLURM_NNODES", itoa(len(nodes))},
		{"SLURM_NTASKS", itoa(j.ReqTasks())}, {"SLURM_NPROCS", itoa(j.ReqTasks())},
		{"SLURM_JOB_CPUS_PER_NODE", counts(cpus)}, {"SLURM_TASKS_PER_NODE", counts(tasks)},
		{"SLURM_JOB_PARTITION", j.Partition}, {"SLURM_CLUSTER_NAME", j.Cluster},
		{"SLURM_SUBMIT_DIR", j.SubmitDir}, {"SLURM_SUBMIT_HOST", j.SubmitHost},
		{"SLURM_JOB_USER", j.User}, {"SLURM_JOB_UID", strconv.FormatUint(uint64(j.UserID), 10)},
	}
	add := func(k, v string) { vars = append(vars, [2]string{k, v}) }
	if j.CPUsPerTask > 0 {
		add("SLURM_CPUS_PER_TASK", itoa(j.CPUsPerTask))
	}
	if j.TasksPerNode > 0 {
		add("SLURM_NTASKS_PER_NODE", itoa(j.TasksPerNode))
	}
	if j.Account != "" {
		add("SLURM_JOB_ACCOUNT", j.Account)
	}
	if j.QOS != "" {
		add("SLURM_JOB_QOS", j.QOS)
	}
	gpus := func(n int) string {
		if j.GPUType != "" {
			return j.GPUType + ":" + itoa(n)
		}
		return itoa(n)
	}
	if j.GPUs > 0 {
		add("SLURM_GPUS", gpus(j.GPUs))
	}
	if j.GPUsPerNode > 0 {
		add("SLURM_GPUS_PER_NODE", gpus(j.GPUsPerNode))
	}
	if j.GPUsPerTask > 0 {
		add("SLURM_GPUS_PER_TASK", gpus(j.GPUsPerTask))
	}
	if j.CPUsPerGPU > 0 {
		add("SLURM_CPUS_PER_GPU", itoa(j.CPUsPerGPU))
	}
	switch {
	case j.MemPerCPUMB > 0:
		add("SLURM_MEM_PER_CPU", strconv.FormatInt(j.MemPerCPUMB, 10))
	case j.MemPerNodeMB > 0:
		add("SLURM_MEM_PER_NODE", strconv.FormatInt(j.MemPerNodeMB, 10))
	case j.MemPerNodeMB == api.MemWholeNode && len(j.Alloc) > 0 && j.Alloc[0].MemoryMB > 0:
		add("SLURM_MEM_PER_NODE", strconv.FormatInt(j.Alloc[0].MemoryMB, 10))
	}
	if j.MemPerGPUMB > 0 {
		add("SLURM_MEM_PER_GPU", strconv.FormatInt(j.MemPerGPUMB, 10))
	}
	if j.Overcommit {
		add("SLURM_OVERCOMMIT", "1")
	}
	return vars
}

// WithJobEnv returns environ with JobEnv's variables and their TIDE_
// twins set, replacing the caller's values. It is pure.
func WithJobEnv(environ []string, j *api.Job) []string {
	vars := JobEnv(j)
	set := make(map[string]bool, 2*len(vars))
	for _, v := range vars {
		set[v[0]] = true
		set[twin(v[0])] = true
	}
	e := envlist.New(len(environ) + 2*len(vars))
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); ok && k != "" && !set[k] {
			e.SetEntry(k, kv)
		}
	}
	for _, v := range vars {
		e.Set(v[0], v[1])
	}
	for _, v := range vars {
		e.Set(twin(v[0]), v[1])
	}
	return e.Entries()
}

// twin is the TIDE_ name of a SLURM_ variable.
func twin(k string) string { return "TIDE_" + strings.TrimPrefix(k, "SLURM_") }

// counts writes per-node counts as Slurm does: "4(x2),2".
func counts(ns []int) string {
	var b strings.Builder
	for i := 0; i < len(ns); {
		k := i
		for k < len(ns) && ns[k] == ns[i] {
			k++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ns[i]))
		if k-i > 1 {
			b.WriteString("(x" + strconv.Itoa(k-i) + ")")
		}
		i = k
	}
	return b.String()
}

// StepEnvironment is the environment srun sends with a step: the
// --export environment with what srun itself sets (Slurm's srun,
// setup_env): SLURM_UMASK and SLURM_PRIO_PROCESS (when s is not nil),
// SLURM_CPUS_PER_TASK with -c, SLURM_NTASKS_PER_NODE with
// --ntasks-per-node and SLURM_OVERCOMMIT with -O. It is pure.
func StepEnvironment(a *Args, s *opts.Submitter) []string {
	env := a.Spec.Environment
	if s != nil {
		sub := *s
		for _, d := range a.Defined {
			if d[0] == "propagate" {
				sub = sub.Propagating(d[1], true)
			}
		}
		env = opts.WithSubmitterEnv(env, sub)
	}
	e := envlist.FromEntries(env)
	if a.Spec.CPUsPerTask > 0 {
		e.Set("SLURM_CPUS_PER_TASK", strconv.Itoa(a.Spec.CPUsPerTask))
	}
	if a.Spec.TasksPerNode > 0 {
		e.Set("SLURM_NTASKS_PER_NODE", strconv.Itoa(a.Spec.TasksPerNode))
	}
	if a.Overcommit {
		e.Set("SLURM_OVERCOMMIT", "1")
	}
	return e.Entries()
}
