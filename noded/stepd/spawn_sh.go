//go:build !cgo

package stepd

import (
	"fmt"
	"os"
	"syscall"
)

// spawnTask starts the job's script in a session of its own with the
// job's files, directory and (umask >= 0) umask. SLURM_TASK_PID is the
// script's pid, known only after the fork; without cgo a one-line sh
// trampoline exports its own pid and execs the script in its place (the
// cgo build forks in C and needs no trampoline; see spawn_cgo.go).
func spawnTask(plan *Plan, files *jobFiles, umask int) (*os.Process, error) {
	tramp := taskPIDTrampoline
	if umask >= 0 {
		tramp = fmt.Sprintf("umask %04o; %s", umask, tramp)
	}
	argv := append([]string{"/bin/sh", "-c", tramp, plan.Script}, plan.Args...)
	return os.StartProcess("/bin/sh", argv, &os.ProcAttr{
		Dir: files.dir, Env: plan.Env, Files: files.std[:],
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
}

// taskPIDTrampoline is run by /bin/sh -c with the script as $0.
const taskPIDTrampoline = `export SLURM_TASK_PID=$$ TIDE_TASK_PID=$$; exec "$0" "$@"`
