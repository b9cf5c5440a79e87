package srun

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/sbatch/opts"
	"github.com/tide-hpc/tide/ctld/api"
)

// TestSrunEnvInput checks srun's input variables: each sets its option,
// the command line wins, and the rules for what srun inherits from its
// job.
func TestSrunEnvInput(t *testing.T) {
	inJob := []string{"SLURM_JOB_ID=31", "SLURM_JOB_NUM_NODES=2", "SLURM_NNODES=2", "SLURM_JOB_NAME=train.sh"}
	type got struct {
		Nodes, Tasks, PerNode, CPUs, GPUsT int
		Label, Kill, Unbuf                 bool
		Name, Out, Partition               string
		TimeLimit                          int64
	}
	tests := []struct {
		name    string
		env     []string
		args    []string
		want    got
		wantErr string
	}{
		{name: "SLURM_NPROCS", env: []string{"SLURM_NPROCS=5"}, want: got{Tasks: 5}},
		{name: "SLURM_NTASKS wins over SLURM_NPROCS", env: []string{"SLURM_NTASKS=4", "SLURM_NPROCS=5"}, want: got{Tasks: 4}},
		{name: "the command line wins", env: []string{"SLURM_NTASKS=4"}, args: []string{"-n2"}, want: got{Tasks: 2}},
		{name: "the job's node count inside it is all nodes", env: append([]string{"SLURM_NTASKS=8"}, inJob...),
			want: got{Tasks: 8}},
		{name: "a node count outside an allocation", env: []string{"SLURM_JOB_NUM_NODES=2"}, want: got{Nodes: 2}},
		{name: "SLURM_NNODES alone", env: []string{"SLURM_NNODES=1"}, want: got{Nodes: 1}},
		{name: "-N on the command line stays", env: inJob, args: []string{"-N2"}, want: got{Nodes: 2}},
		{name: "inherited gpus per task without a task count", env: append([]string{"SLURM_GPUS_PER_TASK=h100:1"}, inJob...),
			want: got{GPUsT: 1}},
		{name: "gpus per task on the command line wins", env: []string{"SLURM_GPUS_PER_TASK=1", "SLURM_NTASKS=4"},
			args: []string{"--gpus-per-task=2"}, want: got{Tasks: 4, GPUsT: 2}},
		{name: "the job's name does not name the step", env: inJob, want: got{}},
		{name: "SLURM_JOB_NAME outside an allocation", env: []string{"SLURM_JOB_NAME=sweep"}, want: got{Name: "sweep"}},
		{name: "srun's own flags", env: []string{"SLURM_LABELIO=1", "SLURM_UNBUFFEREDIO=", "SLURM_KILL_BAD_EXIT=1"},
			want: got{Label: true, Unbuf: true, Kill: true}},
		{name: "a flag read as off", env: []string{"SLURM_LABELIO=0", "SLURM_KILL_BAD_EXIT=0"}, want: got{}},
		{name: "SRUN_CPUS_PER_TASK, not the job's SLURM_CPUS_PER_TASK", env: []string{"SRUN_CPUS_PER_TASK=3", "SLURM_CPUS_PER_TASK=9"},
			want: got{CPUs: 3}},
		{name: "the job's SLURM_CPUS_PER_TASK is not read", env: []string{"SLURM_CPUS_PER_TASK=9"}, want: got{}},
		{name: "tasks per node", env: []string{"SLURM_NTASKS_PER_NODE=4"}, want: got{PerNode: 4}},
		{name: "output, partition and time", env: []string{"SLURM_STDOUTMODE=out-%t", "SLURM_PARTITION=gpu", "SLURM_TIMELIMIT=5"},
			want: got{Out: "out-%t", Partition: "gpu", TimeLimit: 300}},
		{name: "sbatch's variables are not srun's", env: []string{"SBATCH_PARTITION=gpu", "SBATCH_TIMELIMIT=5"}, want: got{}},
		{name: "bad value", env: []string{"SLURM_NTASKS=many"}, wantErr: "(from SLURM_NTASKS=many)"},
		{name: "bad inherited gpus per task", env: []string{"SLURM_GPUS_PER_TASK=x"}, wantErr: "Invalid --gpus-per-task specification (from SLURM_GPUS_PER_TASK=x)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string{"HOME=/h"}, tt.env...)
			in := ParseInput{Environ: env, Cwd: "/work", EnvVars: SrunEnvVars(env)}
			a, err := ParseArgs(append(tt.args, "true"), in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := a.Spec
			want := tt.want
			if want.Name == "" {
				want.Name = "true"
			}
			g := got{Nodes: s.Nodes, Tasks: s.Tasks, PerNode: s.TasksPerNode, CPUs: s.CPUsPerTask, GPUsT: s.GPUsPerTask,
				Label: a.Label, Kill: a.KillBadEx, Unbuf: a.Unbuffered, Name: s.Name, Out: s.Stdout, Partition: s.Partition,
				TimeLimit: s.TimeLimit}
			if diff := cmp.Diff(want, g); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestSrunEnvExport checks SLURM_EXPORT_ENV, which a job submitted with
// --export=NONE hands its sruns, and SRUN_EXPORT_ENV, which wins.
func TestSrunEnvExport(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{name: "inherited NONE", env: []string{"HOME=/h", "SLURM_EXPORT_ENV=NONE", "SLURM_JOB_ID=3"},
			want: []string{"SLURM_EXPORT_ENV=NONE", "SLURM_JOB_ID=3"}},
		{name: "SRUN_EXPORT_ENV wins", env: []string{"HOME=/h", "SLURM_EXPORT_ENV=NONE", "SRUN_EXPORT_ENV=ALL"},
			want: []string{"HOME=/h", "SLURM_EXPORT_ENV=NONE", "SRUN_EXPORT_ENV=ALL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ParseArgs([]string{"true"}, ParseInput{Environ: tt.env, Cwd: "/w", EnvVars: SrunEnvVars(tt.env)})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, a.Spec.Environment); diff != "" {
				t.Errorf("environment (-want +got):\n%s", diff)
			}
		})
	}
}

// slurmSrunEnv is every variable of man srun's INPUT ENVIRONMENT
// VARIABLES (Slurm 22.05) whose option Tide's srun has.
var slurmSrunEnv = []string{"SLURM_ACCOUNT", "SLURM_ACCTG_FREQ", "SLURM_BURST_BUFFER", "SLURM_CLUSTERS",
	"SLURM_CONSTRAINT", "SLURM_CORE_SPEC", "SRUN_CPUS_PER_TASK", "SLURM_CPU_FREQ_REQ", "SLURM_CPUS_PER_GPU",
	"SLURM_DEBUG", "SLURM_DELAY_BOOT", "SLURM_DEPENDENCY", "SLURM_DISABLE_STATUS", "SLURM_DISTRIBUTION",
	"SLURM_EXCLUSIVE", "SLURM_EXPORT_ENV", "SLURM_GPU_BIND", "SLURM_GPU_FREQ", "SLURM_GPUS", "SLURM_GPUS_PER_NODE",
	"SLURM_GPUS_PER_TASK", "SLURM_GRES", "SLURM_GRES_FLAGS", "SLURM_HINT", "SLURM_JOB_NAME", "SLURM_JOB_NUM_NODES",
	"SLURM_KILL_BAD_EXIT", "SLURM_LABELIO", "SLURM_MEM_BIND", "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU",
	"SLURM_MEM_PER_NODE", "SLURM_NETWORK", "SLURM_NNODES", "SLURM_NO_KILL", "SLURM_NPROCS", "SLURM_NTASKS",
	"SLURM_NTASKS_PER_CORE", "SLURM_NTASKS_PER_GPU", "SLURM_NTASKS_PER_NODE", "SLURM_NTASKS_PER_SOCKET",
	"SLURM_OPEN_MODE", "SLURM_OVERCOMMIT", "SLURM_PARTITION", "SLURM_POWER", "SLURM_PROFILE", "SLURM_QOS",
	"SLURM_REMOTE_CWD", "SLURM_REQ_SWITCH", "SLURM_RESERVATION", "SLURM_SIGNAL", "SLURM_SPREAD_JOB",
	"SLURM_STDERRMODE", "SLURM_STDINMODE", "SLURM_STDOUTMODE", "SLURM_THREAD_SPEC", "SLURM_THREADS_PER_CORE",
	"SLURM_TIMELIMIT", "SLURM_UNBUFFEREDIO", "SLURM_USE_MIN_NODES", "SLURM_WAIT4SWITCH", "SLURM_WCKEY",
	"SLURM_WORKING_DIR", "SRUN_CONTAINER", "SRUN_EXPORT_ENV"}

// TestSrunEnvVarsCoverSlurm checks that srun reads each of them into an
// option it has.
func TestSrunEnvVarsCoverSlurm(t *testing.T) {
	vars := srunEnvVars(false)
	for _, k := range slurmSrunEnv {
		i := slices.IndexFunc(vars, func(v opts.EnvVar) bool { return v.Name == k })
		if i < 0 {
			t.Errorf("%s is not read", k)
			continue
		}
		o := vars[i].Option
		if o == opts.EnvSwitchWait {
			continue
		}
		if findOwn(o) == nil && !opts.HasOption(o) {
			t.Errorf("%s names --%s, which srun does not have", k, o)
		}
	}
	for _, v := range vars {
		if v.Option != opts.EnvSwitchWait && findOwn(v.Option) == nil && !opts.HasOption(v.Option) {
			t.Errorf("%s names --%s, which srun does not have", v.Name, v.Option)
		}
	}
	if slices.ContainsFunc(srunEnvVars(true), func(v opts.EnvVar) bool { return v.Name == "SLURM_JOB_NAME" }) {
		t.Error("SLURM_JOB_NAME is read inside an allocation")
	}
}

func TestStepEnvironment(t *testing.T) {
	a := &Args{Spec: api.JobSpec{Environment: []string{"HOME=/h", "SLURM_UMASK=0077"}, CPUsPerTask: 2, TasksPerNode: 4}}
	got := StepEnvironment(a, &opts.Submitter{Umask: 0o022, Nice: 5})
	want := []string{"HOME=/h", "SLURM_UMASK=0077", "SLURM_PRIO_PROCESS=5", "SLURM_CPUS_PER_TASK=2", "SLURM_NTASKS_PER_NODE=4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	a = &Args{Spec: api.JobSpec{Environment: []string{"HOME=/h"}}}
	got = StepEnvironment(a, &opts.Submitter{Umask: 0o027})
	want = []string{"HOME=/h", "SLURM_UMASK=0027", "SLURM_PRIO_PROCESS=0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := StepEnvironment(a, nil); !slices.Equal(got, []string{"HOME=/h"}) {
		t.Errorf("without a submitter: %v", got)
	}
	a = &Args{Spec: api.JobSpec{Environment: []string{"HOME=/h"}}, Overcommit: true}
	if got := StepEnvironment(a, nil); !slices.Equal(got, []string{"HOME=/h", "SLURM_OVERCOMMIT=1"}) {
		t.Errorf("-O: %v", got)
	}
}

// TestWithJobEnv checks the variables srun sets for an allocation of its
// own: the caller's stale values go, twins follow.
func TestWithJobEnv(t *testing.T) {
	j := &api.Job{ID: 8, JobSpec: api.JobSpec{Name: "x", Partition: "gpu", GPUs: 2, MemPerNodeMB: api.MemWholeNode},
		User: "alice", UserID: 1000, Cluster: "c1",
		Alloc: []api.NodeAlloc{{Node: "gpu01", CPUs: 4, MemoryMB: 1000, Tasks: 1, GPUs: []int{0, 1}}}}
	env := WithJobEnv([]string{"HOME=/h", "SLURM_JOB_ID=1", "TIDE_JOB_ID=1"}, j)
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			t.Errorf("%s set twice", k)
		}
		m[k] = v
	}
	for k, v := range map[string]string{"HOME": "/h", "SLURM_JOB_ID": "8", "TIDE_JOB_ID": "8", "SLURM_GPUS": "2",
		"TIDE_GPUS": "2", "SLURM_MEM_PER_NODE": "1000", "SLURM_JOB_CPUS_PER_NODE": "4", "SLURM_CLUSTER_NAME": "c1"} {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
	if v, ok := m["SLURM_OVERCOMMIT"]; ok {
		t.Errorf("SLURM_OVERCOMMIT = %q without --overcommit", v)
	}
	j.Overcommit = true
	if env := WithJobEnv(nil, j); !slices.Contains(env, "SLURM_OVERCOMMIT=1") || !slices.Contains(env, "TIDE_OVERCOMMIT=1") {
		t.Errorf("--overcommit: %v lacks SLURM_OVERCOMMIT=1 and its twin", env)
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
