package salloc

import (
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestAllocEnv(t *testing.T) {
	j := &api.Job{ID: 55, JobSpec: api.JobSpec{Name: "interactive", Partition: "gpu", Tasks: 6, CPUsPerTask: 2,
		SubmitDir: "/home/a", SubmitHost: "login1"}, User: "alice", UserID: 1000, Cluster: "c1",
		Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 8, Tasks: 4}, {Node: "gpu02", CPUs: 4, Tasks: 2}}}
	env := AllocEnv([]string{"HOME=/home/a", "SLURM_JOB_ID=1", "TIDE_JOB_ID=1", "TERM=xterm"}, j)
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("%s set twice", k)
		}
		got[k] = v
	}
	tests := []struct{ key, want string }{
		{"HOME", "/home/a"}, {"TERM", "xterm"}, {"SLURM_JOB_ID", "55"}, {"SLURM_JOBID", "55"}, {"TIDE_JOB_ID", "55"},
		{"SLURM_JOB_NODELIST", "gpu[01-02]"}, {"SLURM_NNODES", "2"}, {"SLURM_NTASKS", "6"},
		{"SLURM_JOB_CPUS_PER_NODE", "8,4"}, {"SLURM_TASKS_PER_NODE", "4,2"}, {"SLURM_CPUS_PER_TASK", "2"},
		{"SLURM_JOB_PARTITION", "gpu"}, {"SLURM_CLUSTER_NAME", "c1"}, {"SLURM_SUBMIT_HOST", "login1"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got[tt.key] != tt.want {
				t.Fatalf("%s = %q, want %q", tt.key, got[tt.key], tt.want)
			}
		})
	}
}

func TestCounts(t *testing.T) {
	tests := []struct {
		name string
		in   []int
		want string
	}{
		{name: "runs", in: []int{4, 4, 2}, want: "4(x2),2"},
		{name: "single", in: []int{1}, want: "1"},
		{name: "empty", in: nil, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := counts(tt.in); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}
