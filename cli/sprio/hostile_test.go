package sprio

import (
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
)

// TestHostileStrings shows a pending job whose queue (account) and
// diagnosis carry terminal controls: escaped, and cut on the escaped
// text in the long layout.
func TestHostileStrings(t *testing.T) {
	fake := clitest.HostileCluster()
	fake.JobRecs[1].Account = clitest.HostileAccount
	out, errOut, code := run(t, fake, "-l")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	clitest.CheckTerminalSafe(t, out, 2)
	goldenpkg.Check(t, "hostile", out)
}
