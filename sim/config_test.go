package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/sched"
	"github.com/tide-hpc/tide/sim/trace"
)

// twoPartitions is a controller config: two node shapes, a default
// partition over all nodes and a small debug one, two leaf switches.
const twoPartitions = `
version: 1
cluster_name: simtest
nodes:
  - {names: "a[1-2]", cpus: 32, memory: 256G, gpus: 4, features: [nvlink, h100]}
  - {names: "b[1-2]", cpus: 16, memory: 128G, gpus: 2}
partitions:
  - {name: gpu, nodes: "a[1-2],b[1-2]", default: true, policy: spread, gpu_slicing: false}
  - {name: debug, nodes: "b[1-2]", max_time: "10", max_nodes: 1, gpu_mem_oversubscribe: 1.2}
topology:
  switches:
    - {name: leaf1, nodes: "a[1-2]"}
    - {name: leaf2, nodes: "b[1-2]"}
    - {name: spine, switches: "leaf[1-2]"}
scheduler: {policy: backfill, max_starts: 5}
`

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tide.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadConfigCluster(t *testing.T) {
	c, pol, err := LoadConfig(writeConfig(t, twoPartitions))
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		Name, Switch, Model string
		CPUs, GPUs          int
		Mem                 int64
		Features            []string
	}
	var nodes []node
	for _, n := range c.Nodes {
		if !n.Usable || !n.Idle || len(n.FreeGPUs) != n.GPUs || n.FreeCPUs != n.CPUs || n.FreeMemMB != n.MemoryMB {
			t.Errorf("node %s is not idle and usable: %+v", n.Name, n)
		}
		nodes = append(nodes, node{n.Name, n.Switch, n.GPUModel, n.CPUs, n.GPUs, n.MemoryMB, n.Features})
	}
	wantNodes := []node{
		{"a1", "leaf1", "sim", 32, 4, 262144, []string{"h100", "nvlink"}},
		{"a2", "leaf1", "sim", 32, 4, 262144, []string{"h100", "nvlink"}},
		{"b1", "leaf2", "sim", 16, 2, 131072, nil},
		{"b2", "leaf2", "sim", 16, 2, 131072, nil},
	}
	if diff := cmp.Diff(wantNodes, nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	wantParts := map[string]*sched.PartitionInfo{
		"gpu": {Name: "gpu", Nodes: []string{"a1", "a2", "b1", "b2"}, Up: true, DefaultTime: -1, MaxTime: -1,
			Spread: true, NoGPUSlicing: true, GPUMemRatio: 1, GPUComputeRatio: 1},
		"debug": {Name: "debug", Nodes: []string{"b1", "b2"}, Up: true, DefaultTime: -1, MaxTime: 600, MaxNodes: 1,
			GPUMemRatio: 1.2, GPUComputeRatio: 1},
	}
	if diff := cmp.Diff(wantParts, c.Partitions); diff != "" {
		t.Errorf("partitions (-want +got):\n%s", diff)
	}
	if c.DefaultPartition != "gpu" || c.GPUsPerNode != 4 || c.CPUsPerNode != 32 || c.MemPerNodeMB != 262144 || c.TotalGPUs() != 12 {
		t.Errorf("cluster shape: default %q, %d GPUs × %d CPUs × %d MB per node, %d GPUs",
			c.DefaultPartition, c.GPUsPerNode, c.CPUsPerNode, c.MemPerNodeMB, c.TotalGPUs())
	}
	if got := c.Tree.Leaves(); len(got) != 2 {
		t.Errorf("leaves %v, want 2", got)
	}
	// The config's scheduler settings (its defaults here) reach the
	// replay: aging and the backfill plan's limits.
	wantPol := PolicySpec{Name: "config", Topology: true, Sched: sched.Config{Policy: sched.PolicyBackfill, MaxStarts: 5,
		StarvationAge: 30 * time.Minute,
		Backfill:      sched.BackfillConfig{MaxJobTest: 500, Resolution: time.Minute, Window: 7 * 24 * time.Hour}}}
	if diff := cmp.Diff(wantPol, pol); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{name: "invalid config", yaml: "version: 1\n", want: "at least one partition"},
		{name: "unknown key", yaml: "version: 1\nnodez: []\n", want: "nodez"},
		{name: "no cpus", yaml: "version: 1\nnodes: [{names: n1, memory: 1G, gpus: 1}]\npartitions: [{name: a, nodes: n1}]\n",
			want: "node n1: the simulator needs cpus and memory"},
		{name: "no memory", yaml: "version: 1\nnodes: [{names: n1, cpus: 4, gpus: 1}]\npartitions: [{name: a, nodes: n1}]\n",
			want: "needs cpus and memory"},
		{name: "no gpus", yaml: "version: 1\nnodes: [{names: n1, cpus: 4, memory: 1G}]\npartitions: [{name: a, nodes: n1}]\n",
			want: "no node with gpus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := LoadConfig(writeConfig(t, tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestConfigReplay replays a few jobs on the config's cluster under the
// config's policy and checks what the partitions' limits do.
func TestConfigReplay(t *testing.T) {
	c, pol, err := LoadConfig(writeConfig(t, twoPartitions))
	if err != nil {
		t.Fatal(err)
	}
	jobs := []trace.Job{
		{ID: "big", Submit: 0, Duration: 100, GPUs: 8, Share: 1, Queue: "gpu"},
		{ID: "dbg", Submit: 0, Duration: 60, GPUs: 2, Share: 1, Queue: "debug"},
		{ID: "too-long", Submit: 5, Duration: 3600, GPUs: 1, Share: 1, Queue: "debug"},
		{ID: "too-wide", Submit: 5, Duration: 60, GPUs: 4, Share: 1, Queue: "debug"},
		{ID: "other", Submit: 10, Duration: 50, GPUs: 2, Share: 1, Queue: "nosuch"},
	}
	for i := range jobs {
		jobs[i].Start, jobs[i].End = -1, -1
	}
	res, err := Run(jobs, Options{Cluster: c, Policy: pol, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, j := range res.Jobs {
		got[j.TraceID] = j.Outcome
	}
	// A job over the partition's max_time stays pending, as in Slurm
	// (PartitionTimeLimit); one no debug node can hold is rejected; an
	// unknown queue goes to the default partition.
	want := map[string]string{
		"big": OutcomeDone, "dbg": OutcomeDone, "other": OutcomeDone,
		"too-long": OutcomeUnstarted, "too-wide": OutcomeRejected,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s\njobs: %+v", diff, res.Jobs)
	}
	if res.Policy != "config" || res.TotalGPUs != 12 {
		t.Errorf("result policy %q, %d GPUs", res.Policy, res.TotalGPUs)
	}
}

func TestParsePoliciesConfig(t *testing.T) {
	cfg := &PolicySpec{Name: "config", Sched: sched.Config{Policy: sched.PolicyFIFO}}
	tests := []struct {
		name string
		list []string
		cfg  *PolicySpec
		want []string
		err  string
	}{
		{name: "with a config", list: []string{"fifo", "config"}, cfg: cfg, want: []string{"fifo", "config"}},
		{name: "without a config", list: []string{"config"}, err: "needs --config"},
		{name: "unknown names config", list: []string{"lottery"}, cfg: cfg, err: "tide, priority or config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := ParsePoliciesWith(tt.list, tt.cfg)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range ps {
				names = append(names, p.Name)
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("policies (-want +got):\n%s", diff)
			}
		})
	}
}
