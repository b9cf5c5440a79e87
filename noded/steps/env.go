package steps

// The environment and executable of a step's tasks (issue 7).

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/internal/envlist"
	"github.com/tide-hpc/tide/noded/jobenv"
)

// resolveExe finds a step's executable the way srun documents it: a
// name starting with "." is relative to the working directory, one with
// a "/" is taken as written, else it is looked up in PATH and finally in
// the working directory.
func resolveExe(name, cwd, path string) (string, error) {
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(cwd, p)
	}
	if strings.HasPrefix(name, ".") || strings.Contains(name, "/") {
		p := abs(name)
		if err := executable(p); err != nil {
			return "", &execError{name: name, errno: errnoOf(err)}
		}
		return p, nil
	}
	if path == "" {
		path = jobenv.DefaultPath
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(abs(dir), name)
		if executable(p) == nil {
			return p, nil
		}
	}
	if p := filepath.Join(cwd, name); executable(p) == nil {
		return p, nil
	}
	return "", &execError{name: name, errno: syscall.ENOENT}
}

// execError is why a task's program cannot be run, in execve(2)'s
// terms. Slurm's tasks fail at their own execve: the message goes to
// the task's standard error and the task exits with the errno
// (execFailCmd), so srun reports "task N: Exited with exit code 2" and
// a per-task error file gets the reason.
type execError struct {
	name  string
	errno syscall.Errno
}

func (e *execError) Error() string { return "execve(): " + e.name + ": " + strerror(e.errno) }

// strerror is errno's text as C's strerror writes it (capitalised).
func strerror(e syscall.Errno) string {
	s := e.Error()
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		s = string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

// errnoOf is the errno execve would fail with for a stat or permission
// error of executable: ENOENT for a missing file, else EACCES (a
// directory or a file without execute permission).
func errnoOf(err error) syscall.Errno {
	var en syscall.Errno
	switch {
	case errors.Is(err, os.ErrNotExist):
		return syscall.ENOENT
	case errors.As(err, &en):
		return en
	}
	return syscall.EACCES
}

// execFailScript writes its first argument to standard error and exits
// with its second.
const execFailScript = `printf '%s\n' "$1" >&2; exit "$2"`

// execFailCmd is a task that fails as a task whose execve failed with
// e does under slurmstepd: "slurmstepd: error: execve(): NAME: REASON"
// on its standard error, exit status the errno. It starts like any
// task (same environment, directory, streams and fences), so its
// output files and srun's report are those of a real failed task.
func execFailCmd(e *execError, env []string, dir string) *exec.Cmd {
	return &exec.Cmd{Path: "/bin/sh", Args: []string{"sh", "-c", execFailScript, "sh",
		"slurmstepd: error: " + e.Error(), strconv.Itoa(int(e.errno))}, Env: env, Dir: dir}
}

// taskCmd is the command of a task running argv: the resolved program,
// or, when it cannot be run, execFailCmd's stand-in that fails as the
// task's execve would. Other errors (none today) are returned.
func taskCmd(argv, env []string, cwd string) (*exec.Cmd, error) {
	exe, err := resolveExe(argv[0], cwd, envValue(env, "PATH"))
	var execErr *execError
	switch {
	case errors.As(err, &execErr):
		return execFailCmd(execErr, env, cwd), nil
	case err != nil:
		return nil, err
	}
	return &exec.Cmd{Path: exe, Args: argv, Env: env, Dir: cwd}, nil
}

func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return syscall.EACCES
	case fi.Mode().Perm()&0o111 == 0:
		return syscall.EACCES
	}
	return nil
}

// envValue returns KEY's value in an environment list.
func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// MasterPortBase is where MASTER_PORT starts: a step of job N gets
// MasterPortBase + N mod 1000, the same on every node and for every
// step of the job, unless the environment sets MASTER_PORT already.
const MasterPortBase = 29500

// stepEnv is the environment of local task k on the step's node node:
// the request's environment, then the job's and the step's SLURM_*
// variables (with their TIDE_* twins), the task's GPUs and PyTorch's
// rendezvous variables. It is pure.
func stepEnv(g *api.StepGrant, node, k int) []string {
	e := envlist.FromEntries(g.Env)
	if !e.Has("PATH") {
		e.Set("PATH", jobenv.DefaultPath)
	}
	sn := g.Nodes[node]
	rank := sn.Ranks[k]
	stepNodes := make([]string, len(g.Nodes))
	perNode := make([]int, len(g.Nodes))
	for i, n := range g.Nodes {
		stepNodes[i] = n.Name
		perNode[i] = len(n.Ranks)
	}
	var gpus []int
	if k < len(sn.GPUs) {
		gpus = sn.GPUs[k]
	}
	seen := map[int]bool{}
	var nodeGPUs []int
	for _, gs := range sn.GPUs {
		for _, x := range gs {
			if !seen[x] {
				seen[x] = true
				nodeGPUs = append(nodeGPUs, x)
			}
		}
	}
	itoa := strconv.Itoa
	jobID := strconv.FormatUint(g.JobID, 10)
	stepID := strconv.FormatUint(uint64(g.StepID), 10)
	gtids := make([]string, len(sn.Ranks))
	for i, r := range sn.Ranks {
		gtids[i] = itoa(r)
	}
	ours := envlist.New(64)
	set := ours.Set
	set("SLURM_JOB_ID", jobID)
	set("SLURM_JOBID", jobID)
	set("SLURM_JOB_NAME", g.JobName)
	set("SLURM_JOB_USER", g.User)
	set("SLURM_JOB_UID", strconv.FormatUint(uint64(g.UserID), 10))
	set("SLURM_JOB_GID", strconv.FormatUint(uint64(g.GroupID), 10))
	if g.Partition != "" {
		set("SLURM_JOB_PARTITION", g.Partition)
	}
	if g.Cluster != "" {
		set("SLURM_CLUSTER_NAME", g.Cluster)
	}
	if g.Account != "" {
		set("SLURM_JOB_ACCOUNT", g.Account)
	}
	if g.QOS != "" {
		set("SLURM_JOB_QOS", g.QOS)
	}
	jobList := hostlist.Compress(g.JobNodes)
	set("SLURM_JOB_NODELIST", jobList)
	set("SLURM_NODELIST", jobList)
	set("SLURM_JOB_NUM_NODES", itoa(len(g.JobNodes)))
	set("SLURM_STEP_ID", stepID)
	set("SLURM_STEPID", stepID)
	stepList := hostlist.Compress(stepNodes)
	set("SLURM_STEP_NODELIST", stepList)
	set("SLURM_STEP_NUM_NODES", itoa(len(g.Nodes)))
	set("SLURM_STEP_NUM_TASKS", itoa(g.NTasks))
	set("SLURM_STEP_TASKS_PER_NODE", jobenv.CompressCounts(perNode))
	set("SLURM_NNODES", itoa(len(g.Nodes)))
	set("SLURM_NTASKS", itoa(g.NTasks))
	set("SLURM_NPROCS", itoa(g.NTasks))
	set("SLURM_TASKS_PER_NODE", jobenv.CompressCounts(perNode))
	set("SLURM_NODEID", itoa(node))
	set("SLURM_PROCID", itoa(rank))
	set("SLURM_LOCALID", itoa(k))
	set("SLURM_GTIDS", strings.Join(gtids, ","))
	set("SLURMD_NODENAME", sn.Name)
	set("SLURM_CPUS_ON_NODE", itoa(sn.CPUs))
	addr, pattern := sn.TopoAddr, sn.TopoPattern
	if addr == "" || pattern == "" {
		addr, pattern = sn.Name, "node"
	}
	set("SLURM_TOPOLOGY_ADDR", addr)
	set("SLURM_TOPOLOGY_ADDR_PATTERN", pattern)
	gpuKeys := []string{"CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
		"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE", "NVIDIA_VISIBLE_DEVICES"}
	if len(gpus) > 0 {
		idx := gres.FormatIndices(gpus)
		set("CUDA_VISIBLE_DEVICES", idx)
		set("GPU_DEVICE_ORDINAL", idx)
		set("ROCR_VISIBLE_DEVICES", idx)
		set("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
		set("SLURM_STEP_GPUS", gres.FormatIndices(nodeGPUs))
		jobGPUs := sn.JobGPUs
		if len(jobGPUs) == 0 { // from a controller that does not send them
			jobGPUs = nodeGPUs
		}
		set("SLURM_JOB_GPUS", gres.FormatIndices(jobGPUs))
		set("SLURM_GPUS_ON_NODE", itoa(len(nodeGPUs)))
		gpuKeys = []string{"NVIDIA_VISIBLE_DEVICES"} // UUIDs of the batch host's GPUs only
	}
	// PyTorch's rendezvous: torchrun-free launches read these.
	if !e.Has("MASTER_ADDR") {
		set("MASTER_ADDR", hostOf(g.Nodes[0].Addr, g.Nodes[0].Name))
	}
	if !e.Has("MASTER_PORT") {
		set("MASTER_PORT", itoa(MasterPortBase+int(g.JobID%1000)))
	}
	set("WORLD_SIZE", itoa(g.NTasks))
	set("RANK", itoa(rank))
	set("LOCAL_RANK", itoa(k))
	set("LOCAL_WORLD_SIZE", itoa(len(sn.Ranks)))
	jobenv.MergeWithTwins(e, ours)
	drop := map[string]bool{}
	for _, key := range gpuKeys {
		if !ours.Has(key) {
			drop[key] = true
			if t, ok := jobenv.TideTwin(key); ok {
				drop[t] = true
			}
		}
	}
	out := e.Entries()[:0:0]
	for _, kv := range e.Entries() {
		key, _, _ := strings.Cut(kv, "=")
		if !drop[key] {
			out = append(out, kv)
		}
	}
	return out
}

// withLaunchNode adds to a task's environment where its srun runs, as
// slurmd does: SLURM_LAUNCH_NODE_IPADDR and SLURM_SRUN_COMM_HOST are the
// address the step's connection came from, SLURM_SRUN_COMM_PORT its
// port at srun's end (the one channel between srun and the node; Tide's
// srun serves no PMI there). A peer that is not an IP address (a unix
// socket in tests) adds nothing. It is pure.
func withLaunchNode(env []string, peer net.Addr) []string {
	if peer == nil {
		return env
	}
	host, port, err := net.SplitHostPort(peer.String())
	if err != nil || net.ParseIP(host) == nil {
		return env
	}
	e := envlist.FromEntries(env)
	for _, kv := range [][2]string{{"SLURM_LAUNCH_NODE_IPADDR", host}, {"SLURM_SRUN_COMM_HOST", host}, {"SLURM_SRUN_COMM_PORT", port}} {
		e.Set(kv[0], kv[1])
		if t, ok := jobenv.TideTwin(kv[0]); ok {
			e.Set(t, kv[1])
		}
	}
	return e.Entries()
}

// taskPIDScript exports the task's own pid, which only the process
// itself knows before it execs the command ($0, with its arguments).
const taskPIDScript = `export SLURM_TASK_PID=$$ TIDE_TASK_PID=$$; exec "$0" "$@"`

// viaTaskPIDShell rewrites cmd to start through /bin/sh, which sets
// SLURM_TASK_PID (and its twin) to the task's pid and execs the command
// in its place, so that the pid is the task's own. The command runs
// with its resolved path as argv[0], as Slurm's tasks do. The shell
// also applies the umask srun sent (SLURM_UMASK, read with
// umaskFromEnv, which only lets a valid octal mask through), as
// slurmstepd does before it execs a task; without one the task keeps
// tided's. It returns cmd.
func viaTaskPIDShell(cmd *exec.Cmd) *exec.Cmd {
	script := taskPIDScript
	if m := jobenv.UmaskFromEnv(cmd.Env); m >= 0 {
		script = "umask " + formatOctal(m) + "; " + script
	}
	cmd.Args = append([]string{"sh", "-c", script, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
	return cmd
}

// formatOctal writes a umask as four octal digits.
func formatOctal(m int) string {
	return fmt.Sprintf("%04o", m&0o777)
}

// hostOf is addr's host, or fallback when addr has none.
func hostOf(addr, fallback string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil && h != "" {
		return h
	}
	return fallback
}

// stepSlice is the job's slice size on node: from the job's launch where
// the node runs the job's batch script (spec non-nil), else from the
// step grant's node entry sn. A NodeAlloc whose Sliced is false means
// whole GPUs.
func stepSlice(spec *api.LaunchSpec, sn *api.StepNode, node string) *api.NodeAlloc {
	if spec == nil {
		if sn == nil {
			return nil
		}
		return &api.NodeAlloc{Node: node, GPUMemMB: sn.GPUMemMB, GPUComputePct: sn.GPUComputePct}
	}
	a := jobenv.NodeAlloc(spec, node)
	return &api.NodeAlloc{Node: node, GPUMemMB: a.GPUMemMB, GPUComputePct: a.GPUComputePct}
}

// stepSliceEnv gives a step task that sees gpus the slice variables of
// its own GPUs: the limits (their ordinals follow the task's
// CUDA_VISIBLE_DEVICES, not the batch script's) and its GPU's MPS
// daemon (setMPSEnv). The variables the task inherits from srun's
// environment are dropped first, since they describe the batch script's
// GPUs and node; where the slice size is unknown (slice nil) inherited
// limits stay, as all slices of a job have one size, but MPS
// directories, which are the batch node's, still go. It is pure.
func stepSliceEnv(env []string, slice *api.NodeAlloc, gpus []int, dirs map[int]jobenv.MPSDirs) []string {
	drop := map[string]bool{jobenv.EnvMPSPipe: true, jobenv.EnvMPSLog: true}
	if slice != nil {
		for _, k := range jobenv.SliceEnvKeys {
			drop[k] = true
		}
	}
	e := envlist.New(len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			e.SetEntry(k, kv)
		}
	}
	if slice != nil && slice.Sliced() && len(gpus) > 0 {
		a := *slice
		a.GPUs = gpus
		jobenv.SetSliceEnv(e.Set, a)
		jobenv.SetMPSEnv(e.Set, gpus, dirs)
	}
	return e.Entries()
}
