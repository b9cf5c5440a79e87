package sacct

import (
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestTRESSlices(t *testing.T) {
	twoSlices := api.Job{JobSpec: api.JobSpec{GPUs: 2, GPUMemMB: 8192},
		Alloc: []api.NodeAlloc{{Node: "n1", CPUs: 2, MemoryMB: 1024, GPUs: []int{0, 3}, GPUMemMB: 8192}}}
	grown := api.Job{JobSpec: api.JobSpec{GPUMemMB: 8192},
		Alloc: []api.NodeAlloc{{Node: "n1", CPUs: 1, GPUs: []int{2}, GPUMemMB: 62 * 1024}}}
	tests := []struct {
		name  string
		job   api.Job
		step  bool
		alloc string
		req   string
	}{
		{name: "two-slices", job: twoSlices,
			alloc: "billing=2,cpu=2,gres/gpu=2,gres/gpumem=16G,mem=1G,node=1",
			req:   "billing=1,cpu=1,gres/gpu=2,gres/gpumem=16G,node=1"},
		{name: "batch-step", job: twoSlices, step: true, alloc: "cpu=2,gres/gpu=2,gres/gpumem=16G,mem=1G,node=1",
			req: "billing=1,cpu=1,gres/gpu=2,gres/gpumem=16G,node=1"},
		{name: "grown-by-reclaim", job: grown,
			alloc: "billing=1,cpu=1,gres/gpu=1,gres/gpumem=62G,node=1",
			req:   "billing=1,cpu=1,gres/gpu=1,gres/gpumem=8G,node=1"},
		{name: "whole-gpus", job: api.Job{JobSpec: api.JobSpec{GPUs: 2},
			Alloc: []api.NodeAlloc{{Node: "n1", CPUs: 2, GPUs: []int{0, 1}}}},
			alloc: "billing=2,cpu=2,gres/gpu=2,node=1", req: "billing=1,cpu=1,gres/gpu=2,node=1"},
		{name: "pending-slice", job: api.Job{JobSpec: api.JobSpec{GPUMemMB: 8192}},
			alloc: "", req: "billing=1,cpu=1,gres/gpu=1,gres/gpumem=8G,node=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &row{j: &tt.job, step: tt.step}
			if got := r.allocTRES(); got != tt.alloc {
				t.Errorf("AllocTRES = %q, want %q", got, tt.alloc)
			}
			if got := reqTRES(&tt.job); got != tt.req {
				t.Errorf("ReqTRES = %q, want %q", got, tt.req)
			}
		})
	}
}
