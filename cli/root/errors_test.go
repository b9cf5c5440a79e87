package root

import (
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
)

// TestErrorsAreEscaped checks the one place commands' errors reach the
// terminal: a controller message that echoes another user's value, or
// a bad flag, prints on one escaped line, and a usage error's hint
// follows on its own line.
func TestErrorsAreEscaped(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		ctlErr  error
		code    int
		wantErr string
	}{
		{name: "bad option keeps its hint", args: []string{"/usr/bin/squeue", "--\x1b[2Jx"}, code: 1,
			wantErr: "squeue: unrecognized option '--\\x1b[2Jx'\nTry \"squeue --help\" for more information\n"},
		{name: "bad flag of a tide command keeps its hint", args: []string{"tide", "events", "--\x1b[2Jx"}, code: 2,
			wantErr: "events: error: unknown flag: --\\x1b[2Jx\nTry \"tide events --help\" for more information\n"},
		{name: "controller message", args: []string{"tide", "control", "show", "job", "5"}, code: 1,
			ctlErr:  api.Errorf(api.ErrInvalidArgument, "job name %s", "a\nscontrol: error: forged\x1b]0;t\a"),
			wantErr: "scontrol: error: slurm_load_jobs error: job name a\\nscontrol: error: forged\\x1b]0;t\\x07\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := clitest.HostileCluster()
			fake.Err = tt.ctlErr
			f, bufs := clitest.Factory(fake, nil)
			if code := Main(tt.args, f); code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			if got := bufs.Err.String(); got != tt.wantErr {
				t.Errorf("stderr = %q, want %q", got, tt.wantErr)
			}
		})
	}
}
