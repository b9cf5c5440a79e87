package sched

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
)

// workloadOf builds a pass over one 8-GPU node and returns the
// workload it measures: shape → popularity (rounded to 1e-6).
func workloadOf(snap *Snapshot) map[string]float64 {
	snap.Nodes = []NodeInfo{{Name: "n1", Usable: true, CPUs: 64, FreeCPUs: 64, GPUs: 8, FreeGPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}
	p := newPass(snap, Config{})
	p.fgd.build(p)
	out := map[string]float64{}
	for _, s := range p.fgd.shapes {
		key := fmt.Sprintf("%dg", s.slot.GPUs)
		if s.slot.GPUComputePct > 0 {
			key += fmt.Sprintf("/%d%%", s.slot.GPUComputePct)
		}
		if s.slot.CPUs > 0 {
			key += fmt.Sprintf("/%dc", s.slot.CPUs)
		}
		if s.model != "" {
			key += "/" + s.model
		}
		out[key] = float64(int64(s.p*1e6+0.5)) / 1e6
	}
	return out
}

func TestFGDWorkload(t *testing.T) {
	running := func(n int, alloc api.NodeAlloc) []RunningJob {
		out := make([]RunningJob, n)
		for i := range out {
			out[i] = RunningJob{JobID: uint64(i + 1), Alloc: []api.NodeAlloc{{Node: "x", GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}, alloc}}
		}
		return out
	}
	many := make([]WorkloadShape, 80)
	for i := range many {
		many[i] = WorkloadShape{GPUs: 1, GPUComputePct: i + 1, Weight: 1}
	}
	tests := []struct {
		name string
		snap Snapshot
		want map[string]float64
	}{
		{
			name: "popular shapes covering 95 %, renormalized",
			snap: Snapshot{Workload: []WorkloadShape{
				{GPUs: 1, Weight: 90}, {GPUs: 8, Weight: 6}, {GPUs: 1, GPUComputePct: 30, Weight: 4},
			}},
			want: map[string]float64{"1g": 0.9375, "8g": 0.0625},
		},
		{
			name: "equal shapes merge, shapes without GPUs or weight are ignored",
			snap: Snapshot{Workload: []WorkloadShape{
				{GPUs: 2, Weight: 1}, {GPUs: 2, Weight: 1}, {GPUs: 4, GPUModel: "A100", Weight: 2},
				{CPUs: 8, Weight: 50}, {GPUs: 1, Weight: 0}, {GPUs: 1, Weight: -3},
			}},
			want: map[string]float64{"2g": 0.5, "4g/a100": 0.5},
		},
		{
			name: "at most fgdMaxShapes shapes",
			snap: Snapshot{Workload: many},
			want: func() map[string]float64 {
				m := map[string]float64{}
				for i := range fgdMaxShapes {
					m[fmt.Sprintf("1g/%d%%", i+1)] = 0.015625
				}
				return m
			}(),
		},
		{
			name: "running jobs by their smallest node allocation",
			snap: Snapshot{Running: append(running(3, api.NodeAlloc{Node: "y", CPUs: 4, GPUs: []int{0, 1}}),
				running(1, api.NodeAlloc{Node: "y", CPUs: 2, GPUs: []int{3}, GPUComputePct: 25})...)},
			want: map[string]float64{"2g/4c": 0.75, "1g/25%/2c": 0.25},
		},
		{
			name: "the workload given wins over the running jobs",
			snap: Snapshot{Workload: []WorkloadShape{{GPUs: 4, Weight: 1}},
				Running: running(2, api.NodeAlloc{Node: "y", GPUs: []int{0}})},
			want: map[string]float64{"4g": 1},
		},
		{
			name: "pending jobs are never the workload",
			snap: Snapshot{Pending: []*api.Job{{ID: 1, JobSpec: api.JobSpec{GPUs: 2}}}},
			want: map[string]float64{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, workloadOf(&tt.snap)); diff != "" {
				t.Errorf("workload (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFGDWorkloadSampleMix: a running list longer than fgdSample is
// read with a stride (here 3, over 12,000 jobs) and keeps its mix.
func TestFGDWorkloadSampleMix(t *testing.T) {
	out := make([]RunningJob, 3*fgdSample)
	for i := range out {
		gpus := []int{0}
		if i%5 == 0 {
			gpus = []int{0, 1}
		}
		out[i] = RunningJob{JobID: uint64(i + 1), Alloc: []api.NodeAlloc{{Node: "y", GPUs: gpus}}}
	}
	got := workloadOf(&Snapshot{Running: out})
	if len(got) != 2 || math.Abs(got["1g"]-0.8) > 0.001 || math.Abs(got["2g"]-0.2) > 0.001 {
		t.Errorf("workload %v, want 1g 0.8 and 2g 0.2 (±0.001)", got)
	}
}

func TestJobShape(t *testing.T) {
	tests := []struct {
		name    string
		spec    api.JobSpec
		maxGPUs int
		want    WorkloadShape
	}{
		{name: "gpus with cpus and memory per gpu", spec: api.JobSpec{GPUs: 4, CPUsPerGPU: 8, MemPerGPUMB: 1000},
			want: WorkloadShape{GPUs: 4, CPUs: 32, MemMB: 4000, Weight: 1}},
		{name: "a gpu total over node size splits", spec: api.JobSpec{GPUs: 16, CPUsPerGPU: 2}, maxGPUs: 8,
			want: WorkloadShape{GPUs: 8, CPUs: 16, Weight: 1}},
		{name: "per-node gpus on several nodes", spec: api.JobSpec{Nodes: 2, GPUsPerNode: 4},
			want: WorkloadShape{GPUs: 4, CPUs: 1, Weight: 1}},
		{name: "a slice", spec: api.JobSpec{GPUComputePct: 30, GPUMemMB: 8192, GPUType: "A100"},
			want: WorkloadShape{GPUs: 1, GPUComputePct: 30, GPUMemMB: 8192, CPUs: 1, GPUModel: "a100", Weight: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, JobShape(&tt.spec, tt.maxGPUs, 0)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
