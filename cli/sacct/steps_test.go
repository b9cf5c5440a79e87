package sacct

import (
	"context"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
)

// stepAPI adds srun steps to the canned cluster.
type stepAPI struct {
	*clitest.FakeAPI
	steps []api.StepRecord
}

func (s *stepAPI) Steps(_ context.Context, ids []uint64) ([]api.StepRecord, error) {
	var out []api.StepRecord
	for _, st := range s.steps {
		for _, id := range ids {
			if st.JobID == id {
				out = append(out, st)
			}
		}
	}
	return out, nil
}

// TestStepRows checks N.batch, N.0, N.1 rows under a batch job and the
// rows of an allocation-only job, which has no batch step.
func TestStepRows(t *testing.T) {
	fake := scontroltest.Cluster()
	var base api.Job
	for _, j := range append(append([]api.Job{}, fake.Finished...), fake.JobRecs...) {
		if j.ID == 101 {
			base = j
		}
	}
	if base.ID == 0 || base.StartTime.IsZero() || len(base.Alloc) == 0 {
		t.Fatal("canned job 101 is not a started job")
	}
	alloc := base
	alloc.ID, alloc.Name, alloc.Allocation = 900, "interactive", true
	fake.Finished = append(fake.Finished, alloc)
	start := base.StartTime
	sa := &stepAPI{FakeAPI: fake, steps: []api.StepRecord{
		{JobID: 101, StepID: 0, Name: "hostname", State: api.StateCompleted, Start: start.Add(time.Second),
			End: start.Add(3 * time.Second), Nodes: base.NodeNames(), NTasks: 4, CPUs: 4},
		{JobID: 101, StepID: 1, Name: "python", State: api.StateFailed, Exit: api.ExitStatus{Code: 3},
			Start: start.Add(4 * time.Second), End: start.Add(64 * time.Second), Nodes: base.NodeNames()[:1], NTasks: 1, CPUs: 2, GPUs: 1},
		{JobID: 900, StepID: 0, Name: "bash", State: api.StateCancelled, Exit: api.ExitStatus{Signal: 9},
			Start: start, End: start.Add(10 * time.Second), Nodes: base.NodeNames()[:1], NTasks: 1, CPUs: 1},
	}}
	tests := []struct {
		name   string
		args   []string
		golden string
	}{
		{name: "job, batch and srun steps", args: []string{"-j", "101,900", "-o", "JobID,JobName,State,ExitCode,DerivedExitCode,Elapsed,NodeList,NTasks,AllocCPUS,AllocTRES%-30"}, golden: "steps"},
		{name: "one step by id", args: []string{"-j", "101.1", "-P", "-o", "JobID,JobName,State,ExitCode,NTasks"}, golden: "steps-one"},
		{name: "allocations only hide steps", args: []string{"-j", "101,900", "-X", "-P", "-o", "JobID,State"}, golden: "steps-X"},
		{name: "json lists the steps", args: []string{"-j", "900", "--json"}, golden: "steps-json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, buf := clitest.Factory(fake, nil)
			f.API = func() (cmdutil.API, error) { return sa, nil }
			f.UID = func() int { return 0 }
			out, errOut, code := clitest.Run(newCmd(f, time.UTC), buf, "sacct", tt.args)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, tt.golden, out)
		})
	}
}
