package steps

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/jobenv"
)

func TestStepSliceEnv(t *testing.T) {
	dirs := map[int]jobenv.MPSDirs{1: {Pipe: "/run/tided/mps/gpu1/pipe", Log: "/run/tided/mps/gpu1/log"}}
	slice := &api.NodeAlloc{GPUMemMB: 8192, GPUComputePct: 25}
	inherited := []string{"HOME=/h", "CUDA_MPS_PIPE_DIRECTORY=/elsewhere", "CUDA_MPS_LOG_DIRECTORY=/elsewhere",
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M,1=8192M", "TIDE_GPU_MEM_MB=8192"}
	tests := []struct {
		name  string
		slice *api.NodeAlloc
		gpus  []int
		want  []string
	}{
		{name: "one sliced GPU with a daemon", slice: slice, gpus: []int{1}, want: []string{"HOME=/h",
			"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M", "TIDE_GPU_MEM_MB=8192",
			"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25", "TIDE_GPU_COMPUTE_PCT=25",
			"CUDA_MPS_PIPE_DIRECTORY=/run/tided/mps/gpu1/pipe", "CUDA_MPS_LOG_DIRECTORY=/run/tided/mps/gpu1/log"}},
		{name: "GPU without a daemon keeps advisory limits", slice: slice, gpus: []int{2}, want: []string{"HOME=/h",
			"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M", "TIDE_GPU_MEM_MB=8192",
			"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25", "TIDE_GPU_COMPUTE_PCT=25"}},
		{name: "several sliced GPUs: no daemon, one limit per ordinal", slice: slice, gpus: []int{1, 2}, want: []string{"HOME=/h",
			"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M,1=8192M", "TIDE_GPU_MEM_MB=8192",
			"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25", "TIDE_GPU_COMPUTE_PCT=25"}},
		{name: "whole GPUs drop inherited slice variables", slice: &api.NodeAlloc{}, gpus: []int{1}, want: []string{"HOME=/h"}},
		{name: "slice size unknown: limits inherited, MPS directories dropped", gpus: []int{1}, want: []string{"HOME=/h",
			"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8192M,1=8192M", "TIDE_GPU_MEM_MB=8192"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := stepSliceEnv(inherited, tt.slice, tt.gpus, dirs)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("step env (-want +got):\n%s", diff)
			}
		})
	}

}

// TestStepSliceFromGrant: where tided runs no batch script of the job,
// the step's slice size comes from the grant's node entry.
func TestStepSliceFromGrant(t *testing.T) {
	tests := []struct {
		name   string
		sn     *api.StepNode
		sliced bool
		isNil  bool
	}{
		{name: "slice in the grant", sn: &api.StepNode{Name: "n2", GPUMemMB: 8192, GPUComputePct: 25}, sliced: true},
		{name: "whole GPUs", sn: &api.StepNode{Name: "n2"}},
		{name: "nothing known", isNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := stepSlice(nil, tt.sn, "n2")
			if (got == nil) != tt.isNil {
				t.Fatalf("stepSlice = %+v, want nil %v", got, tt.isNil)
			}
			if got != nil && got.Sliced() != tt.sliced {
				t.Errorf("Sliced() = %v, want %v (%+v)", got.Sliced(), tt.sliced, got)
			}
		})
	}
}
