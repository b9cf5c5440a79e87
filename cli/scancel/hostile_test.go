package scancel

import (
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
)

// TestHostileStrings checks -i's question, which shows another user's
// job name to the operator answering it, and the controller's per-job
// messages: both escaped.
func TestHostileStrings(t *testing.T) {
	fake := clitest.HostileCluster()
	fake.CancelResp = &api.CancelResponse{Results: []api.JobResult{
		{JobID: 301, Error: "Job " + clitest.HostileName + " is locked"},
	}}
	out, errOut, _ := exec(t, fake, "y\nn\n", "-i", "-u", "mallory,alice")
	wantOut := `Cancel job_id=301 name=x\x1b[2J\x1b]0;pwned\x07\nFAKE LINE partition=gpu [y/n]? ` +
		"Cancel job_id=302 name=训练任务 partition=gpu [y/n]? "
	if out != wantOut {
		t.Errorf("stdout = %q, want %q", out, wantOut)
	}
	wantErr := `scancel: error: Kill job error on job id 301: Job x\x1b[2J\x1b]0;pwned\x07\nFAKE LINE is locked` + "\n"
	if errOut != wantErr {
		t.Errorf("stderr = %q, want %q", errOut, wantErr)
	}
}
