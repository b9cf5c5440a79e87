package events

import (
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
)

type result struct {
	out, errOut string
	code        int
}

func run(t *testing.T, fake *clitest.FakeAPI, mk func(*cmdutil.Factory, *time.Location) *cobra.Command, args ...string) result {
	t.Helper()
	f, buf := clitest.Factory(fake, nil)
	cmd := mk(f, time.UTC)
	out, errOut, code := clitest.Run(cmd, buf, "tide", args)
	return result{out: out, errOut: errOut, code: code}
}

func golden(t testing.TB, name, got string) {
	t.Helper()
	goldenpkg.Check(t, name, got)
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name   string
		mk     func(*cmdutil.Factory, *time.Location) *cobra.Command
		args   []string
		golden string
	}{
		{name: "trail of a started job", mk: newEventsCmd, args: []string{"101"}, golden: "events-101"},
		{name: "trail of a pending job", mk: newEventsCmd, args: []string{"103"}, golden: "events-103"},
		{name: "trail as json", mk: newEventsCmd, args: []string{"--json", "103"}, golden: "events-103-json"},
		{name: "audit default", mk: newAuditCmd, golden: "audit"},
		{name: "audit newest two", mk: newAuditCmd, args: []string{"-n", "2"}, golden: "audit-n2"},
		{name: "audit as json", mk: newAuditCmd, args: []string{"--json", "--limit", "2"}, golden: "audit-json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, scontroltest.Cluster(), tt.mk, tt.args...)
			if r.code != 0 || r.errOut != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
			}
			golden(t, tt.golden, r.out)
		})
	}
}

// Whatever order the controller answers in, audit prints oldest first
// and keeps the newest records.
func TestAuditOrder(t *testing.T) {
	fake := scontroltest.Cluster()
	log := fake.AuditLog
	reversed := make([]api.AuditRecord, len(log))
	for i := range log {
		reversed[len(log)-1-i] = log[i]
	}
	fake.AuditLog = reversed
	a := run(t, fake, newAuditCmd, "-n", "5")
	b := run(t, scontroltest.Cluster(), newAuditCmd, "-n", "5")
	if diff := cmp.Diff(b.out, a.out); diff != "" {
		t.Errorf("output depends on the controller's order (-newest-first +oldest-first):\n%s", diff)
	}
}

func TestEmpty(t *testing.T) {
	fake := scontroltest.Cluster()
	fake.Trail[7] = nil
	fake.AuditLog = nil
	tests := []struct {
		name string
		mk   func(*cmdutil.Factory, *time.Location) *cobra.Command
		args []string
		want string
	}{
		{name: "no events", mk: newEventsCmd, args: []string{"7"}, want: "TIME  EVENT  STATE  REASON  MESSAGE  BY\n"},
		{name: "no events json", mk: newEventsCmd, args: []string{"7", "--json"}, want: "[]\n"},
		{name: "no audit records json", mk: newAuditCmd, args: []string{"--json"}, want: "[]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, fake, tt.mk, tt.args...)
			if r.code != 0 || r.out != tt.want {
				t.Errorf("got %q (exit %d, stderr %q), want %q", r.out, r.code, r.errOut, tt.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		mk       func(*cmdutil.Factory, *time.Location) *cobra.Command
		args     []string
		apiErr   error
		wantCode int
		wantErr  string
	}{
		{name: "unknown job", mk: newEventsCmd, args: []string{"999"}, wantCode: 1,
			wantErr: "tide: error: events of job 999: Invalid job id specified\n"},
		{name: "malformed job id", mk: newEventsCmd, args: []string{"12x"}, wantCode: 2,
			wantErr: "tide: error: invalid job id: 12x\n"},
		{name: "no job id", mk: newEventsCmd, wantCode: 2,
			wantErr: "tide: error: events takes exactly one job id\n"},
		{name: "two job ids", mk: newEventsCmd, args: []string{"1", "2"}, wantCode: 2,
			wantErr: "tide: error: events takes exactly one job id\n"},
		{name: "bad flag", mk: newEventsCmd, args: []string{"--frob", "1"}, wantCode: 2,
			wantErr: "tide: error: unknown flag: --frob\n"},
		{name: "zero limit", mk: newAuditCmd, args: []string{"-n", "0"}, wantCode: 2,
			wantErr: "tide: error: -n must be a positive number, not 0\n"},
		{name: "limit not a number", mk: newAuditCmd, args: []string{"-n", "many"}, wantCode: 2,
			wantErr: "tide: error: invalid argument \"many\" for \"-n, --limit\" flag: strconv.ParseInt: parsing \"many\": invalid syntax\n"},
		{name: "audit stray argument", mk: newAuditCmd, args: []string{"job"}, wantCode: 2,
			wantErr: "tide: error: audit takes no arguments, got \"job\"\n"},
		{name: "audit refused", mk: newAuditCmd, apiErr: api.Errorf(api.ErrPermissionDenied, "audit is for operators"),
			wantCode: 1, wantErr: "tide: error: audit log: audit is for operators\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := scontroltest.Cluster()
			fake.Err = tt.apiErr
			r := run(t, fake, tt.mk, tt.args...)
			if r.code != tt.wantCode || r.errOut != tt.wantErr {
				t.Errorf("exit %d stderr %q, want exit %d stderr %q", r.code, r.errOut, tt.wantCode, tt.wantErr)
			}
			if r.out != "" {
				t.Errorf("stdout %q, want none", r.out)
			}
		})
	}
}
