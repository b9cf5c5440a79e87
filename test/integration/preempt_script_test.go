package integration

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// TestPreemptScript runs scripts/preempt-e2e.sh, issue 5's end-to-end
// check (borrow, reclaim with checkpoint and requeue, debug evicted
// before training, a starving job that runs), on a private cluster the
// script starts with up.sh from the binaries this package built.
func TestPreemptScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	cmd := exec.Command("bash", "../../scripts/preempt-e2e.sh")
	cmd.Env = append(os.Environ(),
		"TIDE_BIN="+binDir,
		"TIDE_RUN="+t.TempDir(),
		"TIDE_PORT="+strconv.Itoa(freePort(t)),
	)
	out, err := cmd.CombinedOutput()
	t.Logf("preempt-e2e.sh:\n%s", out)
	if err != nil {
		t.Fatalf("preempt-e2e.sh: %v", err)
	}
}
