package sbatch

import (
	"context"
	"errors"
	"fmt"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
	ctldclient "github.com/tide-hpc/tide/ctld/client"
)

const jobScript = "#!/bin/bash\n#SBATCH -J train -N 1\nsrun hostname\n"

var testFiles = map[string]string{
	"/home/alice/exp/job.sh":  jobScript,
	"/home/alice/exp/echo.sh": "echo not a batch script\n",
}

type result struct {
	out, err string
	code     int
}

// runSbatch runs the command against fake with the given stdin.
func runSbatch(t *testing.T, fake *clitest.FakeAPI, api cmdutil.API, stdin string, args ...string) result {
	t.Helper()
	f, bufs := clitest.Factory(fake, map[string]string{"HOME": "/home/alice", "SLURM_CONF": "/etc/slurm.conf"})
	if api != nil {
		f.API = func() (cmdutil.API, error) { return api, nil }
	}
	bufs.In.WriteString(stdin)
	cmd := newCmd(f, func(ctx context.Context, o *Options) error {
		o.ReadFile = func(p string) ([]byte, error) {
			if v, ok := testFiles[p]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
		o.Location = time.UTC
		o.PollInterval = time.Millisecond
		return Run(ctx, o)
	})
	cmd.SetArgs(append([]string{}, args...))
	err := cmd.Execute()
	var silent *cmdutil.SilentError
	if err != nil && !errors.As(err, &silent) {
		t.Fatalf("Run returned a non-silent error: %v", err)
	}
	return result{out: bufs.Out.String(), err: bufs.Err.String(), code: cmdutil.ExitCode(err)}
}

func TestSubmit(t *testing.T) {
	fake := &clitest.FakeAPI{}
	got := runSbatch(t, fake, nil, "", "-p", "gpu", "--gres=gpu:a100:2", "job.sh")
	if diff := cmp.Diff(result{out: "Submitted batch job 1\n"}, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if len(fake.Submitted) != 1 {
		t.Fatalf("%d submissions, want 1", len(fake.Submitted))
	}
	req := fake.Submitted[0]
	want := api.JobSpec{
		Name: "train", Partition: "gpu", Script: jobScript, Nodes: 1, GPUsPerNode: 2, GPUType: "a100",
		WorkDir: "/home/alice/exp", SubmitDir: "/home/alice/exp", SubmitHost: "login1",
		Environment: []string{"HOME=/home/alice", "SLURM_CONF=/etc/slurm.conf"},
	}
	if diff := cmp.Diff(api.SubmitRequest{Spec: want}, req); diff != "" {
		t.Errorf("submitted (-want +got):\n%s", diff)
	}
}

func TestOutput(t *testing.T) {
	start := time.Date(2026, 11, 29, 19, 31, 7, 0, time.UTC)
	tests := []struct {
		name      string
		fake      *clitest.FakeAPI
		stdin     string
		args      []string
		want      result
		submitted int
	}{
		{name: "parsable", args: []string{"--parsable", "job.sh"}, want: result{out: "1\n"}, submitted: 1},
		{name: "warnings of options and of the controller",
			fake: &clitest.FakeAPI{SubmitResp: api.SubmitResponse{JobID: 7, Warnings: []string{"node count range 1-2: Tide allocates the minimum, 1"}}},
			args: []string{"--hint=nomultithread", "job.sh"},
			want: result{out: "Submitted batch job 7\n", err: "sbatch: warning: --hint has no effect yet in Tide; ignored\n" +
				"sbatch: warning: node count range 1-2: Tide allocates the minimum, 1\n"}, submitted: 1},
		{name: "quiet hides warnings",
			fake: &clitest.FakeAPI{SubmitResp: api.SubmitResponse{JobID: 7, Warnings: []string{"from the controller"}}},
			args: []string{"-Q", "--hint=nomultithread", "job.sh"}, want: result{out: "Submitted batch job 7\n"}, submitted: 1},
		{name: "test only",
			fake: &clitest.FakeAPI{SubmitResp: api.SubmitResponse{TestStart: start, TestCPUs: 4, TestNodes: "gpu01", TestPartition: "gpu"}},
			args: []string{"--test-only", "job.sh"},
			want: result{err: "sbatch: Job 0 to start at 2026-11-29T19:31:07 using 4 processors on nodes gpu01 in partition gpu\n"}, submitted: 1},
		{name: "script on stdin", stdin: "#!/bin/sh\ntrue\n", args: []string{}, want: result{out: "Submitted batch job 1\n"}, submitted: 1},
		{name: "wrap", args: []string{"--wrap", "hostname"}, want: result{out: "Submitted batch job 1\n"}, submitted: 1},
		{name: "controller refuses",
			fake: &clitest.FakeAPI{Err: api.Invalid("invalid partition specified: nosuchpart")},
			args: []string{"-p", "nosuchpart", "job.sh"},
			want: result{err: "sbatch: error: Batch job submission failed: invalid partition specified: nosuchpart\n", code: 1}},
		{name: "controller message already prefixed",
			fake: &clitest.FakeAPI{Err: api.Invalid("Batch job submission failed: Requested node configuration is not available")},
			args: []string{"job.sh"},
			want: result{err: "sbatch: error: Batch job submission failed: Requested node configuration is not available\n", code: 1}},
		{name: "unknown option", args: []string{"--foo", "job.sh"},
			want: result{err: "sbatch: unrecognized option '--foo'\nTry \"sbatch --help\" for more information\n", code: 1}},
		{name: "bad value", args: []string{"-t", "soon", "job.sh"}, want: result{err: "sbatch: error: Invalid --time specification\n", code: 1}},
		{name: "not a batch script", args: []string{"echo.sh"}, want: result{err: "sbatch: error: This does not look like a batch script.  The first\n" +
			"sbatch: error: line must start with #! followed by the path to an interpreter.\n" +
			"sbatch: error: For instance: #!/bin/sh\n", code: 1}},
		{name: "missing script", args: []string{"nope.sh"}, want: result{err: "sbatch: error: Unable to open file nope.sh\n", code: 1}},
		{name: "array", args: []string{"-a", "1-3", "job.sh"}, want: result{out: "Submitted batch job 1\n"}, submitted: 1},
		{name: "bad array", args: []string{"-a", "1-x", "job.sh"},
			want: result{err: "sbatch: error: Invalid --array specification\n", code: 1}},
		{name: "throttled submission says so once and succeeds",
			fake: &clitest.FakeAPI{Throttled: &ctldclient.Throttle{RetryIn: 3 * time.Second}},
			args: []string{"--queue=prod", "job.sh"},
			want: result{out: "Submitted batch job 1\n",
				err: "sbatch: submission throttled by the controller (queue buffer full); retrying in 3s\n"}, submitted: 1},
		{name: "throttled even when quiet",
			fake: &clitest.FakeAPI{Throttled: &ctldclient.Throttle{RetryIn: 90 * time.Second}},
			args: []string{"-Q", "--parsable", "job.sh"},
			want: result{out: "1\n",
				err: "sbatch: submission throttled by the controller (queue buffer full); retrying in 1m30s\n"}, submitted: 1},
		{name: "throttled too long",
			fake: &clitest.FakeAPI{Err: fmt.Errorf("submission throttled by the controller (queue buffer full); gave up after waiting 10m0s: %w",
				api.Errorf(api.ErrTooManyRequests, "queue prod: submission buffer full"))},
			args: []string{"job.sh"},
			want: result{err: "sbatch: error: Batch job submission failed: submission throttled by the controller (queue buffer full); " +
				"gave up after waiting 10m0s: queue prod: submission buffer full\n", code: 1}},
		{name: "priority out of range", args: []string{"--priority=11", "job.sh"},
			want: result{err: "sbatch: error: Invalid --priority specification: 11 (a level from 1 to 10)\n", code: 1}},
		{name: "verbose shows the queue as the account", args: []string{"-v", "--queue=moba", "job.sh"}, want: result{out: "Submitted batch job 1\n",
			err: "sbatch: defined options\nsbatch: -------------------- --------------------\n" +
				"sbatch: account             : moba\nsbatch: job-name            : train\nsbatch: nodes               : 1\nsbatch: verbose             : set\n" +
				"sbatch: -------------------- --------------------\nsbatch: end of defined options\n"}, submitted: 1},
		{name: "version", args: []string{"--version"}, want: result{out: "slurm 22.05.8\n"}},
		{name: "verbose lists defined options", args: []string{"-v", "-N", "2", "job.sh"}, want: result{out: "Submitted batch job 1\n",
			err: "sbatch: defined options\nsbatch: -------------------- --------------------\n" +
				"sbatch: job-name            : train\nsbatch: nodes               : 2\nsbatch: verbose             : set\n" +
				"sbatch: -------------------- --------------------\nsbatch: end of defined options\n"}, submitted: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := tt.fake
			if fake == nil {
				fake = &clitest.FakeAPI{}
			}
			got := runSbatch(t, fake, nil, tt.stdin, tt.args...)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if len(fake.Submitted) != tt.submitted {
				t.Errorf("%d submissions, want %d", len(fake.Submitted), tt.submitted)
			}
			if tt.submitted > 0 && fake.Submitted[0].TestOnly != strings.Contains(tt.name, "test only") {
				t.Errorf("TestOnly = %v", fake.Submitted[0].TestOnly)
			}
		})
	}
}

// stepAPI answers Job with the states in turn, repeating the last.
type stepAPI struct {
	*clitest.FakeAPI
	states []api.Job
	calls  int
}

func (s *stepAPI) Job(_ context.Context, id uint64) (api.Job, error) {
	j := s.states[min(s.calls, len(s.states)-1)]
	s.calls++
	if j.State == "" {
		return api.Job{}, api.Errorf(api.ErrUnavailable, "controller restarting")
	}
	j.ID = id
	return j, nil
}

func TestWait(t *testing.T) {
	tests := []struct {
		name   string
		states []api.Job
		code   int
		calls  int
	}{
		{name: "completed", states: []api.Job{{State: api.StateCompleted}}, code: 0, calls: 1},
		{name: "pending, running, unavailable, then completed",
			states: []api.Job{{State: api.StatePending}, {State: api.StateRunning}, {}, {State: api.StateCompleted}}, code: 0, calls: 4},
		{name: "failed with a code", states: []api.Job{{State: api.StateFailed, Exit: api.ExitStatus{Code: 3}}}, code: 3, calls: 1},
		{name: "failed without a code", states: []api.Job{{State: api.StateFailed}}, code: 1, calls: 1},
		{name: "killed by a signal", states: []api.Job{{State: api.StateCancelled, Exit: api.ExitStatus{Signal: 9}}}, code: 1, calls: 1},
		{name: "timed out", states: []api.Job{{State: api.StateTimeout}}, code: 1, calls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &clitest.FakeAPI{}
			step := &stepAPI{FakeAPI: fake, states: tt.states}
			got := runSbatch(t, fake, step, "", "-W", "job.sh")
			if got.code != tt.code || got.out != "Submitted batch job 1\n" || got.err != "" {
				t.Errorf("got %+v, want code %d", got, tt.code)
			}
			if step.calls != tt.calls {
				t.Errorf("%d Job calls, want %d", step.calls, tt.calls)
			}
		})
	}
}

// goneAPI has forgotten every job; only accounting knows them.
type goneAPI struct{ *clitest.FakeAPI }

func (goneAPI) Job(context.Context, uint64) (api.Job, error) {
	return api.Job{}, api.Errorf(api.ErrNotFound, "Invalid job id specified")
}

func TestWaitJobGoneToAccounting(t *testing.T) {
	tests := []struct {
		name     string
		finished []api.Job
		want     result
	}{
		{name: "found in accounting", finished: []api.Job{{ID: 42, State: api.StateFailed, Exit: api.ExitStatus{Code: 5}}},
			want: result{out: "Submitted batch job 42\n", code: 5}},
		{name: "found nowhere", want: result{out: "Submitted batch job 42\n",
			err: "sbatch: error: waiting for job 42: Invalid job id specified\n", code: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &clitest.FakeAPI{NextID: 41, Finished: tt.finished}
			got := runSbatch(t, fake, goneAPI{fake}, "", "--wait", "job.sh")
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestHelpGolden(t *testing.T) {
	for _, tt := range []struct{ name, arg string }{{"help", "--help"}, {"usage", "--usage"}} {
		t.Run(tt.name, func(t *testing.T) {
			fake := &clitest.FakeAPI{Err: errors.New("help must not call the controller")}
			got := runSbatch(t, fake, nil, "", tt.arg, "--bogus-after-help")
			if got.code != 0 || got.err != "" {
				t.Fatalf("got %+v", got)
			}
			path := filepath.Join("testdata", tt.name+".golden")
			if *goldenpkg.Update {
				if err := os.WriteFile(path, []byte(got.out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got.out); diff != "" {
				t.Errorf("%s (-want +got):\n%s", path, diff)
			}
		})
	}
}
