package events

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/ctld/api"
)

// TestHostileTrail shows event messages and audit details that quote a
// hostile job name and comment: escaped, one line per record, columns
// intact (a raw tab would have split a cell).
func TestHostileTrail(t *testing.T) {
	r := run(t, clitest.HostileCluster(), newEventsCmd, "301")
	if r.code != 0 || r.errOut != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
	}
	clitest.CheckTerminalSafe(t, r.out, 4)
	golden(t, "hostile-events", r.out)

	r = run(t, clitest.HostileCluster(), newAuditCmd)
	if r.code != 0 || r.errOut != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
	}
	clitest.CheckTerminalSafe(t, r.out, 2)
	golden(t, "hostile-audit", r.out)
}

// TestHostileTrailJSON checks that --json keeps the messages exact.
func TestHostileTrailJSON(t *testing.T) {
	r := run(t, clitest.HostileCluster(), newEventsCmd, "--json", "301")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.errOut)
	}
	var evs []api.Event
	if err := json.Unmarshal([]byte(r.out), &evs); err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[0].Message != "name "+clitest.HostileName ||
		evs[1].Message != "Comment="+strings.ToValidUTF8(clitest.HostileComment, "\uFFFD") {
		t.Errorf("JSON messages are not exact: %+v", evs)
	}
	if strings.ContainsAny(r.out, "\x1b\u009b\u202e") {
		t.Errorf("JSON holds a raw control:\n%s", r.out)
	}
}
