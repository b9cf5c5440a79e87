// Command tide is Tide's multi-call CLI: sbatch, squeue, scancel, sinfo,
// scontrol and sacct are links to it.
//
// A command lives for milliseconds: the runtime's watch for a changed CPU
// limit (a goroutine, so one more thread started at every run) never gets
// to act, and scripts run sbatch in loops of thousands.
//
//go:debug updatemaxprocs=0
package main

import (
	"os"
	"runtime/debug"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/root"
)

func main() {
	// Every command is a short-lived process that allocates a few
	// megabytes at most (squeue over 100,000 jobs: tens), and scripts run
	// sbatch and squeue in loops: collecting garbage that the exit frees
	// anyway costs more than it saves. The memory limit still makes the
	// collector run if a command ever grows large. (GOMAXPROCS stays as
	// it is: lowering it from main stops the world and starts a thread,
	// which costs a short command more than the idle P it saves.)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(-1)
		debug.SetMemoryLimit(512 << 20)
	}
	os.Exit(root.Main(os.Args, cmdutil.New()))
}
