package scancel

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
	"github.com/tide-hpc/tide/ctld/api"
)

// TestCancelSteps checks scancel J.S: the step goes to the controller as
// a step, apart from the jobs, and -v and errors name it as Slurm's
// scancel does.
func TestCancelSteps(t *testing.T) {
	step := func(j uint64, s uint32) api.StepRef { return api.StepRef{JobID: j, StepID: s} }
	tests := []struct {
		name       string
		args       []string
		resp       *api.CancelResponse
		want       api.CancelRequest
		wantErrOut string
		wantCode   int
	}{
		{name: "one step", args: []string{"108.0"},
			resp: &api.CancelResponse{Results: []api.JobResult{{JobID: 108, ID: "108.0"}}},
			want: api.CancelRequest{Steps: []api.StepRef{step(108, 0)}}},
		{name: "verbose cancel", args: []string{"-v", "108.2"},
			resp: &api.CancelResponse{Results: []api.JobResult{{JobID: 108, ID: "108.2"}}},
			want: api.CancelRequest{Steps: []api.StepRef{step(108, 2)}}, wantErrOut: "scancel: Terminating step 108.2\n"},
		{name: "verbose signal", args: []string{"-v", "-s", "USR1", "108.0"},
			resp: &api.CancelResponse{Results: []api.JobResult{{JobID: 108, ID: "108.0"}}},
			want: api.CancelRequest{Signal: 10, Steps: []api.StepRef{step(108, 0)}}, wantErrOut: "scancel: Signal 10 to step 108.0\n"},
		{name: "a job and a step", args: []string{"-v", "109,108.1"},
			resp:       &api.CancelResponse{Results: []api.JobResult{{JobID: 108, ID: "108.1"}, {JobID: 109}}},
			want:       api.CancelRequest{Filter: ids(109), Steps: []api.StepRef{step(108, 1)}},
			wantErrOut: "scancel: Terminating job 109\nscancel: Terminating step 108.1\n"},
		{name: "unknown step", args: []string{"108.9"},
			resp:       &api.CancelResponse{Results: []api.JobResult{{JobID: 108, ID: "108.9", Error: "Invalid job step id specified"}}},
			want:       api.CancelRequest{Steps: []api.StepRef{step(108, 9)}},
			wantErrOut: "scancel: error: Kill job error on job step id 108.9: Invalid job step id specified\n", wantCode: 1},
		{name: "a step the controller did not answer for", args: []string{"108.3"},
			resp:       &api.CancelResponse{},
			want:       api.CancelRequest{Steps: []api.StepRef{step(108, 3)}},
			wantErrOut: "scancel: error: Kill job error on job step id 108.3: Invalid job id specified\n", wantCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := slurmfmttest.Cluster()
			fake.CancelResp = tt.resp
			_, errOut, err := exec(t, fake, "", tt.args...)
			if code := cmdutil.ExitCode(err); code != tt.wantCode {
				t.Fatalf("exit code %d, want %d (%v); stderr %q", code, tt.wantCode, err, errOut)
			}
			if diff := cmp.Diff([]api.CancelRequest{tt.want}, fake.Cancels); diff != "" {
				t.Errorf("cancel requests (-want +got):\n%s", diff)
			}
			if errOut != tt.wantErrOut {
				t.Errorf("stderr = %q, want %q", errOut, tt.wantErrOut)
			}
		})
	}
}

// TestCancelBadStepID checks that a step id that is not J.S is refused
// before anything is sent.
func TestCancelBadStepID(t *testing.T) {
	for _, arg := range []string{"108.x", "108.", ".1", "108.1.2"} {
		t.Run(arg, func(t *testing.T) {
			fake := slurmfmttest.Cluster()
			_, _, err := exec(t, fake, "", arg)
			if cmdutil.ExitCode(err) == 0 || len(fake.Cancels) != 0 {
				t.Fatalf("scancel %s: %v, sent %+v", arg, err, fake.Cancels)
			}
		})
	}
}
