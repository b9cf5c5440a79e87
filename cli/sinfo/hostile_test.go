package sinfo

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/cli/clitest"
)

// TestHostileReason shows a node reason that carries an escape sequence
// and a forged row: escaped in every layout, and an auto-sized column
// (%#E) sized to the escaped text.
func TestHostileReason(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		lines int
	}{
		{name: "hostile-R", args: []string{"-R"}, lines: 2},
		{name: "hostile-N-l", args: []string{"-N", "-l"}, lines: 4},
		{name: "hostile-auto", args: []string{"-N", "-o", "%#E|%N"}, lines: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := exec(t, clitest.HostileCluster(), tt.args...)
			if err != nil || errOut != "" {
				t.Fatalf("sinfo %v: %v (stderr %q)", tt.args, err, errOut)
			}
			clitest.CheckTerminalSafe(t, out, tt.lines)
			golden(t, tt.name, out)
		})
	}
}

// TestHostileReasonJSON checks that --json keeps the reason exact.
func TestHostileReasonJSON(t *testing.T) {
	out, _, err := exec(t, clitest.HostileCluster(), "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Nodes []struct {
			Name   string `json:"name"`
			Reason string `json:"reason"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range doc.Nodes {
		if n.Name == "gpu02" {
			found = true
			if n.Reason != clitest.HostileReason {
				t.Errorf("JSON reason = %q, want %q", n.Reason, clitest.HostileReason)
			}
		}
	}
	if !found {
		t.Fatalf("no gpu02 in %s", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("JSON holds a raw escape")
	}
}
