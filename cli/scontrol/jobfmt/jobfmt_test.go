package jobfmt

import (
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestMem(t *testing.T) {
	tests := []struct {
		name string
		mb   int64
		want string
	}{
		{name: "none", mb: 0, want: "0"},
		{name: "whole node marker", mb: api.MemWholeNode, want: "0"},
		{name: "not a power of two", mb: 16000, want: "16000M"},
		{name: "exact gigabytes", mb: 65536, want: "64G"},
		{name: "exact terabytes", mb: 2 * 1024 * 1024, want: "2T"},
		{name: "small", mb: 1, want: "1M"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Mem(tt.mb); got != tt.want {
				t.Errorf("Mem(%d) = %q, want %q", tt.mb, got, tt.want)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	tests := []struct {
		name       string
		secs       int64
		want, mins string
	}{
		{name: "unlimited", secs: api.Infinite, want: "UNLIMITED", mins: "UNLIMITED"},
		{name: "unset", secs: 0, want: "Partition_Limit", mins: "Partition_Limit"},
		{name: "minutes", secs: 90 * 60, want: "01:30:00", mins: "90"},
		{name: "days", secs: 2*86400 + 5, want: "2-00:00:05", mins: "2881"},
		{name: "seconds round up", secs: 5, want: "00:00:05", mins: "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Limit(tt.secs); got != tt.want {
				t.Errorf("Limit(%d) = %q, want %q", tt.secs, got, tt.want)
			}
			if got := LimitMinutes(tt.secs); got != tt.mins {
				t.Errorf("LimitMinutes(%d) = %q, want %q", tt.secs, got, tt.mins)
			}
		})
	}
}

func TestIdxRanges(t *testing.T) {
	tests := []struct {
		name string
		idx  []int
		want string
	}{
		{name: "none", idx: nil, want: "N/A"},
		{name: "one", idx: []int{3}, want: "3"},
		{name: "run", idx: []int{0, 1, 2}, want: "0-2"},
		{name: "unsorted with gap", idx: []int{5, 0, 1, 7, 6}, want: "0-1,5-7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IdxRanges(tt.idx); got != tt.want {
				t.Errorf("IdxRanges(%v) = %q, want %q", tt.idx, got, tt.want)
			}
		})
	}
}

func TestRequest(t *testing.T) {
	tests := []struct {
		name  string
		spec  api.JobSpec
		cpus  int
		memMB int64
	}{
		{name: "defaults", spec: api.JobSpec{}, cpus: 1, memMB: 0},
		{name: "tasks times cpus per task", spec: api.JobSpec{Tasks: 4, CPUsPerTask: 2}, cpus: 8},
		{name: "cpus per gpu wins when larger", spec: api.JobSpec{GPUs: 2, CPUsPerGPU: 8}, cpus: 16},
		{name: "mem per node over nodes", spec: api.JobSpec{Nodes: 2, MemPerNodeMB: 1000}, cpus: 2, memMB: 2000},
		{name: "mem per cpu", spec: api.JobSpec{Tasks: 2, CPUsPerTask: 3, MemPerCPUMB: 100}, cpus: 6, memMB: 600},
		{name: "mem per gpu", spec: api.JobSpec{GPUsPerNode: 2, Nodes: 2, MemPerGPUMB: 500}, cpus: 2, memMB: 2000},
		{name: "whole node memory is unknown before allocation", spec: api.JobSpec{MemPerNodeMB: api.MemWholeNode}, cpus: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &api.Job{JobSpec: tt.spec}
			if got := ReqCPUs(j); got != tt.cpus {
				t.Errorf("ReqCPUs = %d, want %d", got, tt.cpus)
			}
			if got := ReqMemMB(j); got != tt.memMB {
				t.Errorf("ReqMemMB = %d, want %d", got, tt.memMB)
			}
		})
	}
}

func TestStdPaths(t *testing.T) {
	running := []api.NodeAlloc{{Node: "gpu07", CPUs: 1}}
	tests := []struct {
		name                string
		job                 api.Job
		stdout, stderr, inp string
	}{
		{name: "defaults", job: api.Job{ID: 7, JobSpec: api.JobSpec{WorkDir: "/w"}},
			stdout: "/w/slurm-7.out", stderr: "/w/slurm-7.out", inp: "/dev/null"},
		{name: "patterns on a running job", job: api.Job{ID: 7, User: "ann", Alloc: running,
			JobSpec: api.JobSpec{Name: "x", WorkDir: "/w", Stdout: "%x-%j.out", Stderr: "/logs/%u/%N.err", Stdin: "in.txt"}},
			stdout: "/w/x-7.out", stderr: "/logs/ann/gpu07.err", inp: "/w/in.txt"},
		{name: "node pattern kept while pending", job: api.Job{ID: 8, JobSpec: api.JobSpec{WorkDir: "/w", Stdout: "o-%N.txt"}},
			stdout: "/w/o-%N.txt", stderr: "/w/o-%N.txt", inp: "/dev/null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, e, i := StdPaths(&tt.job)
			if o != tt.stdout || e != tt.stderr || i != tt.inp {
				t.Errorf("StdPaths = %q, %q, %q; want %q, %q, %q", o, e, i, tt.stdout, tt.stderr, tt.inp)
			}
		})
	}
}

func TestReasonAndTime(t *testing.T) {
	tests := []struct {
		name string
		job  api.Job
		want string
	}{
		{name: "running hides a stale reason", job: api.Job{State: api.StateRunning, Reason: api.ReasonResources}, want: "None"},
		{name: "pending", job: api.Job{State: api.StatePending, Reason: api.ReasonPriority}, want: "Priority"},
		{name: "unset", job: api.Job{State: api.StateCompleted}, want: "None"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Reason(&tt.job); got != tt.want {
				t.Errorf("Reason = %q, want %q", got, tt.want)
			}
		})
	}
	if got := Time(time.Time{}, time.UTC); got != "Unknown" {
		t.Errorf("Time(zero) = %q, want Unknown", got)
	}
	cet := time.FixedZone("CET", 3600)
	if got := Time(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), cet); got != "2026-01-02T04:04:05" {
		t.Errorf("Time in CET = %q", got)
	}
}
