package scontrol

import (
	"context"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
)

// reconfFake is the fake controller with the reconfigure call.
type reconfFake struct {
	*clitest.FakeAPI
	calls int
	err   error
}

func (f *reconfFake) Reconfigure(context.Context) (api.ReconfigureResponse, error) {
	f.calls++
	if f.err != nil {
		return api.ReconfigureResponse{}, f.err
	}
	return api.ReconfigureResponse{Changed: []api.ConfigChange{{Key: "scheduler.policy", Old: "priority", New: "backfill"}}}, nil
}

func TestReconfigure(t *testing.T) {
	denied := api.Errorf(api.ErrPermissionDenied, "Access/permission denied: only operators may reconfigure the controller")
	restart := api.Errorf(api.ErrConflict, "state_dir changed: restart tidectld to apply (nothing changed)")
	tests := []struct {
		name      string
		args      []string
		err       error
		calls     int
		code      int
		wantErr   string
		wantNoOut bool
	}{
		{name: "applied: silent", args: []string{"reconfigure"}, calls: 1},
		{name: "abbreviated", args: []string{"reconfig"}, calls: 1},
		{name: "shortest unambiguous", args: []string{"rec"}, calls: 1},
		{name: "any case", args: []string{"RECONFIGURE"}, calls: 1},
		{name: "not an operator", args: []string{"reconfigure"}, err: denied, calls: 1, code: 1,
			wantErr: "scontrol: error: slurm_reconfigure error: Access/permission denied: only operators may reconfigure the controller\n"},
		{name: "restart needed", args: []string{"reconfigure"}, err: restart, calls: 1, code: 1,
			wantErr: "scontrol: error: slurm_reconfigure error: state_dir changed: restart tidectld to apply (nothing changed)\n"},
		{name: "quiet error", args: []string{"-Q", "reconfigure"}, err: denied, calls: 1, code: 1},
		{name: "extra argument", args: []string{"reconfigure", "now"}, code: 1,
			wantErr: "scontrol: error: too many arguments for keyword: reconfigure\n"},
		{name: "re is ambiguous", args: []string{"re"}, code: 1,
			wantErr: "scontrol: error: ambiguous keyword: re (could be reconfigure, release, requeue)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &reconfFake{FakeAPI: &clitest.FakeAPI{Now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, err: tt.err}
			f, buf := clitest.Factory(fake.FakeAPI, nil)
			f.API = func() (cmdutil.API, error) { return fake, nil }
			out, errOut, code := clitest.Run(newCmd(f, time.UTC), buf, "scontrol", tt.args)
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			if errOut != tt.wantErr {
				t.Errorf("stderr %q, want %q", errOut, tt.wantErr)
			}
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			if fake.calls != tt.calls {
				t.Errorf("%d reconfigure calls, want %d", fake.calls, tt.calls)
			}
		})
	}
}
