package ctld

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/gres"
)

const gib = 1024

// gpu80 is an 80 GB GPU at the default watermark (76 GB) with the given
// slices and per-job use: each job gets one process, pid = 1000 + job.
func gpu80(used int64, sl []reclaimSlice, use map[uint64]int64) reclaimGPU {
	g := reclaimGPU{Node: "n1", Index: 0, MemoryMB: 80 * gib, UsedMB: used, Watermark: 0.95, Slices: sl,
		ProcJobs: map[int]uint64{}}
	for id, mb := range use {
		pid := 1000 + int(id)
		g.Procs = append(g.Procs, gres.ProcUsage{PID: pid, MemMB: mb})
		g.ProcJobs[pid] = id
	}
	return g
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// slice is a running, preemptible slice of mem MB started min minutes
// after t0.
func slice(id uint64, mem int64, prio uint32, min int) reclaimSlice {
	return reclaimSlice{JobID: id, MemMB: mem, Priority: prio, Start: t0.Add(time.Duration(min) * time.Minute),
		Preemptible: true, MaxGrowMB: math.MaxInt64}
}

// ten8G is ten 8 GB slices filling an 80 GB GPU, all at priority 50
// except job 2 (priority 10, started first) and job 3 (priority 10,
// newer).
func ten8G() []reclaimSlice {
	var out []reclaimSlice
	for id := uint64(1); id <= 10; id++ {
		prio := uint32(50)
		if id == 2 || id == 3 {
			prio = 10
		}
		out = append(out, slice(id, 8*gib, prio, int(id)))
	}
	return out
}

// uses gives every job of ids the same use.
func uses(mb int64, ids ...uint64) map[uint64]int64 {
	m := map[uint64]int64{}
	for _, id := range ids {
		m[id] = mb
	}
	return m
}

func with(m map[uint64]int64, id uint64, mb int64) map[uint64]int64 {
	m[id] = mb
	return m
}

func TestPlanReclaim(t *testing.T) {
	allTen := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		name string
		gpu  reclaimGPU
		// want lists "kind:job[:MB]" in order.
		want []string
	}{
		{name: "under-watermark", gpu: gpu80(70*gib, ten8G(), uses(7*gib, allTen...)), want: nil},
		{name: "full-within-promises", gpu: gpu80(78*gib, ten8G(), uses(7*gib+800, allTen...)), want: nil},
		{name: "grow-largest-overrun-first",
			gpu: gpu80(78*gib, []reclaimSlice{slice(1, 8*gib, 50, 0), slice(2, 8*gib, 50, 1), slice(3, 16*gib, 50, 2)},
				map[uint64]int64{1: 50 * gib, 2: 8 * gib, 3: 20 * gib}),
			want: []string{"grow:1:51200", "grow:3:20480"}},
		{name: "grow-rounds-up-to-GiB",
			gpu:  gpu80(77*gib, []reclaimSlice{slice(1, 8*gib, 50, 0), slice(2, 8*gib, 50, 1)}, map[uint64]int64{1: 69*gib + 100, 2: 7 * gib}),
			want: []string{"grow:1:71680"}},
		{name: "grow-exact-when-rounding-does-not-fit",
			gpu: gpu80(71*gib+100+8*gib, []reclaimSlice{slice(1, 8*gib, 50, 0), slice(2, 8*gib+512, 50, 1)},
				map[uint64]int64{1: 71*gib + 100, 2: 8 * gib}),
			want: []string{"grow:1:72804"}},
		{name: "single-slice-without-pid-map-is-charged-everything",
			gpu:  reclaimGPU{Node: "n1", MemoryMB: 80 * gib, UsedMB: 77 * gib, Watermark: 0.95, Slices: []reclaimSlice{slice(7, 8*gib, 50, 0)}},
			want: []string{"grow:7:78848"}},
		{name: "no-room-preempts-lowest-priority-newest-first",
			gpu:  gpu80(80*gib-512, ten8G(), with(uses(7*gib+512, allTen...), 1, 12*gib)),
			want: []string{"preempt:3"}},
		{name: "preempting-frees-commitment-for-the-overrun",
			gpu: gpu80(80*gib-100, []reclaimSlice{slice(1, 40*gib, 50, 0), slice(2, 20*gib, 10, 1), slice(3, 20*gib, 10, 2)},
				map[uint64]int64{1: 60 * gib, 2: 2 * gib, 3: 2 * gib}),
			// Use stays over the watermark, but once job 3 is gone job
			// 1's 20G overrun fits in what it committed: the next
			// heartbeat grows job 1 instead of preempting more.
			want: []string{"preempt:3"}},
		{name: "keeps-preempting-until-the-overrun-fits",
			gpu: gpu80(80*gib-100, []reclaimSlice{slice(1, 40*gib, 50, 0), slice(2, 20*gib, 10, 1), slice(3, 20*gib, 10, 2)},
				map[uint64]int64{1: 70 * gib, 2: 2 * gib, 3: 2 * gib}),
			want: []string{"preempt:3", "preempt:2"}},
		{name: "overrunner-preempted-when-lowest",
			gpu:  gpu80(80*gib-512, ten8G(), with(uses(7*gib+512, allTen...), 3, 12*gib)),
			want: []string{"preempt:3"}},
		{name: "leaving-slice-already-frees-enough",
			gpu: func() reclaimGPU {
				g := gpu80(80*gib-512, ten8G(), with(uses(7*gib+512, allTen...), 1, 12*gib))
				g.Slices[9].Leaving = true
				return g
			}(),
			want: nil},
		{name: "oversubscribed-within-slices",
			gpu: func() reclaimGPU {
				var sl []reclaimSlice
				for id := uint64(1); id <= 12; id++ {
					sl = append(sl, slice(id, 8*gib, 50, int(id)))
				}
				return gpu80(78*gib, sl, uses(6*gib+512, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12))
			}(),
			want: []string{"preempt:12"}},
		{name: "unattributed-overrun-preempts",
			gpu:  reclaimGPU{Node: "n1", MemoryMB: 80 * gib, UsedMB: 78 * gib, Watermark: 0.95, Slices: []reclaimSlice{slice(1, 8*gib, 50, 0), slice(2, 8*gib, 40, 1)}},
			want: []string{"preempt:2"}},
		{name: "unknown-victim-ends-the-round",
			gpu: reclaimGPU{Node: "n1", MemoryMB: 80 * gib, UsedMB: 79 * gib, Watermark: 0.95,
				Slices: []reclaimSlice{slice(1, gib, 50, 0), slice(2, gib, 50, 1), slice(3, gib, 50, 2)}},
			// Job 3 frees 1G as far as anyone knows: the next reading,
			// after it is gone, decides whether more must go.
			want: []string{"preempt:3"}},
		{name: "unknown-process-memory-is-not-attributed",
			gpu: reclaimGPU{Node: "n1", MemoryMB: 80 * gib, UsedMB: 78 * gib, Watermark: 0.95,
				Slices:   []reclaimSlice{slice(1, 8*gib, 50, 0), slice(2, 8*gib, 40, 1)},
				Procs:    []gres.ProcUsage{{PID: 5, MemMB: -1}, {PID: 6, MemMB: 8 * gib}},
				ProcJobs: map[int]uint64{5: 1, 6: 2}},
			want: []string{"preempt:2"}},
		{name: "other-gpus-of-the-slice-have-no-room",
			gpu: func() reclaimGPU {
				g := gpu80(77*gib, []reclaimSlice{slice(1, 8*gib, 50, 0), slice(2, 8*gib, 10, 1)}, map[uint64]int64{1: 69 * gib, 2: 7 * gib})
				g.Slices[0].MaxGrowMB = 0
				return g
			}(),
			want: []string{"preempt:2"}},
		{name: "nothing-preemptible-is-stuck",
			gpu: func() reclaimGPU {
				g := gpu80(80*gib-512, ten8G(), with(uses(7*gib+512, allTen...), 1, 12*gib))
				for i := range g.Slices {
					g.Slices[i].Preemptible = false
				}
				return g
			}(),
			want: []string{"stuck:1"}},
		{name: "lower-watermark-acts-earlier",
			gpu: func() reclaimGPU {
				g := gpu80(70*gib, ten8G(), with(uses(6*gib+512, allTen...), 1, 11*gib+512))
				g.Watermark = 0.8
				return g
			}(),
			want: []string{"preempt:3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acts := planReclaim(tt.gpu)
			var got []string
			for _, a := range acts {
				s := fmt.Sprintf("%s:%d", a.Kind, a.JobID)
				if a.Kind == reclaimGrow {
					s += fmt.Sprintf(":%d", a.MemMB)
				}
				got = append(got, s)
				if !strings.HasPrefix(a.Msg, "GPU 0 on n1: ") {
					t.Errorf("message %q does not say which GPU", a.Msg)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanReclaimDoesNotModifyInput(t *testing.T) {
	g := gpu80(78*gib, []reclaimSlice{slice(1, 8*gib, 50, 0), slice(2, 8*gib, 50, 1)}, map[uint64]int64{1: 70 * gib, 2: 8 * gib})
	before := fmt.Sprint(g.Slices)
	if acts := planReclaim(g); len(acts) != 1 || acts[0].Kind != reclaimGrow {
		t.Fatalf("actions %+v, want one grow", acts)
	}
	if after := fmt.Sprint(g.Slices); after != before {
		t.Errorf("input slices changed: %s -> %s", before, after)
	}
}

// gauges reads the controller's gauges by name.
func gauges(t *testing.T, h *harness) map[string]float64 {
	t.Helper()
	mfs, err := h.s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if m := mf.GetMetric(); len(m) == 1 && m[0].GetGauge() != nil {
			out[mf.GetName()] = m[0].GetGauge().GetValue()
		}
	}
	return out
}

func TestGPUMetrics(t *testing.T) {
	tests := []struct {
		name string
		// pending are submitted after the running jobs start and stay
		// pending (no pass runs).
		pending  []api.JobSpec
		stranded float64
	}{
		{name: "no-pending-gpu-job", pending: []api.JobSpec{{CPUsPerTask: 1}}, stranded: 0},
		{name: "four-per-node-fits-nowhere", pending: []api.JobSpec{{GPUsPerNode: 4}}, stranded: 5},
		{name: "two-fit-everywhere", pending: []api.JobSpec{{GPUsPerNode: 4}, {GPUs: 2}}, stranded: 0},
		{name: "three-fit-gpu01-only", pending: []api.JobSpec{{GPUs: 3}}, stranded: 2},
		{name: "slice-fits-the-shared-gpu", pending: []api.JobSpec{{GPUMemMB: 8 * 1024}}, stranded: 0},
		{name: "held-jobs-do-not-count", pending: []api.JobSpec{{GPUs: 2, Hold: true}}, stranded: 0},
		{name: "too-many-cpus", pending: []api.JobSpec{{GPUs: 1, CPUsPerTask: 64}}, stranded: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.registerBig("gpu01")
			h.registerBig("gpu02")
			h.submit(api.JobSpec{GPUs: 4, NodeList: []string{"gpu01"}})
			for range 3 {
				h.submit(api.JobSpec{GPUMemMB: 8 * 1024, NodeList: []string{"gpu01"}})
			}
			h.submit(api.JobSpec{GPUs: 6, NodeList: []string{"gpu02"}})
			h.s.schedulePass()
			for _, spec := range tt.pending {
				h.submit(spec)
			}
			got := gauges(t, h)
			want := map[string]float64{
				"tide_gpus": 16, "tide_gpus_allocated": 11, "tide_gpus_allocated_whole": 10, "tide_gpus_shared": 1,
				"tide_gpu_mem_committed_bytes": 24 << 30, "tide_gpu_mem_shared_bytes": 80 << 30,
				"tide_gpus_stranded": tt.stranded,
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %g, want %g", k, got[k], v)
				}
			}
		})
	}
}
