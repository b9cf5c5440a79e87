package scontrol

import (
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
)

// TestHostileShow shows how scontrol prints other users' hostile
// strings: escaped inside their Key=Value lines, so that no value adds a
// line (which scripts reading Key=Value pairs would trust) or reaches
// the terminal raw.
func TestHostileShow(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		lines int
	}{
		// 28 Key=Value lines, then the block's indented and empty lines.
		{name: "hostile-show-job", args: []string{"show", "job", "301"}, lines: 30},
		{name: "hostile-show-job-pending", args: []string{"show", "job", "302"}, lines: 29},
		{name: "hostile-show-job-o", args: []string{"-o", "show", "job"}, lines: 2},
		{name: "hostile-show-node", args: []string{"show", "node", "gpu02"}, lines: 19},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, clitest.HostileCluster(), nil, time.UTC, tt.args...)
			if r.code != 0 || r.errOut != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
			}
			clitest.CheckTerminalSafe(t, r.out, tt.lines)
			golden(t, tt.name, r.out)
		})
	}
}

// TestHostileConfigAndPartition shows configured text (a partition
// name, config values, the controller host) with controls in it: also
// escaped, one key a line.
func TestHostileConfigAndPartition(t *testing.T) {
	fake := clitest.HostileCluster()
	fake.Partitions[0].Name = "gpu\x1b[1m\nPartitionName=fake"
	fake.Info.Config = map[string]string{
		"SlurmctldHost": "ctl\x1b]0;pwned\a(10.0.0.1)",
		"ClusterName":   "tide\nFakeKey = 1",
	}
	tests := []struct {
		name  string
		args  []string
		lines int
	}{
		{name: "hostile-show-partition", args: []string{"show", "partition"}, lines: 13},
		{name: "hostile-show-config", args: []string{"show", "config"}, lines: 5},
		{name: "hostile-ping", args: []string{"ping"}, lines: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, fake, nil, time.UTC, tt.args...)
			if r.code != 0 || r.errOut != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
			}
			clitest.CheckTerminalSafe(t, r.out, tt.lines)
			golden(t, tt.name, r.out)
		})
	}
}

// TestHostileUpdateMessages checks that the controller's per-job
// messages, which may quote a user's value, are escaped on stderr.
func TestHostileUpdateMessages(t *testing.T) {
	fake := clitest.HostileCluster()
	fake.UpdateResp = &api.CancelResponse{Results: []api.JobResult{
		{JobID: 301, Error: "Invalid account " + clitest.HostileAccount + "\nscontrol: error: forged"},
	}}
	r := run(t, fake, nil, time.UTC, "update", "JobId=301", "Account="+clitest.HostileAccount)
	want := `scontrol: error: Invalid account ml\x1b[8m\nscontrol: error: forged for job 301` + "\n"
	if r.code != 1 || r.errOut != want {
		t.Errorf("got exit %d stderr %q, want exit 1 stderr %q", r.code, r.errOut, want)
	}

	fake = clitest.HostileCluster()
	fake.Err = api.Errorf(api.ErrInvalidArgument, "Invalid partition name specified: %s", "gpu\x1b]0;pwned\a")
	r = run(t, fake, nil, time.UTC, "update", "JobId=301", "Partition=x")
	want = `scontrol: error: slurm_update error: Invalid partition name specified: gpu\x1b]0;pwned\x07` + "\n"
	if r.code != 1 || r.errOut != want {
		t.Errorf("got exit %d stderr %q, want exit 1 stderr %q", r.code, r.errOut, want)
	}
	if strings.Contains(r.errOut, "\x1b") {
		t.Errorf("stderr holds a raw escape: %q", r.errOut)
	}
}
