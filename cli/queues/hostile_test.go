package queues

import (
	"strings"
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
)

// TestHostileQueueName checks that a queue name with controls is
// escaped and its column sized to the escaped text, so the columns
// after it stay aligned.
func TestHostileQueueName(t *testing.T) {
	fake := clitest.SharingCluster()
	fake.Sharing.Queues[0].Name = "re\x1b[2Jsearch"
	fake.Sharing.Queues[2].Parent = "re\x1b[2Jsearch"
	fake.Sharing.Queues[3].Parent = "re\x1b[2Jsearch"
	out, errOut, code := run(t, fake)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	clitest.CheckTerminalSafe(t, out, 5)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	col := strings.Index(lines[0], "GUARANTEED")
	for _, l := range lines[1:] {
		if !strings.Contains(l, `re\x1b[2Jsearch`) && !strings.HasPrefix(l, "prod") {
			t.Errorf("line %q does not show the escaped name", l)
		}
		if l[col-1] != ' ' || l[col+len("GUARANTEED")-1] == ' ' {
			t.Errorf("line %q is not aligned under the header %q", l, lines[0])
		}
	}
}
