package stepd

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// DefaultIdle is how long the shared supervisor waits without jobs
// before it exits.
const DefaultIdle = 30 * time.Second

// Main runs "stepd --job-dir DIR" (the supervisor of one job),
// "stepd-exec --job-dir DIR" (the exec child) or "stepd-serve --socket
// PATH [--idle DURATION]" (the shared supervisor), the command lines
// tided and the supervisor use; tided's own binary accepts the same ones.
func Main(args []string) error {
	usage := errors.New("usage: tide-stepd stepd|stepd-exec --job-dir DIR, or tide-stepd stepd-serve --socket PATH [--idle DURATION] (started by tided)")
	if len(args) == 0 {
		return usage
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "tided", "role", "stepd")
	if args[0] == "stepd-serve" {
		sock, idle, err := serveFlags(args[1:])
		if err != nil {
			return fmt.Errorf("%w\n%v", err, usage)
		}
		return Serve(sock, idle, log)
	}
	if len(args) != 3 || args[1] != "--job-dir" || args[2] == "" {
		return usage
	}
	switch args[0] {
	case "stepd":
		return RunSupervisor(args[2], log)
	case "stepd-exec":
		// The plan arrives on stdin; the directory only names the job in
		// ps output.
		return RunExec()
	}
	return fmt.Errorf("unknown command %q (started by tided: stepd, stepd-exec or stepd-serve)", args[0])
}

// serveFlags parses "--socket PATH [--idle DURATION]".
func serveFlags(args []string) (sock string, idle time.Duration, err error) {
	idle = DefaultIdle
	for i := 0; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return "", 0, fmt.Errorf("%s needs a value", args[i])
		}
		switch args[i] {
		case "--socket":
			sock = args[i+1]
		case "--idle":
			if idle, err = time.ParseDuration(args[i+1]); err != nil || idle <= 0 {
				return "", 0, fmt.Errorf("bad --idle %q: a positive duration such as 30s", args[i+1])
			}
		default:
			return "", 0, fmt.Errorf("unknown flag %s", args[i])
		}
	}
	if sock == "" {
		return "", 0, errors.New("--socket is required")
	}
	return sock, idle, nil
}
