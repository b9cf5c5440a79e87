//go:build !cgo

package stepd

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// spawnTask starts the job's script in a session of its own with the
// job's files, directory and (umask >= 0) umask, in the job's cgroup
// (join). SLURM_TASK_PID is the script's pid, known only after the fork;
// without cgo a one-line sh trampoline exports its own pid, writes it to
// the cgroup's cgroup.procs files and execs the script in its place (the
// cgo build forks in C and needs no trampoline; see spawn_cgo.go).
func spawnTask(plan *Plan, files *jobFiles, umask int, join cgroupJoin) (*os.Process, error) {
	tramp := taskPIDTrampoline
	if umask >= 0 {
		tramp = fmt.Sprintf("umask %04o; %s", umask, tramp)
	}
	if len(join.procs) > 0 {
		var b strings.Builder
		for _, f := range join.procs {
			if join.strict {
				fmt.Fprintf(&b, "echo $$ >%s || exit 127; ", shellQuote(f.Name()))
			} else {
				fmt.Fprintf(&b, "echo $$ 2>/dev/null >%s; ", shellQuote(f.Name()))
			}
		}
		tramp = b.String() + tramp
	}
	argv := append([]string{"/bin/sh", "-c", tramp, plan.Script}, plan.Args...)
	p, err := os.StartProcess("/bin/sh", argv, &os.ProcAttr{
		Dir: files.dir, Env: plan.Env, Files: files.std[:],
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	if err == nil {
		// Best effort: the trampoline may exec the script before
		// these land (the cgo build sets them before exec).
		for _, r := range plan.Rlimits {
			var old unix.Rlimit
			if unix.Prlimit(p.Pid, r.Resource, nil, &old) == nil {
				_ = unix.Prlimit(p.Pid, r.Resource, &unix.Rlimit{Cur: min(r.Cur, old.Max), Max: old.Max}, nil)
			}
		}
	}
	return p, err
}

// taskPIDTrampoline is run by /bin/sh -c with the script as $0.
const taskPIDTrampoline = `export SLURM_TASK_PID=$$ TIDE_TASK_PID=$$; exec "$0" "$@"`

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
