package srun

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/cli/sbatch/opts"
)

// The input environment variables of srun (man srun, INPUT ENVIRONMENT
// VARIABLES, as Slurm 22.05's srun reads them): each sets the option it
// names, the command line wins. Inside an allocation srun inherits most
// of them from the job's own environment (SLURM_NTASKS, SLURM_NPROCS,
// SLURM_NTASKS_PER_NODE, SLURM_GPUS_PER_TASK, SLURM_MEM_PER_*, ...),
// which is how a batch job's `srun` runs the job's tasks. Options are
// named by their long name in sbatch's table or, for srun's own,
// in ownOptions.

// srunEnvVars lists them in the order they apply (a later one wins for
// the same option: SLURM_NTASKS over SLURM_NPROCS, SRUN_EXPORT_ENV over
// SLURM_EXPORT_ENV). SLURM_JOB_NAME names the step only outside an
// allocation: inside one it is the job's name, which would name every
// step after the batch script.
func srunEnvVars(inAllocation bool) []opts.EnvVar {
	vars := []opts.EnvVar{
		{Name: "SLURM_ACCOUNT", Option: "account"},
		{Name: "SLURM_ACCTG_FREQ", Option: "acctg-freq"},
		{Name: "SLURM_BURST_BUFFER", Option: "bb"},
		{Name: "SLURM_CLUSTERS", Option: "clusters"},
		{Name: "SLURM_CLUSTER_CONSTRAINT", Option: "cluster-constraint"},
		{Name: "SLURM_CONSTRAINT", Option: "constraint"},
		{Name: "SLURM_CORE_SPEC", Option: "core-spec"},
		{Name: "SRUN_CPUS_PER_TASK", Option: "cpus-per-task"},
		{Name: "SLURM_CPU_FREQ_REQ", Option: "cpu-freq"},
		{Name: "SLURM_CPUS_PER_GPU", Option: "cpus-per-gpu"},
		{Name: "SLURM_DELAY_BOOT", Option: "delay-boot"},
		{Name: "SLURM_DEPENDENCY", Option: "dependency"},
		{Name: "SLURM_DISABLE_STATUS", Option: "disable-status"},
		{Name: "SLURM_DISTRIBUTION", Option: "distribution"},
		{Name: "SLURM_EXCLUSIVE", Option: "exclusive"},
		{Name: "SLURM_EXPORT_ENV", Option: "export"},
		{Name: "SRUN_EXPORT_ENV", Option: "export"},
		{Name: "SLURM_GPUS", Option: "gpus"},
		{Name: "SLURM_GPU_BIND", Option: "gpu-bind"},
		{Name: "SLURM_GPU_FREQ", Option: "gpu-freq"},
		{Name: "SLURM_GPUS_PER_NODE", Option: "gpus-per-node"},
		{Name: "SLURM_GPUS_PER_SOCKET", Option: "gpus-per-socket"},
		{Name: "SLURM_GPUS_PER_TASK", Option: "gpus-per-task"},
		{Name: "SLURM_GRES", Option: "gres"},
		{Name: "SLURM_GRES_FLAGS", Option: "gres-flags"},
		{Name: "SLURM_HINT", Option: "hint"},
		{Name: "SLURM_JOB_NAME", Option: "job-name"},
		// man srun lists SLURM_NNODES as -N too; SLURM_JOB_NUM_NODES,
		// which srun's code reads, comes later and wins.
		{Name: "SLURM_NNODES", Option: "nodes"},
		{Name: "SLURM_JOB_NUM_NODES", Option: "nodes"},
		{Name: "SLURM_KILL_BAD_EXIT", Option: "kill-on-bad-exit"},
		{Name: "SLURM_LABELIO", Option: "label"},
		{Name: "SLURM_MEM_BIND", Option: "mem-bind"},
		{Name: "SLURM_MEM_PER_CPU", Option: "mem-per-cpu"},
		{Name: "SLURM_MEM_PER_GPU", Option: "mem-per-gpu"},
		{Name: "SLURM_MEM_PER_NODE", Option: "mem"},
		{Name: "SLURM_NCORES_PER_SOCKET", Option: "cores-per-socket"},
		{Name: "SLURM_NETWORK", Option: "network"},
		{Name: "SLURM_NO_KILL", Option: "no-kill"},
		{Name: "SLURM_NPROCS", Option: "ntasks"},
		{Name: "SLURM_NTASKS", Option: "ntasks"},
		{Name: "SLURM_NSOCKETS_PER_NODE", Option: "sockets-per-node"},
		{Name: "SLURM_NTASKS_PER_CORE", Option: "ntasks-per-core"},
		{Name: "SLURM_NTASKS_PER_NODE", Option: "ntasks-per-node"},
		{Name: "SLURM_NTASKS_PER_GPU", Option: "ntasks-per-gpu"},
		{Name: "SLURM_NTASKS_PER_SOCKET", Option: "ntasks-per-socket"},
		{Name: "SLURM_OPEN_MODE", Option: "open-mode"},
		{Name: "SLURM_OVERCOMMIT", Option: "overcommit"},
		{Name: "SLURM_PARTITION", Option: "partition"},
		{Name: "SLURM_POWER", Option: "power"},
		{Name: "SLURM_PROFILE", Option: "profile"},
		{Name: "SLURM_QOS", Option: "qos"},
		{Name: "SLURM_REMOTE_CWD", Option: "chdir"},
		{Name: "SLURM_REQ_SWITCH", Option: "switches"},
		{Name: "SLURM_RESERVATION", Option: "reservation"},
		{Name: "SLURM_SIGNAL", Option: "signal"},
		{Name: "SLURM_SPREAD_JOB", Option: "spread-job"},
		{Name: "SLURM_STDERRMODE", Option: "error"},
		{Name: "SLURM_STDINMODE", Option: "input"},
		{Name: "SLURM_STDOUTMODE", Option: "output"},
		{Name: "SLURM_THREAD_SPEC", Option: "thread-spec"},
		{Name: "SLURM_THREADS_PER_CORE", Option: "threads-per-core"},
		{Name: "SLURM_TIMELIMIT", Option: "time"},
		{Name: "SLURM_UNBUFFEREDIO", Option: "unbuffered"},
		{Name: "SLURM_USE_MIN_NODES", Option: "use-min-nodes"},
		{Name: "SLURM_WAIT4SWITCH", Option: opts.EnvSwitchWait},
		{Name: "SLURM_WCKEY", Option: "wckey"},
		{Name: "SLURM_WORKING_DIR", Option: "chdir"},
		{Name: "SRUN_CONTAINER", Option: "container"},
		{Name: "SLURM_DEBUG", Option: "verbose"},
	}
	if inAllocation {
		vars = slicesDelete(vars, "SLURM_JOB_NAME")
	}
	return vars
}

// SrunEnvVars is srunEnvVars for an environment: inside an allocation
// when it sets SLURM_JOB_ID.
func SrunEnvVars(environ []string) []opts.EnvVar {
	_, in := opts.LookupIn(environ)("SLURM_JOB_ID")
	return srunEnvVars(in)
}

func slicesDelete(vars []opts.EnvVar, name string) []opts.EnvVar {
	out := vars[:0:0]
	for _, v := range vars {
		if v.Name != name {
			out = append(out, v)
		}
	}
	return out
}

// envFlagOn is Slurm's reading of a flag variable: set by an empty
// value, "yes" or a non-zero number.
func envFlagOn(v string) bool {
	if v == "" || strings.EqualFold(v, "yes") {
		return true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return err == nil && n != 0
}

// envLayer is what ParseArgs takes from the environment itself rather
// than through sbatch's parser: srun's own options, and
// --gpus-per-task, which a step may take without a task count.
type envLayer struct {
	opts []opts.EnvVar // the rest, for opts.Parse
	gpt  string        // --gpus-per-task's variable and value
	gptV string
}

// applyEnv sets srun's own options from their variables on a and sorts
// out the rest. Flags follow Slurm's rule (envFlagOn); a flag read as
// off stays off, the environment being the first layer.
func applyEnv(a *Args, vars []opts.EnvVar, lookup func(string) (string, bool)) (envLayer, error) {
	l := envLayer{opts: []opts.EnvVar{}}
	for _, ev := range vars {
		o := findOwn(ev.Option)
		switch {
		case ev.Option == "gpus-per-task":
			if v, ok := lookup(ev.Name); ok && v != "" {
				l.gpt, l.gptV = ev.Name, v
			}
		case o != nil:
			v, ok := lookup(ev.Name)
			if !ok || (o.arg == 0 && !envFlagOn(v)) {
				continue
			}
			if o.arg == 1 && v == "" {
				continue
			}
			if err := o.set(a, v); err != nil {
				return l, fmt.Errorf("%v (from %s=%s)", err, ev.Name, v)
			}
		default:
			l.opts = append(l.opts, ev)
		}
	}
	return l, nil
}

// findOwn is srun's own option named exactly long.
func findOwn(long string) *ownOption {
	for i := range ownOptions {
		if ownOptions[i].long == long {
			return &ownOptions[i]
		}
	}
	return nil
}

// envGPUsPerTask reads an inherited --gpus-per-task: "N" or "type:N", as
// the batch environment's SLURM_GPUS_PER_TASK carries it.
func envGPUsPerTask(name, v string) (int, error) {
	n := v
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		n = v[i+1:]
	}
	g, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || g < 1 {
		return 0, fmt.Errorf("Invalid --gpus-per-task specification (from %s=%s)", name, v)
	}
	return g, nil
}

// allocNodes normalises an inherited node count: inside an allocation
// SLURM_JOB_NUM_NODES is the allocation's own node count, and a step on
// all of the allocation's nodes is what srun does without -N (which
// keeps the job's own task layout), so a count inherited equal to it
// counts as not given.
func allocNodes(a *Args, fromEnv map[string]bool, lookup func(string) (string, bool)) {
	if !fromEnv["nodes"] || a.Spec.MaxNodes != 0 {
		return
	}
	if _, in := lookup("SLURM_JOB_ID"); !in {
		return
	}
	v, _ := lookup("SLURM_JOB_NUM_NODES")
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n == a.Spec.Nodes {
		a.Spec.Nodes = 0
	}
}
