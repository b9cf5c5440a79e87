package sacct

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/cli/clitest"
)

func runHostile(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	f, buf := clitest.Factory(clitest.HostileCluster(), nil)
	f.UID = func() int { return 0 }
	return clitest.Run(newCmd(f, time.UTC), buf, "sacct", args)
}

// TestHostileStrings shows sacct's table and parsable layouts of jobs
// whose names and paths carry terminal escapes and newlines: escaped,
// so that a name cannot forge a row (job 303's tries to), and cut to
// the column on the escaped text.
func TestHostileStrings(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		lines int
	}{
		// Header, rule, then per job its row and batch step row (302 is
		// pending and has none).
		{name: "hostile-table", args: []string{"-a", "-o", "JobID,JobName%30,Account,State,Comment%-40,Constraints"}, lines: 7},
		{name: "hostile-table-default", args: []string{"-a"}, lines: 7},
		{name: "hostile-parsable2", args: []string{"-a", "-P", "-o", "JobID,JobName,Account,Comment,Constraints,WorkDir,StdOut"}, lines: 6},
		{name: "hostile-parsable", args: []string{"-a", "-p", "-X", "-o", "JobID,JobName,Comment"}, lines: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runHostile(t, tt.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			clitest.CheckTerminalSafe(t, out, tt.lines)
			golden(t, tt.name, out)
		})
	}
}

// TestHostileDelimiter checks that the caller's own delimiter is
// printed as given, even a tab, while values are escaped.
func TestHostileDelimiter(t *testing.T) {
	out, _, code := runHostile(t, "-a", "-X", "-n", "-P", "--delimiter=\t", "-o", "JobID,JobName")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	want := "301\tx\\x1b[2J\\x1b]0;pwned\\x07\\nFAKE LINE\n" +
		"302\t训练任务\n" +
		"303\tdone\\n999 FAKE COMPLETED\n"
	if out != want {
		t.Errorf("got\n%q\nwant\n%q", out, want)
	}
}

// TestHostileJSON checks that --json keeps the values exact.
func TestHostileJSON(t *testing.T) {
	out, _, code := runHostile(t, "-a", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var doc jsonDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]jsonJob{}
	for _, j := range doc.Jobs {
		got[j.JobID] = j
	}
	for _, c := range []struct{ field, got, want string }{
		{"301 name", got[301].Name, clitest.HostileName},
		{"301 account", got[301].Account, clitest.HostileAccount},
		{"301 comment", got[301].Comment.Job, strings.ToValidUTF8(clitest.HostileComment, "\uFFFD")},
		{"301 working_directory", got[301].WorkingDirectory, clitest.HostileWorkDir},
		{"301 constraints", got[301].Constraints, clitest.HostileConstraint},
		{"302 name", got[302].Name, clitest.ChineseName},
		{"303 name", got[303].Name, clitest.HostileFinishedName},
	} {
		if c.got != c.want {
			t.Errorf("JSON %s = %q, want %q", c.field, c.got, c.want)
		}
	}
	if strings.ContainsAny(out, "\x1b\x7f\u009b\u202e\u2066") {
		t.Errorf("JSON holds a raw control:\n%s", out)
	}
}
