package jobenv

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestNodeAlloc(t *testing.T) {
	spec := &api.LaunchSpec{Alloc: []api.NodeAlloc{{Node: "a", CPUs: 4}, {Node: "b", CPUs: 2}}}
	tests := []struct {
		name string
		spec *api.LaunchSpec
		node string
		want api.NodeAlloc
	}{
		{name: "listed node", spec: spec, node: "b", want: api.NodeAlloc{Node: "b", CPUs: 2}},
		{name: "unlisted node gets the batch node's", spec: spec, node: "c", want: api.NodeAlloc{Node: "a", CPUs: 4}},
		{name: "no allocation", spec: &api.LaunchSpec{}, node: "c", want: api.NodeAlloc{Node: "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, NodeAlloc(tt.spec, tt.node)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestTideTwin(t *testing.T) {
	tests := []struct {
		k, want string
		ok      bool
	}{
		{k: "SLURM_JOB_ID", want: "TIDE_JOB_ID", ok: true},
		{k: "SLURMD_NODENAME", want: "TIDE_NODENAME", ok: true},
		{k: "HOME"},
	}
	for _, tt := range tests {
		if got, ok := TideTwin(tt.k); got != tt.want || ok != tt.ok {
			t.Errorf("TideTwin(%q) = %q, %v; want %q, %v", tt.k, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCompressCountsAndUmask(t *testing.T) {
	if got := CompressCounts([]int{4, 4, 2, 1, 1, 1}); got != "4(x2),2,1(x3)" {
		t.Errorf("CompressCounts = %q", got)
	}
	for env, want := range map[string]int{"SLURM_UMASK=0027": 0o027, "SLURM_UMASK=0999": -1, "SLURM_UMASK=": -1, "HOME=/h": -1} {
		if got := UmaskFromEnv([]string{env}); got != want {
			t.Errorf("UmaskFromEnv(%q) = %o, want %o", env, got, want)
		}
	}
}

// TestMPSEnv: a process becomes an MPS client only when it sees exactly
// one sliced GPU whose daemon runs.
func TestMPSEnv(t *testing.T) {
	dirs := map[int]MPSDirs{1: {Pipe: "/p1", Log: "/l1"}}
	tests := []struct {
		name string
		gpus []int
		want []string
	}{
		{name: "one GPU with a daemon", gpus: []int{1}, want: []string{"A=1", EnvMPSPipe + "=/p1", EnvMPSLog + "=/l1"}},
		{name: "one GPU without", gpus: []int{2}, want: []string{"A=1"}},
		{name: "two GPUs", gpus: []int{1, 2}, want: []string{"A=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := WithMPSEnv([]string{"A=1", EnvMPSPipe + "=/old"}, tt.gpus, dirs)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
