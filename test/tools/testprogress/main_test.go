package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// stream is go test -json's output for: a package whose test fails in
// a subtest and whose other tests pass and skip, one that does not
// build, one without tests, and one that passes (after a line that is
// not JSON).
const stream = `{"ImportPath":"example.com/m/b [example.com/m/b.test]","Action":"build-output","Output":"# example.com/m/b [example.com/m/b.test]\n"}
{"ImportPath":"example.com/m/b [example.com/m/b.test]","Action":"build-output","Output":"b/b_test.go:3:27: undefined: undefined\n"}
{"ImportPath":"example.com/m/b [example.com/m/b.test]","Action":"build-fail"}
{"Action":"start","Package":"example.com/m/a"}
{"Action":"start","Package":"example.com/m/b"}
{"Action":"output","Package":"example.com/m/b","Output":"FAIL\texample.com/m/b [build failed]\n"}
{"Action":"fail","Package":"example.com/m/b","Elapsed":0,"FailedBuild":"example.com/m/b [example.com/m/b.test]"}
{"Action":"run","Package":"example.com/m/a","Test":"TestOK"}
{"Action":"output","Package":"example.com/m/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestOK","Output":"hello\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}
{"Action":"pass","Package":"example.com/m/a","Test":"TestOK","Elapsed":0}
{"Action":"run","Package":"example.com/m/a","Test":"TestBad"}
{"Action":"output","Package":"example.com/m/a","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"run","Package":"example.com/m/a","Test":"TestBad/sub"}
{"Action":"output","Package":"example.com/m/a","Test":"TestBad/sub","Output":"=== RUN   TestBad/sub\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestBad/sub","Output":"    a_test.go:4: boom\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestBad/sub","Output":"--- FAIL: TestBad/sub (0.25s)\n"}
{"Action":"fail","Package":"example.com/m/a","Test":"TestBad/sub","Elapsed":0.25}
{"Action":"output","Package":"example.com/m/a","Test":"TestBad","Output":"--- FAIL: TestBad (0.25s)\n"}
{"Action":"fail","Package":"example.com/m/a","Test":"TestBad","Elapsed":0.25}
{"Action":"run","Package":"example.com/m/a","Test":"TestSkip"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/a","Test":"TestSkip","Elapsed":0}
{"Action":"output","Package":"example.com/m/a","Output":"FAIL\n"}
{"Action":"output","Package":"example.com/m/a","Output":"FAIL\texample.com/m/a\t0.004s\n"}
{"Action":"fail","Package":"example.com/m/a","Elapsed":0.5}
{"Action":"start","Package":"example.com/m/none"}
{"Action":"output","Package":"example.com/m/none","Output":"?   \texample.com/m/none\t[no test files]\n"}
{"Action":"skip","Package":"example.com/m/none","Elapsed":0}
go: warning: not JSON
{"Action":"start","Package":"example.com/m/c"}
{"Action":"run","Package":"example.com/m/c","Test":"TestC"}
{"Action":"output","Package":"example.com/m/c","Test":"TestC","Output":"lots of\noutput\n"}
{"Action":"pass","Package":"example.com/m/c","Test":"TestC","Elapsed":1.5}
{"Action":"pass","Package":"example.com/m/c","Elapsed":12.25}
`

func TestReporter(t *testing.T) {
	var b strings.Builder
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newReporter(&b, func() time.Time { return now }, "example.com/m")
	r.read(strings.NewReader(stream))
	now = now.Add(95 * time.Second)
	r.summary()
	want := `FAIL ./b                                          0.0s  [build failed]
    # example.com/m/b [example.com/m/b.test]
    b/b_test.go:3:27: undefined: undefined
--- FAIL ./a TestBad/sub (0.2s)
        a_test.go:4: boom
--- FAIL ./a TestBad (0.2s)
FAIL ./a                                          0.5s  (1 skipped)
go: warning: not JSON
ok   ./c                                         12.2s
FAIL: 2 of 3 packages failed in 1m35s: ./b ./a
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if !r.failed() {
		t.Error("failed() = false after failures")
	}
}

// TestTick: while nothing has finished it says the build is under way;
// then it names a long package's counts and its longest-running tests;
// and it stays quiet while lines come often enough.
func TestTick(t *testing.T) {
	var b strings.Builder
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newReporter(&b, func() time.Time { return now }, "example.com/m")
	every := 30 * time.Second
	step := func(d time.Duration, events string) string {
		now = now.Add(d)
		b.Reset()
		r.read(strings.NewReader(events))
		r.tick(every)
		return b.String()
	}
	if got := step(10*time.Second, ""); got != "" {
		t.Errorf("after 10s: %q, want nothing", got)
	}
	if got, want := step(65*time.Second, ""), "... building the tests (1m15s so far; the first build takes a few minutes)\n"; got != want {
		t.Errorf("during the build: %q, want %q", got, want)
	}
	got := step(31*time.Second, `{"Action":"start","Package":"example.com/m/test/integration"}
{"Action":"run","Package":"example.com/m/test/integration","Test":"TestA"}
{"Action":"pass","Package":"example.com/m/test/integration","Test":"TestA","Elapsed":3}
{"Action":"run","Package":"example.com/m/test/integration","Test":"TestB"}
{"Action":"run","Package":"example.com/m/test/integration","Test":"TestB/sub"}
`)
	if got != "" {
		t.Errorf("a package just started: %q, want nothing", got)
	}
	now = now.Add(5 * time.Second)
	r.read(strings.NewReader(`{"Action":"run","Package":"example.com/m/test/integration","Test":"TestC"}` + "\n"))
	if got, want := step(40*time.Second, ""), "... ./test/integration: 1 passed; running TestB (45s), TestC (40s); 45s so far\n"; got != want {
		t.Errorf("a long package: %q, want %q", got, want)
	}
	if got := step(10*time.Second, ""); got != "" {
		t.Errorf("10s after a line: %q, want nothing", got)
	}
}

// TestRunExitStatus runs real commands: the command's status wins, and
// a failure it did not report still fails.
func TestRunExitStatus(t *testing.T) {
	dir := t.TempDir()
	pass := filepath.Join(dir, "pass.json")
	os.WriteFile(pass, []byte(`{"Action":"pass","Package":"p","Elapsed":1}`+"\n"), 0o644)
	fail := filepath.Join(dir, "fail.json")
	os.WriteFile(fail, []byte(`{"Action":"fail","Package":"p","Elapsed":1}`+"\n"), 0o644)
	for _, tc := range []struct {
		name string
		argv []string
		want int
	}{
		{"pass", []string{"cat", pass}, 0},
		{"the command's status", []string{"sh", "-c", "cat " + pass + "; exit 3"}, 3},
		{"a failure the command did not report", []string{"cat", fail}, 1},
		{"no such command", []string{filepath.Join(dir, "nothing")}, 1},
	} {
		var out, errOut strings.Builder
		if got := run(tc.argv, time.Hour, &out, &errOut); got != tc.want {
			t.Errorf("%s: exit %d, want %d (out %q, err %q)", tc.name, got, tc.want, out.String(), errOut.String())
		}
	}
}
