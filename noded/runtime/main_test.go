package runtime

import (
	"flag"
	"log/slog"
	"os"
	"testing"

	"github.com/tide-hpc/tide/noded/stepd"
)

// reexecEnv marks a re-executed test binary: the process runtime runs its
// executable as the supervisor ("stepd", "stepd-serve", "stepd-exec"),
// which in these tests is this binary, so TestMain runs the supervisor
// instead of the tests.
const reexecEnv = "TIDE_RUNTIME_TEST_REEXEC"

var showLog = flag.Bool("runtime.log", false, "print the runtimes' log")

// testExe is the test binary, run as the supervisor.
var testExe string

func TestMain(m *testing.M) {
	if os.Getenv(reexecEnv) == "1" {
		if err := stepd.Main(os.Args[1:]); err != nil {
			os.Stderr.WriteString("supervisor: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Setenv(reexecEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		println("find test binary:", err.Error())
		os.Exit(2)
	}
	testExe = exe
	os.Exit(m.Run())
}

// testLogger discards the log unless -runtime.log is given.
func testLogger() *slog.Logger {
	if *showLog {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
