package scancel

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
	"github.com/tide-hpc/tide/ctld/api"
)

// TestSignalTargets checks what -s, -b and -f ask the controller for and
// how -v words it, as Slurm's scancel: the controller sends a plain
// --signal to the job's steps, -b to the batch shell (SIGKILL without
// -s), -f to the batch shell and its children, -f winning over -b (both
// are passed on: -b keeps SIGKILL from cancelling).
func TestSignalTargets(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		want       api.CancelRequest
		wantErrOut string
	}{
		{name: "signal goes to the steps", args: []string{"-s", "USR2", "108"},
			want: api.CancelRequest{Filter: ids(108), Signal: 12}},
		{name: "signal verbose", args: []string{"-v", "--signal=USR2", "108"},
			want: api.CancelRequest{Filter: ids(108), Signal: 12}, wantErrOut: "scancel: Signal 12 to job 108\n"},
		{name: "batch alone sends SIGKILL to the shell", args: []string{"-v", "-b", "108"},
			want: api.CancelRequest{Filter: ids(108), Signal: 9, BatchOnly: true}, wantErrOut: "scancel: Terminating batch job 108\n"},
		{name: "batch with a signal", args: []string{"-v", "--batch", "-s", "USR1", "108"},
			want: api.CancelRequest{Filter: ids(108), Signal: 10, BatchOnly: true}, wantErrOut: "scancel: Signal 10 to batch job 108\n"},
		{name: "full alone cancels", args: []string{"-v", "-f", "108"},
			want: api.CancelRequest{Filter: ids(108), Full: true}, wantErrOut: "scancel: Terminating full job 108\n"},
		{name: "full with a signal", args: []string{"-v", "--full", "-s", "USR2", "108"},
			want: api.CancelRequest{Filter: ids(108), Signal: 12, Full: true}, wantErrOut: "scancel: Signal 12 to full job 108\n"},
		{name: "full wins over batch", args: []string{"-v", "-b", "-f", "-s", "TERM", "108"},
			want: api.CancelRequest{Filter: ids(108), Signal: 15, BatchOnly: true, Full: true}, wantErrOut: "scancel: Signal 15 to full job 108\n"},
		{name: "batch and full without a signal", args: []string{"-v", "-bf", "108"},
			want: api.CancelRequest{Filter: ids(108), Signal: 9, BatchOnly: true, Full: true}, wantErrOut: "scancel: Terminating full job 108\n"},
		{name: "bundled", args: []string{"-bv", "-s", "INT", "108"},
			want: api.CancelRequest{Filter: ids(108), Signal: 2, BatchOnly: true}, wantErrOut: "scancel: Signal 2 to batch job 108\n"},
		{name: "kill to the steps is a kill request", args: []string{"-s", "KILL", "108"},
			want: api.CancelRequest{Filter: ids(108), Signal: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := slurmfmttest.Cluster()
			_, errOut, err := exec(t, fake, "", tt.args...)
			if code := cmdutil.ExitCode(err); code != 0 {
				t.Fatalf("exit code %d (%v)", code, err)
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
