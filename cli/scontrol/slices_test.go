package scontrol

import (
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestJobTRESSlices(t *testing.T) {
	tests := []struct {
		name      string
		job       api.Job
		tres      string
		sliceText string
	}{
		{name: "requested-slice", job: api.Job{JobSpec: api.JobSpec{GPUMemMB: 8192, GPUComputePct: 10}},
			tres: "cpu=1,node=1,billing=1,gres/gpu=1,gres/gpumem=8G", sliceText: ",gpumem:8G,gpucompute:10"},
		{name: "allocated-two-slices", job: api.Job{JobSpec: api.JobSpec{GPUs: 2, GPUMemMB: 8192},
			Alloc: []api.NodeAlloc{{Node: "n1", CPUs: 2, MemoryMB: 1024, GPUs: []int{0, 3}, GPUMemMB: 8192}}},
			tres: "cpu=2,mem=1G,node=1,billing=2,gres/gpu=2,gres/gpumem=16G", sliceText: ",gpumem:8G"},
		{name: "shard", job: api.Job{JobSpec: api.JobSpec{GPUShards: 2, GPUMemMB: 20480}},
			tres: "cpu=1,node=1,billing=1,gres/gpu=1,gres/gpumem=20G", sliceText: ",shard:2"},
		{name: "whole", job: api.Job{JobSpec: api.JobSpec{GPUs: 2}}, tres: "cpu=1,node=1,billing=1,gres/gpu=2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jobTRES(&tt.job); got != tt.tres {
				t.Errorf("jobTRES = %q, want %q", got, tt.tres)
			}
			if got := sliceSuffix(&tt.job); got != tt.sliceText {
				t.Errorf("sliceSuffix = %q, want %q", got, tt.sliceText)
			}
		})
	}
}
