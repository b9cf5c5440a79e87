package noded

import (
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// reexecEnv marks a re-executed test binary: tided re-execs its own
// executable as "stepd" and "stepd-exec", which in tests is this binary,
// so TestMain runs the command instead of the tests.
const reexecEnv = "TIDE_NODED_TEST_REEXEC"

var (
	showLog = flag.Bool("tided.log", false, "print the daemon's log")
)

// testExe is a copy of the test binary in a directory every user may
// read, so that jobs of other users can exec it as "stepd-exec" (go
// test's own build directory is private to the caller).
var testExe string

func TestMain(m *testing.M) {
	if os.Getenv(reexecEnv) == "1" {
		cmd := NewCommand()
		cmd.SetArgs(os.Args[1:])
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Setenv(reexecEnv, "1")
	dir, err := copyTestBinary()
	if err != nil {
		println("copy test binary:", err.Error())
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func copyTestBinary() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "tided-test-exe-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return dir, err
	}
	in, err := os.Open(self)
	if err != nil {
		return dir, err
	}
	defer in.Close()
	testExe = filepath.Join(dir, "tided")
	out, err := os.OpenFile(testExe, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return dir, err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return dir, err
	}
	return dir, out.Close()
}

// testLogger discards the daemon's log unless -tided.log is given.
func testLogger() *slog.Logger {
	if *showLog {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", "tided")
	}
	return slog.New(slog.DiscardHandler)
}
