package scontrol

import (
	"context"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
)

// stepsAPI adds the controller's step records to the canned cluster.
type stepsAPI struct {
	*clitest.FakeAPI
	steps []api.StepRecord
}

func (s *stepsAPI) Steps(_ context.Context, ids []uint64) ([]api.StepRecord, error) {
	var out []api.StepRecord
	for _, r := range s.steps {
		for _, id := range ids {
			if r.JobID == id {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func stepsCluster(t *testing.T) *stepsAPI {
	t.Helper()
	fake := scontroltest.Cluster()
	var job *api.Job
	for i := range fake.JobRecs {
		if fake.JobRecs[i].ID == 101 {
			job = &fake.JobRecs[i]
		}
	}
	if job == nil || job.State != api.StateRunning {
		t.Fatal("canned job 101 is not running")
	}
	start := job.StartTime
	return &stepsAPI{FakeAPI: fake, steps: []api.StepRecord{
		{JobID: 101, StepID: 0, Name: "hostname", State: api.StateCompleted, Start: start.Add(time.Second),
			End: start.Add(2 * time.Second), Nodes: job.NodeNames(), NTasks: 2, CPUs: 2},
		{JobID: 101, StepID: 1, Name: "python", State: api.StateRunning, Start: start.Add(3 * time.Second),
			Nodes: job.NodeNames(), NTasks: 2, CPUs: 4, GPUs: 2},
	}}
}

func TestShowSteps(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		golden   string
		wantCode int
	}{
		{name: "all running steps", args: []string{"show", "steps"}, golden: "show-steps"},
		{name: "one job's steps, one line each", args: []string{"-o", "show", "step", "101"}, golden: "show-steps-o-job"},
		{name: "one step", args: []string{"show", "step", "101.1"}, golden: "show-step-one"},
		{name: "an ended step is not shown", args: []string{"show", "step", "101.0"}, golden: "show-step-ended", wantCode: 1},
		{name: "json", args: []string{"--json", "show", "steps", "101"}, golden: "json-show-steps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fixJSONCaller(t, append([]string{"scontrol"}, tt.args...)...)
			sa := stepsCluster(t)
			f, buf := clitest.Factory(sa.FakeAPI, nil)
			f.API = func() (cmdutil.API, error) { return sa, nil }
			out, errOut, code := clitest.Run(newCmd(f, time.UTC), buf, "scontrol", tt.args)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.wantCode, errOut)
			}
			golden(t, tt.golden, out)
		})
	}
}
