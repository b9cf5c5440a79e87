package root

import (
	"strings"
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
)

// TestSlurmCommandsHaveNoCompletionCommand checks that cobra's
// completion commands do not shadow the Slurm commands' operands, as
// Slurm's commands have none, while tide keeps its own.
func TestSlurmCommandsHaveNoCompletionCommand(t *testing.T) {
	tests := []struct {
		args    []string
		code    int
		wantOut string
		wantErr string
	}{
		{args: []string{"sbatch", "completion", "bash"}, code: 1, wantErr: "sbatch: error: Unable to open file completion"},
		{args: []string{"sbatch", "__complete", "--wr"}, code: 1, wantErr: "sbatch: error: Unable to open file __complete"},
		{args: []string{"tide", "batch", "completion"}, code: 1, wantErr: "sbatch: error: Unable to open file completion"},
		{args: []string{"squeue", "completion", "bash"}, code: 1, wantErr: "Unrecognized option: completion"},
		{args: []string{"tide", "completion", "bash"}, wantOut: "bash completion V2 for tide"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f, bufs := clitest.Factory(clitest.SharingCluster(), nil)
			code := Main(tt.args, f)
			if code != tt.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.code, bufs.Err.String())
			}
			if !strings.Contains(bufs.Out.String(), tt.wantOut) {
				t.Errorf("stdout %.200q does not contain %q", bufs.Out.String(), tt.wantOut)
			}
			if !strings.Contains(bufs.Err.String(), tt.wantErr) {
				t.Errorf("stderr %q does not contain %q", bufs.Err.String(), tt.wantErr)
			}
		})
	}
}
