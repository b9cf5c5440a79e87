package salloc

import (
	"strings"
	"testing"

	"github.com/tide-hpc/tide/cli/sbatch/opts"
	"github.com/tide-hpc/tide/cli/srun"
	"github.com/tide-hpc/tide/ctld/api"
)

func TestAllocEnv(t *testing.T) {
	j := &api.Job{ID: 55, JobSpec: api.JobSpec{Name: "interactive", Partition: "gpu", Tasks: 6, CPUsPerTask: 2,
		SubmitDir: "/home/a", SubmitHost: "login1", Account: "physics", QOS: "high", GPUsPerNode: 2, GPUsPerTask: 1,
		GPUType: "h100", MemPerCPUMB: 4000, CPUsPerGPU: 3}, User: "alice", UserID: 1000, Cluster: "c1",
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
		{"SLURM_JOB_ACCOUNT", "physics"}, {"SLURM_JOB_QOS", "high"}, {"SLURM_GPUS_PER_NODE", "h100:2"},
		{"SLURM_GPUS_PER_TASK", "h100:1"}, {"SLURM_MEM_PER_CPU", "4000"}, {"SLURM_CPUS_PER_GPU", "3"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got[tt.key] != tt.want {
				t.Fatalf("%s = %q, want %q", tt.key, got[tt.key], tt.want)
			}
		})
	}
}

// TestAllocEnvOnlyGiven checks that the request's variables are absent
// for options not given.
func TestAllocEnvOnlyGiven(t *testing.T) {
	j := &api.Job{ID: 9, JobSpec: api.JobSpec{Name: "x"}, Alloc: []api.NodeAlloc{{Node: "n1", CPUs: 1, Tasks: 1}}}
	for _, kv := range AllocEnv(nil, j) {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK", "SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU",
			"SLURM_MEM_PER_GPU", "SLURM_JOB_QOS", "SLURM_JOB_ACCOUNT", "SLURM_CPUS_PER_TASK", "SLURM_NTASKS_PER_NODE":
			t.Errorf("%s set for a job that did not ask", kv)
		}
	}
}

// TestSallocEnvVars checks that salloc reads SALLOC_* into its options
// and leaves SBATCH_* and srun's own variables alone.
func TestSallocEnvVars(t *testing.T) {
	in := srun.ParseInput{Environ: []string{"SALLOC_PARTITION=gpu", "SALLOC_TIMELIMIT=30", "SBATCH_QOS=high",
		"SLURM_LABELIO=1", "SALLOC_GPUS_PER_NODE=2", "SALLOC_EXCLUSIVE="}, Cwd: "/w", EnvVars: sallocEnvVars}
	a, err := srun.ParseArgs([]string{"-t", "10", "bash"}, in)
	if err != nil {
		t.Fatal(err)
	}
	s := a.Spec
	if s.Partition != "gpu" || s.TimeLimit != 600 || s.QOS != "" || a.Label || s.GPUsPerNode != 2 || !s.Exclusive {
		t.Errorf("partition %q, time %d (the command line's 600), qos %q, label %v, gpus per node %d, exclusive %v",
			s.Partition, s.TimeLimit, s.QOS, a.Label, s.GPUsPerNode, s.Exclusive)
	}
}

// TestSallocEnvVarsKnown checks that every variable names an option
// salloc has.
func TestSallocEnvVarsKnown(t *testing.T) {
	for _, ev := range sallocEnvVars {
		if ev.Option != opts.EnvSwitchWait && !opts.HasOption(ev.Option) {
			t.Errorf("%s names --%s, which salloc does not have", ev.Name, ev.Option)
		}
	}
}
