package scontrol

import (
	"errors"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/scontrol/scontroltest"
	"github.com/tide-hpc/tide/ctld/api"
)

// result is what one scontrol invocation printed and how it ended, with
// the root command's error printing applied.
type result struct {
	out, errOut string
	code        int
}

func run(t *testing.T, fake *clitest.FakeAPI, env map[string]string, loc *time.Location, args ...string) result {
	t.Helper()
	f, buf := clitest.Factory(fake, env)
	cmd := newCmd(f, loc)
	out, errOut, code := clitest.Run(cmd, buf, "scontrol", args)
	return result{out: out, errOut: errOut, code: code}
}

func golden(t testing.TB, name, got string) {
	t.Helper()
	goldenpkg.Check(t, name, got)
}

func TestShowGolden(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		golden string
	}{
		{name: "all jobs", args: []string{"show", "job"}, golden: "show-job-all"},
		{name: "running 2-GPU job", args: []string{"show", "job", "101"}, golden: "show-job-gpu"},
		{name: "running 2-GPU job with details", args: []string{"-d", "show", "job", "101"}, golden: "show-job-d-gpu"},
		{name: "2-node job", args: []string{"show", "job", "102"}, golden: "show-job-multinode"},
		{name: "2-node job with details", args: []string{"--details", "show", "job", "102"}, golden: "show-job-d-multinode"},
		{name: "pending with diagnosis", args: []string{"show", "job", "103"}, golden: "show-job-pending"},
		{name: "held", args: []string{"show", "job", "104"}, golden: "show-job-held"},
		{name: "begin time and dependency", args: []string{"show", "job", "105"}, golden: "show-job-begin"},
		{name: "completing", args: []string{"show", "job", "100"}, golden: "show-job-completing"},
		{name: "completed from accounting", args: []string{"show", "job", "90"}, golden: "show-job-completed"},
		{name: "details of a job without GPUs", args: []string{"-d", "show", "job", "90"}, golden: "show-job-d-nogpu"},
		{name: "failed", args: []string{"show", "job", "91"}, golden: "show-job-failed"},
		{name: "timeout", args: []string{"show", "job", "92"}, golden: "show-job-timeout"},
		{name: "cancelled while pending", args: []string{"show", "job", "96"}, golden: "show-job-cancelled"},
		{name: "one-liner", args: []string{"-o", "show", "job", "101"}, golden: "show-job-o-gpu"},
		{name: "one-liner pending with diagnosis", args: []string{"show", "job", "103", "--oneliner"}, golden: "show-job-o-pending"},
		{name: "all nodes", args: []string{"show", "node"}, golden: "show-node-all"},
		{name: "drained node", args: []string{"show", "node", "gpu04"}, golden: "show-node-drained"},
		{name: "node details", args: []string{"-d", "show", "node", "gpu01"}, golden: "show-node-d"},
		{name: "node range one-liner", args: []string{"-o", "show", "node", "gpu[03-04]"}, golden: "show-node-o"},
		{name: "all partitions", args: []string{"show", "partition"}, golden: "show-partition-all"},
		{name: "one partition", args: []string{"show", "partition", "debug"}, golden: "show-partition-debug"},
		{name: "config", args: []string{"show", "config"}, golden: "show-config"},
		{name: "hostnames", args: []string{"show", "hostnames", "gpu[01-03],login1"}, golden: "show-hostnames"},
		{name: "hostnames from env", args: []string{"show", "hostnames"},
			env: map[string]string{"SLURM_JOB_NODELIST": "gpu[02-03]"}, golden: "show-hostnames-env"},
		{name: "hostlist", args: []string{"show", "hostlist", "gpu03,gpu01,gpu02,login1"}, golden: "show-hostlist"},
		{name: "version", args: []string{"version"}, golden: "version"},
		{name: "ping", args: []string{"ping"}, golden: "ping"},
		{name: "no reservations", args: []string{"show", "reservations"}, golden: "show-reservations"},
		{name: "help", args: []string{"--help"}, golden: "help"},
		{name: "help command", args: []string{"help"}, golden: "help"},
		{name: "no licenses", args: []string{"show", "lic"}, golden: "show-licenses"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, scontroltest.Cluster(), tt.env, time.UTC, tt.args...)
			if r.code != 0 || r.errOut != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
			}
			golden(t, tt.golden, r.out)
		})
	}
}

// Slurm accepts commands and entities in any case and abbreviated.
func TestAbbreviations(t *testing.T) {
	want := run(t, scontroltest.Cluster(), nil, time.UTC, "show", "job", "101").out
	tests := []struct {
		name string
		args []string
	}{
		{"upper case", []string{"SHOW", "JOB", "101"}},
		{"plural", []string{"show", "jobs", "101"}},
		{"abbreviated", []string{"sh", "j", "101"}},
		{"mixed", []string{"Sho", "JoBs", "101"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, scontroltest.Cluster(), nil, time.UTC, tt.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.errOut)
			}
			if diff := cmp.Diff(want, r.out); diff != "" {
				t.Errorf("output differs from 'show job 101' (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchKeyword(t *testing.T) {
	tests := []struct {
		name    string
		word    string
		want    string
		wantErr string
	}{
		{name: "exact", word: "hold", want: "hold"},
		{name: "exact wins over longer", word: "hostlist", want: "hostlist"},
		{name: "prefix", word: "upd", want: "update"},
		{name: "case", word: "RELEASE", want: "release"},
		{name: "ambiguous", word: "re", wantErr: "ambiguous keyword: re (could be release, requeue)"},
		{name: "unknown", word: "frob", wantErr: "invalid keyword: frob"},
		{name: "empty", word: "", wantErr: "invalid keyword"},
	}
	cands := []string{"show", "hold", "uhold", "release", "requeue", "update", "hostlist", "hostlistsorted"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := matchKeyword(tt.word, cands)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("matchKeyword(%q) = %q, %v; want %q", tt.word, got, err, tt.want)
			}
		})
	}
}

// Times print in the injected zone, the way Slurm prints local time.
func TestLocalTime(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	r := run(t, scontroltest.Cluster(), nil, cet, "show", "job", "101")
	for _, want := range []string{
		"SubmitTime=2026-11-29T20:19:17 EligibleTime=2026-11-29T20:19:17",
		"StartTime=2026-11-29T20:21:17 EndTime=2026-11-30T00:21:17",
		"RunTime=00:10:00",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		prep      func(f *clitest.FakeAPI)
		wantCode  int
		wantErr   string // exact stderr
		wantOut   string // exact stdout, when checked
		checkOut  bool
		noChanges bool
	}{
		{name: "unknown job", args: []string{"show", "job", "999"}, wantCode: 1,
			wantErr: "slurm_load_jobs error: Invalid job id specified\n"},
		{name: "malformed job id", args: []string{"show", "job", "abc"}, wantCode: 1,
			wantErr: "slurm_load_jobs error: Invalid job id specified\n"},
		{name: "no jobs", args: []string{"show", "job"}, prep: func(f *clitest.FakeAPI) { f.JobRecs = nil },
			wantCode: 0, checkOut: true, wantOut: "No jobs in the system\n"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: 1,
			wantErr: "scontrol: error: invalid keyword: frobnicate\n"},
		{name: "ambiguous command", args: []string{"re", "5"}, wantCode: 1,
			wantErr: "scontrol: error: ambiguous keyword: re (could be reconfigure, release, requeue)\n"},
		{name: "slurm command tide lacks", args: []string{"suspend", "101"}, wantCode: 1,
			wantErr: "scontrol: error: suspend is not supported by Tide\n"},
		{name: "unknown entity", args: []string{"show", "foo"}, wantCode: 1,
			wantErr: "scontrol: error: invalid entity: foo for keyword: show\n"},
		{name: "slurm entity tide lacks", args: []string{"show", "topology"}, wantCode: 1,
			wantErr: "scontrol: error: show topology is not supported by Tide\n"},
		{name: "unknown node", args: []string{"show", "node", "gpu[04-05]"}, wantCode: 1,
			wantErr: "scontrol: error: Node gpu05 not found\n"},
		{name: "unknown partition", args: []string{"show", "partition", "nope"}, wantCode: 1,
			wantErr: "scontrol: error: Partition nope not found\n"},
		{name: "no command", args: nil, wantCode: 2,
			wantErr: "scontrol: error: no command given (try: scontrol show job)\n"},
		{name: "controller down", args: []string{"show", "node"},
			prep:     func(f *clitest.FakeAPI) { f.Err = api.Errorf(api.ErrUnavailable, "connect: no such file") },
			wantCode: 1, wantErr: "scontrol: error: slurm_load_node error: connect: no such file\n"},
		{name: "ping down", args: []string{"ping"},
			prep:     func(f *clitest.FakeAPI) { f.Err = errors.New("connection refused") },
			wantCode: 1, wantErr: "scontrol: error: ping controller: connection refused\n"},
		{name: "drain without reason", args: []string{"update", "NodeName=gpu01", "State=DRAIN"}, wantCode: 1,
			wantErr: "You must specify a reason when DOWNING or DRAINING a node. Request denied\n", noChanges: true},
		{name: "down with blank reason", args: []string{"update", "NodeName=gpu01", "State=down", "Reason= "}, wantCode: 1,
			wantErr: "You must specify a reason when DOWNING or DRAINING a node. Request denied\n", noChanges: true},
		{name: "bad node state", args: []string{"update", "NodeName=gpu01", "State=sleepy"}, wantCode: 1,
			wantErr: "scontrol: error: invalid node state specified: sleepy (valid: DRAIN, RESUME, DOWN, UNDRAIN)\n", noChanges: true},
		{name: "unsupported job field", args: []string{"update", "JobId=101", "NumNodes=2"}, wantCode: 1,
			wantErr: "scontrol: error: Update of this parameter is not supported: NumNodes=2\n", noChanges: true},
		{name: "update without entity", args: []string{"update", "TimeLimit=10"}, wantCode: 1,
			wantErr: "scontrol: error: no entity to update: give JobId=ID or NodeName=NODES\n", noChanges: true},
		{name: "update not key=value", args: []string{"update", "JobId=101", "hold"}, wantCode: 1,
			wantErr: "scontrol: error: invalid input: hold (expected Key=Value)\n", noChanges: true},
		{name: "bad time limit", args: []string{"update", "JobId=101", "TimeLimit=soon"}, wantCode: 1,
			wantErr: "scontrol: error: invalid time limit specification: soon\n", noChanges: true},
		{name: "hold without ids", args: []string{"hold"}, wantCode: 1,
			wantErr: "scontrol: error: no job id given\n", noChanges: true},
		{name: "hold bad id", args: []string{"hold", "101,x"}, wantCode: 1,
			wantErr: "scontrol: error: Invalid job id specified: x\n", noChanges: true},
		{name: "hold of a running job", args: []string{"hold", "101", "103"},
			prep: func(f *clitest.FakeAPI) {
				f.UpdateResp = &api.CancelResponse{Results: []api.JobResult{
					{JobID: 101, Error: "Job is no longer pending execution"}, {JobID: 103}}}
			},
			wantCode: 1, wantErr: "scontrol: error: Job is no longer pending execution for job 101\n"},
		{name: "quiet hides per-job errors", args: []string{"-Q", "release", "101"},
			prep: func(f *clitest.FakeAPI) {
				f.UpdateResp = &api.CancelResponse{Results: []api.JobResult{{JobID: 101, Error: "Job is not held"}}}
			},
			wantCode: 1, wantErr: ""},
		{name: "relative limit of a job without one", args: []string{"update", "JobId=105", "TimeLimit=+10"}, wantCode: 1,
			wantErr: "scontrol: error: TimeLimit increment/decrement not possible without a finite time limit for job 105\n", noChanges: true},
		{name: "hostnames without list", args: []string{"show", "hostnames"}, wantCode: 1,
			wantErr: "scontrol: error: no hostlist given and SLURM_JOB_NODELIST is not set\n"},
		{name: "unknown flag", args: []string{"--frob", "show", "job"}, wantCode: 1,
			wantErr: "scontrol: unrecognized option '--frob'\nTry \"scontrol --help\" for more information\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := scontroltest.Cluster()
			if tt.prep != nil {
				tt.prep(fake)
			}
			r := run(t, fake, nil, time.UTC, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", r.code, tt.wantCode, r.errOut)
			}
			if r.errOut != tt.wantErr {
				t.Errorf("stderr = %q, want %q", r.errOut, tt.wantErr)
			}
			if tt.checkOut && r.out != tt.wantOut {
				t.Errorf("stdout = %q, want %q", r.out, tt.wantOut)
			}
			if tt.noChanges && (len(fake.JobUpdates) > 0 || len(fake.NodeUpdates) > 0) {
				t.Errorf("changes were sent: jobs %+v nodes %+v", fake.JobUpdates, fake.NodeUpdates)
			}
		})
	}
}
