package scancel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/slurmfmt/slurmfmttest"
	"github.com/tide-hpc/tide/ctld/api"
)

func exec(t *testing.T, fake *clitest.FakeAPI, stdin string, args ...string) (string, string, error) {
	t.Helper()
	f, bufs := clitest.Factory(fake, nil)
	bufs.In.WriteString(stdin)
	cmd := NewCmd(f)
	// A nil slice would make cobra read the test binary's os.Args.
	cmd.SetArgs(append([]string{}, args...))
	cmd.SetOut(bufs.Out)
	cmd.SetErr(bufs.Err)
	err := cmd.ExecuteContext(context.Background())
	return bufs.Out.String(), bufs.Err.String(), err
}

func ids(xs ...uint64) api.JobFilter { return api.JobFilter{IDs: xs} }

func TestCancel(t *testing.T) {
	refuse := &api.CancelResponse{Results: []api.JobResult{
		{JobID: 108}, {JobID: 109, Error: "Access/permission denied"},
	}}
	tests := []struct {
		name       string
		args       []string
		stdin      string
		resp       *api.CancelResponse
		want       []api.CancelRequest
		wantOut    string
		wantErrOut string
		wantCode   int
	}{
		{name: "one id", args: []string{"108"}, want: []api.CancelRequest{{Filter: ids(108)}}},
		{name: "several ids", args: []string{"108", "109,111"}, want: []api.CancelRequest{{Filter: ids(108, 109, 111)}}},
		{name: "finished job is no error", args: []string{"101"}, want: []api.CancelRequest{{Filter: ids(101)}}},
		{
			name: "unknown id", args: []string{"999999"}, want: []api.CancelRequest{{Filter: ids(999999)}},
			wantErrOut: "scancel: error: Kill job error on job id 999999: Invalid job id specified\n", wantCode: 1,
		},
		{
			name: "unknown id verbose", args: []string{"-v", "999999"}, want: []api.CancelRequest{{Filter: ids(999999)}},
			wantErrOut: "scancel: Terminating job 999999\nscancel: error: Kill job error on job id 999999: Invalid job id specified\n", wantCode: 1,
		},
		{name: "quiet", args: []string{"-Q", "999999"}, want: []api.CancelRequest{{Filter: ids(999999)}}, wantCode: 1},
		{
			name: "refused", args: []string{"108", "109"}, resp: refuse, want: []api.CancelRequest{{Filter: ids(108, 109)}},
			wantErrOut: "scancel: error: Kill job error on job id 109: Access/permission denied\n", wantCode: 1,
		},
		{name: "user", args: []string{"-u", "bob"}, want: []api.CancelRequest{{Filter: api.JobFilter{Users: []string{"bob"}}}}},
		{name: "me", args: []string{"--me"}, want: []api.CancelRequest{{Filter: api.JobFilter{Users: []string{"1000"}}}}},
		{
			name: "filters", args: []string{"--user=alice", "--state=PENDING,r", "-n", "big", "-p", "gpu", "-A", "ml"},
			want: []api.CancelRequest{{Filter: api.JobFilter{Users: []string{"alice"}, Names: []string{"big"},
				Partitions: []string{"gpu"}, Accounts: []string{"ml"}, States: []api.JobState{api.StatePending, api.StateRunning}}}},
		},
		{name: "state only", args: []string{"-t", "PD"}, want: []api.CancelRequest{{Filter: api.JobFilter{States: []api.JobState{api.StatePending}}}}},
		{name: "suspended of a user", args: []string{"-u", "bob", "-t", "SUSPENDED"}, want: []api.CancelRequest{{Filter: api.JobFilter{Users: []string{"bob"}, States: []api.JobState{api.StateSuspended}}}}},
		{name: "suspended alone", args: []string{"-t", "S"}, want: []api.CancelRequest{{Filter: api.JobFilter{States: []api.JobState{api.StateSuspended}}}}},
		{name: "running and suspended", args: []string{"-t", "R,S", "--me"}, want: []api.CancelRequest{{Filter: api.JobFilter{Users: []string{"1000"}, States: []api.JobState{api.StateRunning, api.StateSuspended}}}}},
		{name: "ids and filter", args: []string{"-u", "alice", "108", "109"}, want: []api.CancelRequest{{Filter: api.JobFilter{IDs: []uint64{108, 109}, Users: []string{"alice"}}}}},
		{
			name: "verbose filter", args: []string{"-v", "-u", "carol"},
			want:       []api.CancelRequest{{Filter: api.JobFilter{Users: []string{"carol"}}}},
			wantErrOut: "scancel: Terminating job 105\nscancel: Terminating job 106\nscancel: Terminating job 110\nscancel: Terminating job 113\n",
		},
		{
			name: "array tasks", args: []string{"-v", "7_1,7_[3-4]", "9"},
			resp: &api.CancelResponse{Results: []api.JobResult{{JobID: 9}, {JobID: 7, ID: "7_1"}, {JobID: 7, ID: "7_3"},
				{JobID: 7, ID: "7_4", Error: "Invalid job id specified"}}},
			want: []api.CancelRequest{{Filter: api.JobFilter{IDs: []uint64{9}, Tasks: []api.TaskRef{{JobID: 7, Task: 1}, {JobID: 7, Task: 3}, {JobID: 7, Task: 4}}}}},
			wantErrOut: "scancel: Terminating job 9\nscancel: Terminating job 7_1\nscancel: Terminating job 7_3\nscancel: Terminating job 7_4\n" +
				"scancel: error: Kill job error on job id 7_4: Invalid job id specified\n",
			wantCode: 1,
		},
		{name: "whole array", args: []string{"7_*"}, resp: &api.CancelResponse{Results: []api.JobResult{{JobID: 7}}},
			want: []api.CancelRequest{{Filter: ids(7)}}},
		{name: "signal name", args: []string{"-s", "USR1", "108"}, want: []api.CancelRequest{{Filter: ids(108), Signal: 10}}},
		{name: "signal SIG prefix", args: []string{"--signal=sigterm", "108"}, want: []api.CancelRequest{{Filter: ids(108), Signal: 15}}},
		{name: "signal number batch", args: []string{"-b", "-s", "2", "108"}, want: []api.CancelRequest{{Filter: ids(108), Signal: 2, BatchOnly: true}}},
		{
			name: "signal verbose", args: []string{"-v", "-s", "KILL", "108"}, want: []api.CancelRequest{{Filter: ids(108), Signal: 9}},
			wantErrOut: "scancel: Signal 9 to job 108\n",
		},
		{name: "full", args: []string{"-f", "-s", "HUP", "108"}, want: []api.CancelRequest{{Filter: ids(108), Signal: 1, Full: true}}},
		{name: "nodelist", args: []string{"-w", "gpu03"}, want: []api.CancelRequest{{Filter: ids(109)}}},
		{name: "nodelist range and user", args: []string{"--nodelist=gpu[01-02]", "-u", "alice"}, want: []api.CancelRequest{{Filter: ids(107, 108)}}},
		{name: "nodelist no match", args: []string{"-w", "gpu04"}},
		{
			name: "interactive", args: []string{"-i", "-u", "alice"}, stdin: "y\nn\nyes\n",
			want:    []api.CancelRequest{{Filter: ids(107, 111)}},
			wantOut: "Cancel job_id=107 name=wrapup partition=gpu [y/n]? Cancel job_id=108 name=train partition=gpu [y/n]? Cancel job_id=111 name=big partition=gpu [y/n]? Cancel job_id=114 name=dep partition=gpu [y/n]? ",
		},
		{
			name: "interactive none", args: []string{"-i", "108"}, stdin: "n\n",
			wantOut: "Cancel job_id=108 name=train partition=gpu [y/n]? ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := slurmfmttest.Cluster()
			fake.CancelResp = tt.resp
			out, errOut, err := exec(t, fake, tt.stdin, tt.args...)
			if code := cmdutil.ExitCode(err); code != tt.wantCode {
				t.Errorf("exit code = %d (%v), want %d", code, err, tt.wantCode)
			}
			if diff := cmp.Diff(tt.want, fake.Cancels); diff != "" {
				t.Errorf("cancel requests (-want +got):\n%s", diff)
			}
			if out != tt.wantOut {
				t.Errorf("stdout = %q, want %q", out, tt.wantOut)
			}
			if errOut != tt.wantErrOut {
				t.Errorf("stderr = %q, want %q", errOut, tt.wantErrOut)
			}
		})
	}
}

// TestMatchesSlurm checks scancel -v on an unknown job against the lines
// Slurm 22.05 printed (Tide exits 1 where Slurm exits 0).
func TestMatchesSlurm(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "slurm", "scancel-output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "$ scancel -v 999999\n")
	if !ok {
		t.Fatal("sample lacks the scancel -v run")
	}
	want, _, _ := strings.Cut(after, "exit=")
	_, errOut, _ := exec(t, slurmfmttest.Cluster(), "", "-v", "999999")
	if diff := cmp.Diff(want, errOut); diff != "" {
		t.Errorf("differs from Slurm (-slurm +tide):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		fakeErr error
		wantErr string
	}{
		{name: "no ids", wantErr: "No job identification provided"},
		{name: "only options", args: []string{"-v", "-s", "TERM"}, wantErr: "No job identification provided"},
		{name: "bad id", args: []string{"12", "abc"}, wantErr: "Invalid job id abc"},
		{name: "bad array task", args: []string{"7_x"}, wantErr: "Invalid job id 7_x"},
		{name: "throttle in a task list", args: []string{"7_[1-3%2]"}, wantErr: "Invalid job id 7_[1-3%2]"},
		{name: "zero id", args: []string{"0"}, wantErr: "Invalid job id 0"},
		{name: "bad signal", args: []string{"-s", "FOO", "12"}, wantErr: "Unknown job signal: FOO"},
		{name: "signal out of range", args: []string{"-s", "65", "12"}, wantErr: "Unknown job signal: 65"},
		{name: "bad state", args: []string{"-t", "asleep"}, wantErr: "Invalid job state specified: asleep"},
		{name: "bad nodelist", args: []string{"-w", "gpu[0"}, wantErr: "invalid entry for --nodelist"},
		{name: "controller down", args: []string{"12"}, fakeErr: api.Errorf(api.ErrUnavailable, "connection refused"), wantErr: "Kill job error: connection refused"},
		{name: "controller down listing", args: []string{"-w", "gpu01"}, fakeErr: api.Errorf(api.ErrUnavailable, "connection refused"), wantErr: "slurm_load_jobs error: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := slurmfmttest.Cluster()
			fake.Err = tt.fakeErr
			_, _, err := exec(t, fake, "", tt.args...)
			if err == nil {
				t.Fatalf("scancel %v succeeded", tt.args)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
			}
			if code := cmdutil.ExitCode(err); code != cmdutil.ExitError {
				t.Errorf("exit code = %d, want 1", code)
			}
			if tt.fakeErr != nil && !errors.Is(err, api.ErrUnavailable) {
				t.Errorf("error %v does not wrap the controller's", err)
			}
			if len(fake.Cancels) != 0 {
				t.Errorf("sent %v despite the error", fake.Cancels)
			}
		})
	}
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int
		err  bool
	}{
		{name: "name", in: "TERM", want: 15},
		{name: "lower case", in: "usr2", want: 12},
		{name: "SIG prefix", in: "SIGKILL", want: 9},
		{name: "mixed case prefix", in: "SigCont", want: 18},
		{name: "number", in: "10", want: 10},
		{name: "realtime number", in: "64", want: 64},
		{name: "zero", in: "0", err: true},
		{name: "negative", in: "-1", err: true},
		{name: "unknown", in: "SIGFOO", err: true},
		{name: "empty", in: "", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSignal(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("ParseSignal(%q) error = %v, want error %v", tt.in, err, tt.err)
			}
			if err != nil && !errors.Is(err, api.ErrInvalidArgument) {
				t.Errorf("error %v is not ErrInvalidArgument", err)
			}
			if got != tt.want {
				t.Errorf("ParseSignal(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}
