// Package jobenv holds the rules of a job's environment that a batch
// script (tided's BuildEnv) and an srun step's tasks (noded/steps)
// share: the node's share of an allocation, the TIDE_* twin of each
// SLURM_* variable, per-node counts in Slurm's compressed form, the
// umask sbatch passes, and the variables of GPU slices and their MPS
// control daemons. Everything here is pure.
package jobenv

import (
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/envlist"
)

// MPSDirs are the directories of one GPU's MPS control daemon, which
// its clients find through CUDA_MPS_PIPE_DIRECTORY and
// CUDA_MPS_LOG_DIRECTORY.
type MPSDirs struct {
	Pipe string `json:"pipe_dir"`
	Log  string `json:"log_dir"`
}

// DefaultPath is given to jobs whose captured environment has no PATH
// (sbatch --export=NONE), so that scripts still find sleep and friends.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// NodeAlloc returns node's part of the allocation; the batch script runs
// on the first node, so that one stands in when node is not listed.
func NodeAlloc(spec *api.LaunchSpec, node string) api.NodeAlloc {
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

// MergeWithTwins sets ours's variables in e, then the TIDE_* twin of
// each SLURM_* one.
func MergeWithTwins(e, ours *envlist.List) {
	ours.Each(func(k, _, kv string) { e.SetEntry(k, kv) })
	ours.Each(func(k, v, _ string) {
		if t, ok := TideTwin(k); ok {
			e.Set(t, v)
		}
	})
}

// SetSliceEnv sets the limits of a job's GPU slices, for the CUDA MPS
// client (they bind only where an MPS control daemon serves the GPU;
// without one CUDA ignores them) and, as TIDE_GPU_MEM_MB and
// TIDE_GPU_COMPUTE_PCT, for frameworks that cap themselves.
//
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT is NVIDIA's comma list of
// "ordinal=limit" with the ordinals CUDA gives the visible devices
// (0..n-1 after CUDA_VISIBLE_DEVICES), the limit in MB ("0=8192M").
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE is one percentage for every device.
func SetSliceEnv(set func(k, v string), a api.NodeAlloc) {
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
// daemon (tided's mps.go runs those daemons).
const (
	EnvMPSPipe = "CUDA_MPS_PIPE_DIRECTORY"
	EnvMPSLog  = "CUDA_MPS_LOG_DIRECTORY"
)

// SliceEnvKeys are the variables SetSliceEnv may set.
var SliceEnvKeys = []string{"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "TIDE_GPU_MEM_MB", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "TIDE_GPU_COMPUTE_PCT"}

// SetMPSEnv points a process that sees the sliced GPUs gpus at its
// GPU's MPS control daemon (dirs holds the GPUs whose daemon runs). An
// MPS client talks to one control daemon, and a daemon serves the one
// GPU it was started for; so only a process that sees exactly one
// sliced GPU is made a client. One that sees several (a batch script of
// a job with slices on several GPUs) gets no MPS variables: it runs
// without MPS, with every GPU it was given visible and its limits
// advisory; its srun --gpus-per-task=1 tasks each get their GPU's daemon.
func SetMPSEnv(set func(k, v string), gpus []int, dirs map[int]MPSDirs) {
	if len(gpus) != 1 {
		return
	}
	d, ok := dirs[gpus[0]]
	if !ok {
		return
	}
	set(EnvMPSPipe, d.Pipe)
	set(EnvMPSLog, d.Log)
}

// WithMPSEnv is env with SetMPSEnv's variables for a process that sees
// the sliced GPUs gpus; it is pure.
func WithMPSEnv(env []string, gpus []int, dirs map[int]MPSDirs) []string {
	e := envlist.New(len(env) + 2)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != EnvMPSPipe && k != EnvMPSLog {
			e.SetEntry(k, kv)
		}
	}
	SetMPSEnv(e.Set, gpus, dirs)
	return e.Entries()
}

// TideTwin names the TIDE_* twin of a SLURM_* variable.
func TideTwin(k string) (string, bool) {
	if k == "SLURMD_NODENAME" {
		return "TIDE_NODENAME", true
	}
	if rest, ok := strings.CutPrefix(k, "SLURM_"); ok {
		return "TIDE_" + rest, true
	}
	return "", false
}

// CompressCounts writes per-node counts the way SLURM_JOB_CPUS_PER_NODE
// and SLURM_TASKS_PER_NODE do: runs of equal values as "N(xK)", e.g.
// [4 4 2] → "4(x2),2".
func CompressCounts(ns []int) string {
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

// UmaskFromEnv reads SLURM_UMASK (octal, set by sbatch) from a captured
// environment; -1 when absent or malformed.
func UmaskFromEnv(env []string) int {
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
