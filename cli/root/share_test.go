package root

import (
	"slices"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
)

// TestSharingCommandsDispatch checks that the sharing commands are
// reachable under every name: the sprio link, tide prio, tide queues
// and tide checkpoint-done.
func TestSharingCommandsDispatch(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		code    int
		wantOut string
		wantErr string
	}{
		{name: "sprio link", args: []string{"/usr/bin/sprio", "-j", "211"}, wantOut: "            211 gpu       moba"},
		{name: "tide prio", args: []string{"tide", "prio", "211"}, wantOut: "AGED_LEVEL"},
		{name: "tide sprio", args: []string{"tide", "sprio", "-h", "211"}, wantOut: "            211 gpu"},
		{name: "tide queues", args: []string{"tide", "queues", "--qos"}, wantOut: "training"},
		{name: "checkpoint-done in a job", args: []string{"tide", "checkpoint-done", "-v"}, env: map[string]string{"SLURM_JOB_ID": "201"},
			wantOut: "job 201: checkpoint acknowledged\n"},
		{name: "checkpoint-done outside a job", args: []string{"tide", "checkpoint-done"}, code: 2,
			wantErr: "checkpoint-done: error: not inside a job (SLURM_JOB_ID is not set)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, bufs := clitest.Factory(clitest.SharingCluster(), tt.env)
			code := Main(tt.args, f)
			if code != tt.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.code, bufs.Err.String())
			}
			if !strings.Contains(bufs.Out.String(), tt.wantOut) {
				t.Errorf("stdout %q does not contain %q", bufs.Out.String(), tt.wantOut)
			}
			if !strings.Contains(bufs.Err.String(), tt.wantErr) || (tt.wantErr == "" && bufs.Err.Len() > 0) {
				t.Errorf("stderr %q, want it to contain %q", bufs.Err.String(), tt.wantErr)
			}
		})
	}
	if !slices.Contains(SlurmNames(), "sprio") {
		t.Errorf("SlurmNames() = %v: sprio is not linked", SlurmNames())
	}
}
