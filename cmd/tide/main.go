// Command tide is Tide's multi-call CLI: sbatch, squeue, scancel, sinfo,
// scontrol and sacct are links to it.
package main

import (
	"os"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/root"
)

func main() {
	os.Exit(root.Main(os.Args, cmdutil.New()))
}
