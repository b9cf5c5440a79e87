package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
)

func TestCheckpointDone(t *testing.T) {
	// As ctld/client words it (one line: the CLI escapes newlines).
	unreachable := fmt.Errorf("%w: %w", api.ErrUnavailable, errors.New("dial unix /run/tide/tidectld.sock: connect: no such file or directory"))
	tests := []struct {
		name string
		args []string
		// inJob sets SLURM_JOB_ID; ack sets TIDE_CHECKPOINT_ACK to a
		// file in a temporary directory ("missing/…" for one that cannot
		// be created).
		inJob   string
		ack     string
		ctlErr  error
		want    []uint64
		touched bool
		out     string
		errOut  string
		code    int
	}{
		{name: "inside a job", inJob: "201", ack: "ack", want: []uint64{201}, touched: true},
		{name: "inside a job without an ack file", inJob: "201", want: []uint64{201}},
		{name: "verbose", args: []string{"-v"}, inJob: "201", ack: "ack", want: []uint64{201}, touched: true,
			out: "job 201: checkpoint acknowledged\n"},
		{name: "named job outside a job", args: []string{"202"}, want: []uint64{202}},
		{name: "named job from inside another leaves the ack file alone", args: []string{"202"}, inJob: "201", ack: "ack",
			want: []uint64{202}},
		{name: "naming its own job touches the file", args: []string{"201"}, inJob: "201", ack: "ack", want: []uint64{201}, touched: true},
		{name: "controller unreachable: the file carries it", inJob: "201", ack: "ack", ctlErr: unreachable, touched: true,
			errOut: "checkpoint-done: warning: unavailable: dial unix /run/tide/tidectld.sock: connect: no such file or directory; acknowledged through ACK (tided reports it)\n"},
		{name: "controller unreachable and no file", inJob: "201", ctlErr: unreachable, code: 1,
			errOut: "checkpoint-done: error: acknowledge the checkpoint of job 201: unavailable: dial unix /run/tide/tidectld.sock: connect: no such file or directory\n"},
		{name: "file cannot be written", inJob: "201", ack: "missing/ack", want: []uint64{201},
			errOut: "checkpoint-done: warning: cannot touch TIDE_CHECKPOINT_ACK=ACK: open ACK: no such file or directory\n"},
		{name: "not a job of the controller", args: []string{"999"}, code: 1,
			errOut: "checkpoint-done: error: job 999: Invalid job id specified\n"},
		{name: "refused", inJob: "201", ctlErr: api.Errorf(api.ErrPermissionDenied, "Access/permission denied"), code: 1,
			errOut: "checkpoint-done: error: acknowledge the checkpoint of job 201: Access/permission denied\n"},
		{name: "outside a job", code: 2,
			errOut: "checkpoint-done: error: not inside a job (SLURM_JOB_ID is not set): give the job id, as in: tide checkpoint-done JOBID\n"},
		{name: "bad job id", args: []string{"12_3"}, code: 2, errOut: "checkpoint-done: error: invalid job id \"12_3\"\n"},
		{name: "bad SLURM_JOB_ID", inJob: "abc", code: 1, errOut: "checkpoint-done: error: SLURM_JOB_ID=abc: invalid job id \"abc\"\n"},
		{name: "two job ids", args: []string{"1", "2"}, code: 2, errOut: "checkpoint-done: error: checkpoint-done takes at most one job id, got 2 arguments\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := clitest.SharingCluster()
			fake.CheckpointErr = tt.ctlErr
			env := map[string]string{}
			if tt.inJob != "" {
				env[EnvJobID] = tt.inJob
			}
			ackPath := ""
			if tt.ack != "" {
				ackPath = filepath.Join(t.TempDir(), tt.ack)
				env[EnvAck] = ackPath
			}
			f, bufs := clitest.Factory(fake, env)
			out, errOut, code := clitest.Run(NewCmd(f), bufs, prog, tt.args)
			if ackPath != "" {
				errOut = strings.ReplaceAll(errOut, ackPath, "ACK")
			}
			if out != tt.out || errOut != tt.errOut || code != tt.code {
				t.Errorf("got out %q err %q code %d\nwant out %q err %q code %d", out, errOut, code, tt.out, tt.errOut, tt.code)
			}
			if diff := cmp.Diff(tt.want, fake.Checkpoints, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("checkpoints (-want +got):\n%s", diff)
			}
			if ackPath != "" {
				fi, err := os.Stat(ackPath)
				if got := err == nil; got != tt.touched {
					t.Fatalf("ack file exists = %v, want %v", got, tt.touched)
				}
				if tt.touched && !fi.ModTime().Equal(clitest.SharingNow) {
					t.Errorf("ack file modified %v, want %v", fi.ModTime(), clitest.SharingNow)
				}
			}
		})
	}
}

// TestTouchUpdatesAnExistingFile checks that a second acknowledgement
// moves the file's time forward (tided compares it with its last signal).
func TestTouchUpdatesAnExistingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ack")
	first := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for _, now := range []time.Time{first, first.Add(time.Hour)} {
		if err := touch(p, now); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.ModTime().Equal(now) {
			t.Errorf("modified %v, want %v", fi.ModTime(), now)
		}
	}
}
