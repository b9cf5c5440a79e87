package noded

import (
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// envMap is env as a map; it fails t on a variable set twice.
func envMap(t *testing.T, env []string) map[string]string {
	t.Helper()
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			t.Errorf("%s set twice", k)
		}
		m[k] = v
	}
	return m
}

// TestBuildEnvRequest checks each variable Slurm sets from the job's
// request: set for the option given, with its value (and TIDE_ twin),
// absent otherwise.
func TestBuildEnvRequest(t *testing.T) {
	tests := []struct {
		name   string
		req    *api.EnvRequest
		alloc  api.NodeAlloc
		want   map[string]string
		absent []string
	}{
		{name: "no request from an older controller", req: nil,
			absent: []string{"SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU", "SLURM_NTASKS_PER_NODE"}},
		{name: "nothing asked", req: &api.EnvRequest{},
			absent: []string{"SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK", "SLURM_CPUS_PER_GPU",
				"SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU", "SLURM_NTASKS_PER_NODE", "SLURM_OVERCOMMIT"}},
		{name: "overcommit", req: &api.EnvRequest{Overcommit: true},
			want: map[string]string{"SLURM_OVERCOMMIT": "1", "TIDE_OVERCOMMIT": "1"}},
		{name: "gpus", req: &api.EnvRequest{GPUs: 16}, want: map[string]string{"SLURM_GPUS": "16", "TIDE_GPUS": "16"},
			absent: []string{"SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK"}},
		{name: "typed gpus", req: &api.EnvRequest{GPUs: 2, GPUType: "h100"}, want: map[string]string{"SLURM_GPUS": "h100:2"}},
		{name: "gpus per node", req: &api.EnvRequest{GPUsPerNode: 8}, want: map[string]string{"SLURM_GPUS_PER_NODE": "8"},
			absent: []string{"SLURM_GPUS"}},
		{name: "gpus per task", req: &api.EnvRequest{GPUsPerTask: 1}, want: map[string]string{"SLURM_GPUS_PER_TASK": "1"}},
		{name: "cpus per gpu", req: &api.EnvRequest{CPUsPerGPU: 12}, want: map[string]string{"SLURM_CPUS_PER_GPU": "12"}},
		{name: "tasks per node", req: &api.EnvRequest{TasksPerNode: 4}, want: map[string]string{"SLURM_NTASKS_PER_NODE": "4"}},
		{name: "mem", req: &api.EnvRequest{MemPerNodeMB: 64000}, want: map[string]string{"SLURM_MEM_PER_NODE": "64000"},
			absent: []string{"SLURM_MEM_PER_CPU"}},
		{name: "mem=0 reports this node's memory", req: &api.EnvRequest{MemPerNodeMB: api.MemWholeNode},
			alloc: api.NodeAlloc{Node: "n2", CPUs: 1, MemoryMB: 515000, Tasks: 1},
			want:  map[string]string{"SLURM_MEM_PER_NODE": "515000"}},
		{name: "mem per cpu (or the cluster default)", req: &api.EnvRequest{MemPerCPUMB: 4000},
			want: map[string]string{"SLURM_MEM_PER_CPU": "4000"}, absent: []string{"SLURM_MEM_PER_NODE"}},
		{name: "mem per gpu", req: &api.EnvRequest{MemPerGPUMB: 80000}, want: map[string]string{"SLURM_MEM_PER_GPU": "80000"},
			absent: []string{"SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU"}},
		{name: "shards on a sliced node", req: &api.EnvRequest{GPUShards: 2},
			alloc: api.NodeAlloc{Node: "n2", CPUs: 1, GPUs: []int{3}, GPUMemMB: 8192, Tasks: 1},
			want:  map[string]string{"SLURM_SHARDS_ON_NODE": "2", "SLURM_GPUS_ON_NODE": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := baseSpec()
			spec.Request = tt.req
			if tt.alloc.Node != "" {
				spec.Alloc = []api.NodeAlloc{tt.alloc}
			}
			got := envMap(t, BuildEnv(&spec, "n2"))
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			for _, k := range tt.absent {
				if v, ok := got[k]; ok {
					t.Errorf("%s = %q, want it absent", k, v)
				}
			}
		})
	}
}

// TestBuildEnvJob checks the job-level variables the launch carries and
// those sbatch passes on in the captured environment.
func TestBuildEnvJob(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(*api.LaunchSpec)
		want   map[string]string
		absent []string
	}{
		{name: "qos", edit: func(s *api.LaunchSpec) { s.QOS = "high" },
			want: map[string]string{"SLURM_JOB_QOS": "high", "TIDE_JOB_QOS": "high"}},
		{name: "no qos", absent: []string{"SLURM_JOB_QOS", "SLURM_JOB_RESERVATION"}},
		{name: "switch tree", edit: func(s *api.LaunchSpec) { s.TopoAddr, s.TopoPattern = "spine.s1.n2", "switch.switch.node" },
			want: map[string]string{"SLURM_TOPOLOGY_ADDR": "spine.s1.n2", "SLURM_TOPOLOGY_ADDR_PATTERN": "switch.switch.node"}},
		{name: "no switch tree", want: map[string]string{"SLURM_TOPOLOGY_ADDR": "n2", "SLURM_TOPOLOGY_ADDR_PATTERN": "node"}},
		{name: "the submitter's nice value", edit: func(s *api.LaunchSpec) { s.Env = append(s.Env, "SLURM_PRIO_PROCESS=5") },
			want: map[string]string{"SLURM_PRIO_PROCESS": "5", "TIDE_PRIO_PROCESS": "5"}},
		{name: "a malformed nice value", edit: func(s *api.LaunchSpec) { s.Env = append(s.Env, "SLURM_PRIO_PROCESS=x") },
			want: map[string]string{"SLURM_PRIO_PROCESS": "0"}},
		{name: "umask is applied, not passed on", edit: func(s *api.LaunchSpec) { s.Env = append(s.Env, "SLURM_UMASK=0027") },
			absent: []string{"SLURM_UMASK"}},
		{name: "what sbatch set stays", edit: func(s *api.LaunchSpec) {
			s.Env = append(s.Env, "SLURM_JOB_DEPENDENCY=afterok:7", "SLURM_EXPORT_ENV=NONE")
		}, want: map[string]string{"SLURM_JOB_DEPENDENCY": "afterok:7", "SLURM_EXPORT_ENV": "NONE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := baseSpec()
			if tt.edit != nil {
				tt.edit(&spec)
			}
			got := envMap(t, BuildEnv(&spec, "n2"))
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			for _, k := range tt.absent {
				if v, ok := got[k]; ok {
					t.Errorf("%s = %q, want it absent", k, v)
				}
			}
		})
	}
}

// TestBuildEnvTwoNodeGPUJob is the golden batch environment of a 2-node
// GPU job under a switch tree: sbatch -N2 --gpus-per-node=4
// --ntasks-per-node=4 -c2 --mem=64G -q high -A physics.
func TestBuildEnvTwoNodeGPUJob(t *testing.T) {
	spec := baseSpec()
	spec.JobID, spec.Name, spec.Account, spec.QOS = 31, "train", "physics", "high"
	spec.NumTasks, spec.CPUsPerTask = 8, 2
	spec.Alloc = []api.NodeAlloc{
		{Node: "gpu01", CPUs: 8, MemoryMB: 65536, GPUs: []int{0, 1, 2, 3}, Tasks: 4},
		{Node: "gpu02", CPUs: 8, MemoryMB: 65536, GPUs: []int{4, 5, 6, 7}, Tasks: 4},
	}
	spec.GPUUUIDs = []string{"GPU-0", "GPU-1", "GPU-2", "GPU-3"}
	spec.Request = &api.EnvRequest{GPUsPerNode: 4, TasksPerNode: 4, MemPerNodeMB: 65536}
	spec.TopoAddr, spec.TopoPattern = "spine.s1.gpu01", "switch.switch.node"
	spec.Env = append(spec.Env, "SLURM_UMASK=0022", "SLURM_PRIO_PROCESS=0")
	golden(t, "env-two-node-gpu", strings.Join(BuildEnv(&spec, "gpu01"), "\n")+"\n")
}
