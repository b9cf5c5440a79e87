package ctld

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepio"
)

// envTreeConfig is the step harness's cluster under a switch tree: s1
// over gpu01, s2 over gpu02, spine over both.
const envTreeConfig = testConfig + `topology:
  switches:
    - {name: s1, nodes: gpu01}
    - {name: s2, nodes: gpu02}
    - {name: spine, switches: "s[1-2]"}
`

// TestLaunchAndGrantEnvData checks what the controller sends for the
// job's and the steps' environment (issue 22): the batch launch carries
// the request, the QOS and the batch host's place in the switch tree;
// a step grant the account, the QOS, and per node the job's GPUs and
// the node's place in the tree.
func TestLaunchAndGrantEnvData(t *testing.T) {
	h := newHarnessWith(t, strings.Replace(envTreeConfig, "state_dir: /unused", "state_dir: "+t.TempDir(), 1))
	for _, n := range []string{"gpu01", "gpu02"} {
		h.register(n)
		h.s.mu.Lock()
		h.s.nodes[n].StepAddr = "0.0.0.0:6818"
		h.s.mu.Unlock()
	}
	id := h.submit(api.JobSpec{Name: "train", Nodes: 2, TasksPerNode: 2, GPUsPerNode: 2, MemPerNodeMB: 4096,
		CPUsPerGPU: 1, TimeLimit: 600})
	h.s.schedulePass()
	j := h.job(id)
	if j.State != api.StateRunning {
		t.Fatalf("job %d %s", id, j.State)
	}
	h.s.mu.Lock()
	spec, err := h.s.launchSpec(h.s.jobs[id])
	h.s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	wantReq := &api.EnvRequest{GPUsPerNode: 2, TasksPerNode: 2, MemPerNodeMB: 4096, CPUsPerGPU: 1}
	if diff := cmp.Diff(wantReq, spec.Request); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	if spec.TopoAddr != "spine.s1."+j.BatchHost() || spec.TopoPattern != "switch.switch.node" {
		t.Errorf("batch host %s at %q %q", j.BatchHost(), spec.TopoAddr, spec.TopoPattern)
	}
	resp, err := h.s.createStep(context.Background(), h.alice, id, api.StepRequest{Argv: []string{"true"}, Cwd: "/", GPUsPerTask: 1})
	if err != nil {
		t.Fatal(err)
	}
	g, err := stepio.Decode(resp.Grant)
	if err != nil {
		t.Fatal(err)
	}
	for i, sn := range g.Nodes {
		leaf := map[string]string{"gpu01": "s1", "gpu02": "s2"}[sn.Name]
		if sn.TopoAddr != "spine."+leaf+"."+sn.Name || sn.TopoPattern != "switch.switch.node" {
			t.Errorf("node %s at %q %q", sn.Name, sn.TopoAddr, sn.TopoPattern)
		}
		if !slices.Equal(sn.JobGPUs, j.Alloc[i].GPUs) || len(sn.GPUs[0]) != 1 {
			t.Errorf("node %s: job GPUs %v, the job has %v (the task sees %v)", sn.Name, sn.JobGPUs, j.Alloc[i].GPUs, sn.GPUs)
		}
	}
}

func TestEnvRequestOf(t *testing.T) {
	tests := []struct {
		name   string
		spec   api.JobSpec
		defMem int64
		want   api.EnvRequest
	}{
		{name: "nothing asked, no default", want: api.EnvRequest{}},
		{name: "nothing asked takes the default per CPU", defMem: 2000, want: api.EnvRequest{MemPerCPUMB: 2000}},
		{name: "--mem keeps its own", spec: api.JobSpec{MemPerNodeMB: 100}, defMem: 2000, want: api.EnvRequest{MemPerNodeMB: 100}},
		{name: "--mem-per-gpu keeps its own", spec: api.JobSpec{MemPerGPUMB: 100}, defMem: 2000, want: api.EnvRequest{MemPerGPUMB: 100}},
		{name: "gpus", spec: api.JobSpec{GPUs: 16, GPUsPerTask: 2, GPUType: "h100", GPUShards: 3},
			want: api.EnvRequest{GPUs: 16, GPUsPerTask: 2, GPUType: "h100", GPUShards: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(&tt.want, api.EnvRequestOf(&tt.spec, tt.defMem)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
