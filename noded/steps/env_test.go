package steps

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
