package noded

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// TestStepEnvJobAndNode checks the step variables that come from the
// grant: the job's account and QOS, the node's place in the switch
// tree, and the job's GPUs on the node next to the step's.
func TestStepEnvJobAndNode(t *testing.T) {
	g := &api.StepGrant{JobID: 31, StepID: 0, JobName: "train", UserID: 1000, GroupID: 100, User: "alice",
		Partition: "gpu", Cluster: "c1", Account: "physics", QOS: "high", JobNodes: []string{"gpu01", "gpu02"}, NTasks: 4,
		Nodes: []api.StepNode{
			{Name: "gpu01", Addr: "10.0.0.1:6818", Ranks: []int{0, 1}, GPUs: [][]int{{0}, {1}}, CPUs: 8,
				JobGPUs: []int{0, 1, 2, 3}, TopoAddr: "spine.s1.gpu01", TopoPattern: "switch.switch.node"},
			{Name: "gpu02", Addr: "10.0.0.2:6818", Ranks: []int{2, 3}, GPUs: [][]int{{4}, {5}}, CPUs: 8},
		}}
	tests := []struct {
		name    string
		node, k int
		want    map[string]string
	}{
		{name: "node with the grant's new fields", node: 0, k: 1, want: map[string]string{
			"SLURM_JOB_ACCOUNT": "physics", "SLURM_JOB_QOS": "high", "TIDE_JOB_QOS": "high",
			"SLURM_TOPOLOGY_ADDR": "spine.s1.gpu01", "SLURM_TOPOLOGY_ADDR_PATTERN": "switch.switch.node",
			"CUDA_VISIBLE_DEVICES": "1", "SLURM_STEP_GPUS": "0,1", "SLURM_JOB_GPUS": "0,1,2,3", "SLURM_GPUS_ON_NODE": "2"}},
		{name: "node from an older controller", node: 1, k: 0, want: map[string]string{
			"SLURM_TOPOLOGY_ADDR": "gpu02", "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
			"SLURM_STEP_GPUS": "4,5", "SLURM_JOB_GPUS": "4,5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := envMap(t, stepEnv(g, tt.node, tt.k))
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestWithLaunchNode(t *testing.T) {
	tests := []struct {
		name string
		peer net.Addr
		want []string
	}{
		{name: "tcp", peer: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 40123}, want: []string{"A=1",
			"SLURM_LAUNCH_NODE_IPADDR=10.1.2.3", "TIDE_LAUNCH_NODE_IPADDR=10.1.2.3",
			"SLURM_SRUN_COMM_HOST=10.1.2.3", "TIDE_SRUN_COMM_HOST=10.1.2.3",
			"SLURM_SRUN_COMM_PORT=40123", "TIDE_SRUN_COMM_PORT=40123"}},
		{name: "ipv6", peer: &net.TCPAddr{IP: net.ParseIP("fd00::7"), Port: 9}, want: []string{"A=1",
			"SLURM_LAUNCH_NODE_IPADDR=fd00::7", "TIDE_LAUNCH_NODE_IPADDR=fd00::7",
			"SLURM_SRUN_COMM_HOST=fd00::7", "TIDE_SRUN_COMM_HOST=fd00::7",
			"SLURM_SRUN_COMM_PORT=9", "TIDE_SRUN_COMM_PORT=9"}},
		{name: "an inherited value is replaced in place", peer: &net.TCPAddr{IP: net.ParseIP("10.0.0.9"), Port: 1},
			want: []string{"A=1", "SLURM_SRUN_COMM_HOST=10.0.0.9", "SLURM_LAUNCH_NODE_IPADDR=10.0.0.9",
				"TIDE_LAUNCH_NODE_IPADDR=10.0.0.9", "TIDE_SRUN_COMM_HOST=10.0.0.9",
				"SLURM_SRUN_COMM_PORT=1", "TIDE_SRUN_COMM_PORT=1"}},
		{name: "unix socket", peer: &net.UnixAddr{Name: "/run/x.sock", Net: "unix"}, want: []string{"A=1"}},
		{name: "no peer", peer: nil, want: []string{"A=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := []string{"A=1"}
			if strings.HasPrefix(tt.name, "an inherited") {
				env = append(env, "SLURM_SRUN_COMM_HOST=192.0.2.1")
			}
			if diff := cmp.Diff(tt.want, withLaunchNode(env, tt.peer)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestViaTaskPIDShell runs a task through the shell and checks that
// SLURM_TASK_PID is the pid of the command itself.
func TestViaTaskPIDShell(t *testing.T) {
	if _, err := exec.LookPath("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	cmd := viaTaskPIDShell(&exec.Cmd{Path: "/bin/sh", Args: []string{"sh", "-c", `echo "$SLURM_TASK_PID $TIDE_TASK_PID $$ $0"`, "arg0"}})
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) != 4 {
		t.Fatalf("output %q", out)
	}
	if f[0] != f[2] || f[1] != f[2] || f[0] != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("SLURM_TASK_PID %s, TIDE_TASK_PID %s, the command's pid %s, started as %d", f[0], f[1], f[2], cmd.Process.Pid)
	}
	if f[3] != "arg0" {
		t.Errorf("the command's arguments were not passed on: $0 = %q", f[3])
	}
}
