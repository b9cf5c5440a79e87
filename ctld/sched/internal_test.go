package sched

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tide-hpc/tide/ctld/api"
)

func TestFillSlots(t *testing.T) {
	tests := []struct {
		name   string
		spec   api.JobSpec
		nodes  int
		defMem int64
		want   []Slot
	}{
		{
			name:  "defaults: one task, one cpu, no memory",
			nodes: 1,
			want:  []Slot{{Tasks: 1, CPUs: 1}},
		},
		{
			name:   "default memory per cpu applies when nothing is asked",
			spec:   api.JobSpec{Tasks: 2, CPUsPerTask: 3},
			nodes:  1,
			defMem: 1000,
			want:   []Slot{{Tasks: 2, CPUs: 6, MemMB: 6000}},
		},
		{
			name:  "tasks spread evenly, earlier nodes take the remainder",
			spec:  api.JobSpec{Tasks: 7, CPUsPerTask: 2},
			nodes: 3,
			want:  []Slot{{Tasks: 3, CPUs: 6}, {Tasks: 2, CPUs: 4}, {Tasks: 2, CPUs: 4}},
		},
		{
			name:  "tasks per node wins over the total",
			spec:  api.JobSpec{Tasks: 3, TasksPerNode: 4},
			nodes: 2,
			want:  []Slot{{Tasks: 4, CPUs: 4}, {Tasks: 4, CPUs: 4}},
		},
		{
			name:  "one task per node when tasks are not given",
			spec:  api.JobSpec{CPUsPerTask: 8},
			nodes: 2,
			want:  []Slot{{Tasks: 1, CPUs: 8}, {Tasks: 1, CPUs: 8}},
		},
		{
			name:  "fewer tasks than nodes still gives every node a cpu",
			spec:  api.JobSpec{Tasks: 1},
			nodes: 2,
			want:  []Slot{{Tasks: 1, CPUs: 1}, {Tasks: 0, CPUs: 1}},
		},
		{
			name:  "total gpus split, earlier nodes take the remainder",
			spec:  api.JobSpec{GPUs: 5},
			nodes: 2,
			want:  []Slot{{Tasks: 1, CPUs: 1, GPUs: 3}, {Tasks: 1, CPUs: 1, GPUs: 2}},
		},
		{
			name:  "gpus per node",
			spec:  api.JobSpec{GPUsPerNode: 4, GPUs: 1},
			nodes: 2,
			want:  []Slot{{Tasks: 1, CPUs: 1, GPUs: 4}, {Tasks: 1, CPUs: 1, GPUs: 4}},
		},
		{
			name:  "gpus per task follow the tasks of each node",
			spec:  api.JobSpec{Tasks: 3, GPUsPerTask: 2},
			nodes: 2,
			want:  []Slot{{Tasks: 2, CPUs: 2, GPUs: 4}, {Tasks: 1, CPUs: 1, GPUs: 2}},
		},
		{
			name:  "cpus per gpu raise the cpus",
			spec:  api.JobSpec{GPUs: 2, CPUsPerGPU: 8, Tasks: 1},
			nodes: 1,
			want:  []Slot{{Tasks: 1, CPUs: 16, GPUs: 2}},
		},
		{
			name:  "cpus per gpu never lower the cpus",
			spec:  api.JobSpec{GPUs: 1, CPUsPerGPU: 2, Tasks: 4, CPUsPerTask: 2},
			nodes: 1,
			want:  []Slot{{Tasks: 4, CPUs: 8, GPUs: 1}},
		},
		{
			name:   "memory per node beats every other memory option",
			spec:   api.JobSpec{MemPerNodeMB: 500, MemPerCPUMB: 7, MemPerGPUMB: 9, GPUs: 1},
			nodes:  1,
			defMem: 3,
			want:   []Slot{{Tasks: 1, CPUs: 1, MemMB: 500, GPUs: 1}},
		},
		{
			name:  "memory per cpu uses the raised cpu count",
			spec:  api.JobSpec{MemPerCPUMB: 100, GPUs: 2, CPUsPerGPU: 4},
			nodes: 1,
			want:  []Slot{{Tasks: 1, CPUs: 8, MemMB: 800, GPUs: 2}},
		},
		{
			name:  "memory per gpu",
			spec:  api.JobSpec{MemPerGPUMB: 1000, GPUs: 3},
			nodes: 2,
			want:  []Slot{{Tasks: 1, CPUs: 1, MemMB: 2000, GPUs: 2}, {Tasks: 1, CPUs: 1, MemMB: 1000, GPUs: 1}},
		},
		{
			name:  "overcommit: one task's cpus per node, whatever the tasks",
			spec:  api.JobSpec{Tasks: 65, Overcommit: true},
			nodes: 1,
			want:  []Slot{{Tasks: 65, CPUs: 1}},
		},
		{
			name:   "overcommit: cpus per task are given per node, memory per cpu follows them",
			spec:   api.JobSpec{Tasks: 9, CPUsPerTask: 4, Overcommit: true, MemPerCPUMB: 100},
			nodes:  2,
			defMem: 7,
			want:   []Slot{{Tasks: 5, CPUs: 4, MemMB: 400}, {Tasks: 4, CPUs: 4, MemMB: 400}},
		},
		{
			name:  "overcommit keeps gpus per task and cpus per gpu",
			spec:  api.JobSpec{Tasks: 4, GPUsPerTask: 1, CPUsPerGPU: 2, Overcommit: true},
			nodes: 1,
			want:  []Slot{{Tasks: 4, CPUs: 8, GPUs: 4}},
		},
		{
			name:  "mincpus raises every node's cpus",
			spec:  api.JobSpec{Tasks: 3, MinCPUs: 4},
			nodes: 2,
			want:  []Slot{{Tasks: 2, CPUs: 4}, {Tasks: 1, CPUs: 4}},
		},
		{
			name:  "mincpus below the tasks' cpus changes nothing",
			spec:  api.JobSpec{Tasks: 4, CPUsPerTask: 2, MinCPUs: 3},
			nodes: 1,
			want:  []Slot{{Tasks: 4, CPUs: 8}},
		},
		{
			name:   "mincpus with overcommit, memory per cpu from the default",
			spec:   api.JobSpec{Tasks: 100, Overcommit: true, MinCPUs: 16},
			nodes:  1,
			defMem: 10,
			want:   []Slot{{Tasks: 100, CPUs: 16, MemMB: 160}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fillSlots(nil, &tt.spec, tt.nodes, tt.defMem)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fillSlots (-want +got):\n%s", diff)
			}
			if k := largestSlot(&tt.spec, tt.nodes, tt.defMem); k != got[0] {
				t.Errorf("largestSlot = %+v, fillSlots' first %+v", k, got[0])
			}
			for k := 1; k < len(got); k++ {
				a, b := got[k-1], got[k]
				if b.Tasks > a.Tasks || b.CPUs > a.CPUs || b.MemMB > a.MemMB || b.GPUs > a.GPUs {
					t.Errorf("slot %d %+v larger than slot %d %+v", k, b, k-1, a)
				}
			}
		})
	}
}

func TestEffectiveTimeLimit(t *testing.T) {
	tests := []struct {
		name       string
		job        int64
		def, max   int64
		want       int64
		wantExceed bool
	}{
		{name: "job limit", job: 60, def: 30, max: 100, want: 60},
		{name: "partition default", def: 30, max: 100, want: 30},
		{name: "max time when no default", max: 100, want: 100},
		{name: "infinite when nothing is set", max: api.Infinite, want: api.Infinite},
		{name: "above max", job: 101, max: 100, want: 101, wantExceed: true},
		{name: "unlimited job in limited partition", job: api.Infinite, max: 100, want: api.Infinite, wantExceed: true},
		{name: "default above max", def: 200, max: 100, want: 200, wantExceed: true},
		{name: "anything under an infinite max", job: 1 << 40, max: api.Infinite, want: 1 << 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			part := &PartitionInfo{DefaultTime: tt.def, MaxTime: tt.max}
			got := effectiveTimeLimit(&api.JobSpec{TimeLimit: tt.job}, part)
			if got != tt.want {
				t.Errorf("effectiveTimeLimit = %d, want %d", got, tt.want)
			}
			if e := exceedsMaxTime(got, part); e != tt.wantExceed {
				t.Errorf("exceedsMaxTime = %v, want %v", e, tt.wantExceed)
			}
		})
	}
}

func TestCompareNames(t *testing.T) {
	got := []string{"gpu10", "gpu2", "cpu1", "gpu02", "gpu1", "gpu", "gpu1a", "gpu001"}
	slices.SortStableFunc(got, compareNames)
	want := []string{"cpu1", "gpu", "gpu001", "gpu1", "gpu1a", "gpu02", "gpu2", "gpu10"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("natural order (-want +got):\n%s", diff)
	}
}

func TestHistogramString(t *testing.T) {
	tests := []struct {
		name  string
		total int
		avail int
		add   []api.DetailCode
		want  string
	}{
		{name: "empty", total: 4, avail: 4, want: "4/4 nodes available"},
		{
			name: "count desc then code", total: 4,
			add:  []api.DetailCode{"NodeDrained", "InsufficientGPU", "InsufficientCPU", "InsufficientGPU"},
			want: "0/4 nodes available: 2 InsufficientGPU, 1 InsufficientCPU, 1 NodeDrained",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h histogram
			h.reset(tt.total)
			h.available = tt.avail
			for _, c := range tt.add {
				h.add(c)
			}
			if got := h.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestChainOrder(t *testing.T) {
	// The chain must run cheap, static checks before the ones on free
	// amounts, and exactly the first six are static.
	c := newChain()
	var names []string
	for _, f := range c.filters {
		names = append(names, f.Name())
	}
	want := []string{"usable", "exclude", "requested", "gpu-model", "features", "tmp-disk", "reserved", "idle", "cpu", "memory", "gpu", "nvlink"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("chain (-want +got):\n%s", diff)
	}
	if c.static != 6 {
		t.Errorf("static = %d, want 6", c.static)
	}
}

func TestFilters(t *testing.T) {
	info := &NodeInfo{Name: "n1", CPUs: 8, GPUModel: "h100", Unusable: api.DetailNodeDrained, TmpDiskMB: 4096}
	base := NodeState{Info: info, Usable: true, FreeCPUs: 8, FreeMemMB: 1000, FreeGPUs: []int{0, 1}, Idle: true}
	slot := Slot{Tasks: 1, CPUs: 8, MemMB: 1000, GPUs: 2}
	tests := []struct {
		name string
		req  Request
		info func(i *NodeInfo)
		node func(n *NodeState)
		slot func(s *Slot)
		want api.DetailCode
	}{
		{name: "fits exactly", want: ""},
		{name: "unusable names its detail", node: func(n *NodeState) { n.Usable = false }, want: api.DetailNodeDrained},
		{name: "excluded", node: func(n *NodeState) { n.excluded = 1 }, want: api.DetailNodeExcluded},
		{name: "not requested", req: Request{OnlyRequired: true}, want: api.DetailNodeNotRequested},
		{name: "requested", req: Request{OnlyRequired: true}, node: func(n *NodeState) { n.required = 1 }, want: ""},
		{name: "gpu model mismatch", req: Request{GPUType: "a100"}, want: api.DetailGPUType},
		{name: "gpu model case-insensitive", req: Request{GPUType: "H100"}, want: ""},
		{name: "reserved", node: func(n *NodeState) { n.Reserved = true }, want: DetailReserved},
		{name: "exclusive needs idle", req: Request{Exclusive: true}, node: func(n *NodeState) { n.Idle = false }, want: api.DetailNodeBusy},
		{name: "cpu", slot: func(s *Slot) { s.CPUs = 9 }, want: api.DetailInsufficientCPU},
		{name: "memory", slot: func(s *Slot) { s.MemMB = 1001 }, want: api.DetailInsufficientMemory},
		{name: "gpu", slot: func(s *Slot) { s.GPUs = 3 }, want: api.DetailInsufficientGPU},
		{name: "cheap first: drained beats cpu", node: func(n *NodeState) { n.Usable = false; n.FreeCPUs = 0 }, want: api.DetailNodeDrained},
		{name: "tmp disk equal to --tmp fits", req: Request{TmpDiskMB: 4096}, want: ""},
		{name: "tmp disk below --tmp", req: Request{TmpDiskMB: 4097}, want: api.DetailInsufficientTmpDisk},
		{name: "tmp disk of a node not heard from fits any --tmp", req: Request{TmpDiskMB: 1 << 30},
			info: func(i *NodeInfo) { i.TmpDiskMB = TmpDiskUnknown }, want: ""},
		{name: "no --tmp fits a node without tmp disk", info: func(i *NodeInfo) { i.TmpDiskMB = 0 }, want: ""},
		{name: "static tmp disk beats cpu", req: Request{TmpDiskMB: 5000}, slot: func(s *Slot) { s.CPUs = 9 }, want: api.DetailInsufficientTmpDisk},
		{name: "overcommit: more tasks than cpus fit up to MaxTasksPerNode",
			slot: func(s *Slot) { s.Tasks, s.CPUs = api.OvercommitTasksPerNode, 1 }, want: ""},
		{name: "overcommit: past MaxTasksPerNode",
			slot: func(s *Slot) { s.Tasks, s.CPUs = api.OvercommitTasksPerNode+1, 1 }, want: api.DetailTooManyTasks},
		{name: "overcommit on a node of more cpus than MaxTasksPerNode: one task per cpu",
			info: func(i *NodeInfo) { i.CPUs = 1000 }, slot: func(s *Slot) { s.Tasks, s.CPUs = 1000, 1 }, want: ""},
	}
	c := newChain()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, s, r := base, slot, tt.req
			ni := *info
			n.Info = &ni
			if tt.info != nil {
				tt.info(&ni)
			}
			r.stamp, r.Excludes, r.AnyReserved = 1, true, true
			if tt.node != nil {
				tt.node(&n)
			}
			if tt.slot != nil {
				tt.slot(&s)
			}
			r.Slots = []Slot{s}
			c.prepare(&r)
			if got := c.check(&r, &s, &n); got != tt.want {
				t.Errorf("check = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestChainPrepare(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		want []string
	}{
		{
			name: "plain gpu job needs three checks",
			req:  Request{Slots: []Slot{{CPUs: 1, GPUs: 1}}},
			want: []string{"usable", "cpu", "gpu"},
		},
		{
			name: "everything relevant",
			req: Request{Slots: []Slot{{CPUs: 1, MemMB: 1, GPUs: 1}}, Excludes: true, OnlyRequired: true,
				GPUType: "a100", AnyReserved: true, Exclusive: true, TmpDiskMB: 1, Job: &api.Job{JobSpec: api.JobSpec{Constraint: "nvlink"}}},
			want: []string{"usable", "exclude", "requested", "gpu-model", "features", "tmp-disk", "reserved", "idle", "cpu", "memory", "gpu"},
		},
		{
			name: "largest slot decides",
			req:  Request{Slots: []Slot{{CPUs: 2, MemMB: 5, GPUs: 1}, {CPUs: 1}}},
			want: []string{"usable", "cpu", "memory", "gpu"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChain()
			c.prepare(&tt.req)
			var got []string
			for _, f := range c.active {
				got = append(got, f.Name())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("active filters (-want +got):\n%s", diff)
			}
		})
	}
}
