package squeue

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
	"github.com/tide-hpc/tide/ctld/api"
)

// stepsAPI serves the canned cluster's step records besides its jobs.
type stepsAPI struct {
	*clitest.FakeAPI
	recs []api.StepRecord
	// asked records the job ids of each Steps call.
	asked [][]uint64
}

func (s *stepsAPI) Steps(_ context.Context, ids []uint64) ([]api.StepRecord, error) {
	s.asked = append(s.asked, ids)
	var out []api.StepRecord
	for _, r := range s.recs {
		for _, id := range ids {
			if r.JobID == id {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func at(h, m, s int) time.Time { return time.Date(2026, 11, 29, h, m, s, 0, time.UTC) }

// stepCluster is the canned cluster with a running array task (119_3,
// job 120) and steps: job 108 runs steps 0 (two nodes, GPUs) and 1 (a
// time limit) and ran step 2; job 109 runs step 0, and a step 5 left
// over from before a requeue; job 120 runs step 0; job 110 runs its
// batch script only; the COMPLETING job 107 has a step that must not
// show.
func stepCluster() *stepsAPI {
	fake := slurmfmttest.Cluster()
	task := fake.JobRecs[9] // 110's shape: one node of the debug partition
	task.ID, task.ArrayJobID, task.ArrayTaskID, task.Name = 120, 119, 3, "sweep"
	task.User, task.UserID, task.Partition = "bob", 1001, "gpu"
	task.StartTime = at(19, 0, 0)
	task.Alloc = []api.NodeAlloc{{Node: "gpu03", CPUs: 2, Tasks: 1}}
	fake.JobRecs = append(fake.JobRecs, task)
	return &stepsAPI{FakeAPI: fake, recs: []api.StepRecord{
		{JobID: 108, StepID: 0, Name: "torchrun", State: api.StateRunning, UserID: 1000, Start: at(18, 31, 20),
			Nodes: []string{"gpu01", "gpu02"}, NTasks: 8, CPUs: 64, GPUs: 8},
		{JobID: 108, StepID: 1, Name: "eval", State: api.StateRunning, UserID: 1000, Start: at(19, 30, 0),
			Nodes: []string{"gpu02"}, NTasks: 1, CPUs: 8, TimeLimit: 600},
		{JobID: 108, StepID: 2, Name: "warmup", State: api.StateCompleted, UserID: 1000, Start: at(18, 31, 18),
			End: at(18, 31, 19), Nodes: []string{"gpu01"}, NTasks: 1, CPUs: 1},
		{JobID: 109, StepID: 0, Name: "infer", State: api.StateRunning, UserID: 1001, Start: at(19, 26, 5),
			Nodes: []string{"gpu03"}, NTasks: 2, CPUs: 8, GPUs: 2},
		{JobID: 109, StepID: 5, Name: "stale", State: api.StateRunning, UserID: 1001, Start: at(19, 0, 0),
			Nodes: []string{"gpu03"}, NTasks: 1, CPUs: 1},
		{JobID: 120, StepID: 0, Name: "python3", State: api.StateRunning, UserID: 1001, Start: at(19, 0, 30),
			Nodes: []string{"gpu03"}, NTasks: 1, CPUs: 2},
		{JobID: 107, StepID: 0, Name: "wrap", State: api.StateRunning, UserID: 1000, Start: at(19, 20, 5),
			Nodes: []string{"gpu02"}, NTasks: 1, CPUs: 1},
	}}
}

func execSteps(t testing.TB, api cmdutil.API, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	f, bufs := clitest.Factory(nil, env)
	f.API = func() (cmdutil.API, error) { return api, nil }
	f.Now = func() time.Time { return slurmfmttest.Now }
	return clitest.Run(NewCmd(f), bufs, "squeue", append([]string{}, args...))
}

func TestStepsGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{name: "steps-default", args: []string{"-s"}},
		{name: "steps-list", args: []string{"--steps=108.1,119_3.0,109.batch"}},
		{name: "steps-list-operand", args: []string{"-s", "109.0"}},
		{name: "steps-jobs", args: []string{"-s", "-j108"}},
		{name: "steps-array-job", args: []string{"-s", "-j119"}},
		{name: "steps-user", args: []string{"-s", "-u", "bob"}},
		{name: "steps-partition", args: []string{"-s", "-p", "debug"}},
		{name: "steps-nodelist", args: []string{"-s", "-w", "gpu02"}},
		{name: "steps-name", args: []string{"-s", "-n", "eval,infer"}},
		{name: "steps-noheader", args: []string{"-s", "-h"}},
		{name: "steps-sort", args: []string{"-s", "-S", "-M"}},
		{name: "steps-long", args: []string{"-s", "-l"}},
		{name: "steps-o-all", args: []string{"-s", "-o", "%all"}},
		{name: "steps-o", args: []string{"-s", "-o", "%.10i %A %.6l %S %.20S %U %b|%5N|"}},
		{name: "steps-O", args: []string{"-s", "-O", "StepId:12,JobId:.5,ArrayJobId:5,ArrayTaskId:4,StepState:8,NumCPUs:4,NumTasks:3,tres-per-step:13,Cluster:6,CPUFreq:24,TimeLimit:.10,Nodes"}},
		{name: "steps-env-format", env: map[string]string{"SQUEUE_FORMAT": "%i %j", "SQUEUE_SORT": "-i"}, args: []string{"-s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := execSteps(t, stepCluster(), tt.env, tt.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("squeue %v: exit %d, stderr %q", tt.args, code, errOut)
			}
			golden(t, tt.name, out)
		})
	}
}

// TestStepsErrors checks squeue -s's mistakes, as Slurm words them.
func TestStepsErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "no step id", args: []string{"-s108"}, want: "squeue: error: Invalid job_step id: 108.??\n"},
		{name: "bad job", args: []string{"-sx.0"}, want: "squeue: error: Invalid job_step id: x.0\n"},
		{name: "jobs without list", args: []string{"-s", "-j"}, want: "squeue: error: Incompatible options --jobs and --steps\n"},
		{name: "job letter", args: []string{"-s", "-o", "%i %t"}, want: "squeue: error: Invalid job step format specification: t\n"},
		{name: "job name", args: []string{"-s", "-O", "StepId,Reason"}, want: "squeue: error: Invalid job step format specification: Reason\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := execSteps(t, stepCluster(), nil, tt.args...)
			if code != 1 || out != "" || errOut != tt.want {
				t.Errorf("squeue %v: exit %d, stdout %q, stderr %q; want exit 1, stderr %q", tt.args, code, out, errOut, tt.want)
			}
		})
	}
}

// TestStepsWithoutStepRecords lists the batch steps when the controller
// keeps no step records, and asks for those of running jobs only.
func TestStepsWithoutStepRecords(t *testing.T) {
	out, errOut, code := execSteps(t, slurmfmttest.Cluster(), nil, "-s", "-h", "-o", "%i")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if want := "110.batch\n108.batch\n109.batch\n"; out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
	sa := stepCluster()
	if _, _, code := execSteps(t, sa, nil, "-s"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if len(sa.asked) != 1 || slices.Contains(sa.asked[0], 107) || !slices.Contains(sa.asked[0], 120) {
		t.Errorf("Steps asked for %v, want one call for the running jobs only", sa.asked)
	}
}
