package squeue

import (
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestTresPerNodeSlices(t *testing.T) {
	tests := []struct {
		name string
		spec api.JobSpec
		want string
	}{
		{name: "whole", spec: api.JobSpec{GPUsPerNode: 2}, want: "gres:gpu:2"},
		{name: "none", spec: api.JobSpec{}, want: "N/A"},
		{name: "one-slice", spec: api.JobSpec{GPUMemMB: 8192}, want: "gres:gpu:1,gpumem:8G"},
		{name: "slice-with-compute", spec: api.JobSpec{GPUsPerNode: 2, GPUMemMB: 8192, GPUComputePct: 10, GPUType: "h100"},
			want: "gres:gpu:h100:2,gpumem:8G,gpucompute:10"},
		{name: "shard", spec: api.JobSpec{GPUShards: 2, GPUMemMB: 20480}, want: "gres:gpu:1,shard:2"},
		{name: "mps", spec: api.JobSpec{GPUComputePct: 50}, want: "gres:gpu:1,gpucompute:50"},
		{name: "job-count-leaves-per-node-empty", spec: api.JobSpec{GPUs: 2, GPUMemMB: 8192}, want: "N/A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &api.Job{JobSpec: tt.spec}
			if got := string(tresPerNode(nil, nil, j)); got != tt.want {
				t.Errorf("tres-per-node = %q, want %q", got, tt.want)
			}
		})
	}
	j := &api.Job{JobSpec: api.JobSpec{GPUs: 2, GPUMemMB: 8192}}
	if got := string(tresPerJob(nil, nil, j)); got != "gres:gpu:2,gpumem:8G" {
		t.Errorf("tres-per-job = %q", got)
	}
}
