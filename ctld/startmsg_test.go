package ctld

import (
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestStartMessage pins the allocation form of start events: the chaos
// test (test/integration) parses it to rebuild who held which CPUs and
// GPUs when.
func TestStartMessage(t *testing.T) {
	tests := []struct {
		name  string
		why   string
		alloc []api.NodeAlloc
		want  string
	}{
		{"cpu only", "best fit on gpu01", []api.NodeAlloc{{Node: "gpu01", CPUs: 4, MemoryMB: 8192}},
			"best fit on gpu01 [alloc gpu01 cpus=4 mem_mb=8192]"},
		{"two nodes with GPUs", "best fit on 2 whole nodes gpu[01-02] under leaf s1",
			[]api.NodeAlloc{{Node: "gpu01", CPUs: 8, MemoryMB: 100, GPUs: []int{0, 1}}, {Node: "gpu02", CPUs: 8, MemoryMB: 100, GPUs: []int{6, 7}}},
			"best fit on 2 whole nodes gpu[01-02] under leaf s1 [alloc gpu01 cpus=8 mem_mb=100 gpus=0,1; gpu02 cpus=8 mem_mb=100 gpus=6,7]"},
		{"slice", "", []api.NodeAlloc{{Node: "gpu03", CPUs: 1, GPUs: []int{2}, GPUMemMB: 10240, GPUComputePct: 25}},
			"[alloc gpu03 cpus=1 mem_mb=0 gpus=2 gpu_mem_mb=10240 gpu_pct=25]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := startMessage(tt.why, tt.alloc); got != tt.want {
				t.Errorf("startMessage = %q, want %q", got, tt.want)
			}
		})
	}
}
