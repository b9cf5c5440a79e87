package stepd

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
)

// Main runs "stepd --job-dir DIR" (the supervisor) or "stepd-exec
// --job-dir DIR" (the exec child), the command lines tided and the
// supervisor use; tided's own binary accepts the same ones.
func Main(args []string) error {
	if len(args) != 3 || args[1] != "--job-dir" || args[2] == "" {
		return errors.New("usage: tide-stepd stepd|stepd-exec --job-dir DIR (started by tided)")
	}
	switch args[0] {
	case "stepd":
		log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "tided", "role", "stepd")
		return RunSupervisor(args[2], log)
	case "stepd-exec":
		// The plan arrives on stdin; the directory only names the job in
		// ps output.
		return RunExec()
	}
	return fmt.Errorf("unknown command %q (started by tided: stepd or stepd-exec)", args[0])
}
