package squeue

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tide-hpc/tide/cli/clitest"
)

// TestHostileStrings shows how squeue prints a job whose name, comment,
// account, constraint and paths carry terminal escapes, newlines, C1
// and bidi controls and invalid bytes: escaped, one line per job, and
// the Chinese name of another job as it is.
func TestHostileStrings(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		lines int
	}{
		{name: "hostile-default", lines: 3},
		{name: "hostile-o-j", args: []string{"-o", "%j"}, lines: 3},
		{name: "hostile-o-fields", args: []string{"-o", "%i|%.8j|%20j|%a|%k|%f|%Z|%R"}, lines: 3},
		{name: "hostile-O-long", args: []string{"-O", "JobID:5,Name:.12,Comment:30,StdOut:40,Account:12,ReasonList"}, lines: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := exec(t, clitest.HostileCluster(), nil, tt.args...)
			if err != nil || errOut != "" {
				t.Fatalf("squeue %v: %v (stderr %q)", tt.args, err, errOut)
			}
			clitest.CheckTerminalSafe(t, out, tt.lines)
			golden(t, tt.name, out)
		})
	}
}

// TestHostileWidth checks that widths and cuts apply to the escaped
// text: %.8j is 8 bytes wide whatever the name, and a cut of the
// Chinese name falls back to a character boundary and pads instead.
func TestHostileWidth(t *testing.T) {
	tests := []struct {
		format string
		width  int
	}{
		{"%.8j|", 8}, {"%8j|", 8}, {"%.30j|", 30}, {"%30j|", 30}, {"%.5j|", 5}, {"%7j|", 7},
	}
	for _, tt := range tests {
		out, _, err := exec(t, clitest.HostileCluster(), nil, "-h", "-o", tt.format)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if i := strings.IndexByte(line, '|'); i != tt.width {
				t.Errorf("-o %q: line %q has its bar at byte %d, want %d", tt.format, line, i, tt.width)
			}
			if !utf8.ValidString(line) {
				t.Errorf("-o %q: line %q is not valid UTF-8", tt.format, line)
			}
		}
		clitest.CheckTerminalSafe(t, out, 2)
	}
}

// TestHostileJSON checks that --json keeps every value exact.
func TestHostileJSON(t *testing.T) {
	out, _, err := exec(t, clitest.HostileCluster(), nil, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Jobs []struct {
			JobID    uint64 `json:"job_id"`
			Name     string `json:"name"`
			Comment  string `json:"comment"`
			Account  string `json:"account"`
			WorkDir  string `json:"current_working_directory"`
			Features string `json:"features"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Jobs) != 2 {
		t.Fatalf("got %d jobs, want 2", len(doc.Jobs))
	}
	j := doc.Jobs[0]
	if j.JobID != 301 {
		j = doc.Jobs[1]
	}
	for _, c := range []struct{ field, got, want string }{
		{"name", j.Name, clitest.HostileName},
		{"comment", j.Comment, strings.ToValidUTF8(clitest.HostileComment, "\uFFFD")},
		{"account", j.Account, clitest.HostileAccount},
		{"current_working_directory", j.WorkDir, clitest.HostileWorkDir},
		{"features", j.Features, clitest.HostileConstraint},
	} {
		if c.got != c.want {
			t.Errorf("JSON %s = %q, want %q", c.field, c.got, c.want)
		}
	}
	// The document itself is safe to print: encoding/json escapes C0,
	// and C1 and bidi controls are written as \u escapes.
	for i, l := range strings.Split(out, "\n") {
		if strings.ContainsAny(l, "\x1b\x7f\u009b\u202e\u2066") {
			t.Errorf("JSON line %d holds a raw control: %q", i+1, l)
		}
	}
}
