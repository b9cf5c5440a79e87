// Command tide-sim is the trace-driven simulator behind "tide sim" (tide
// hands over to it, so that the simulator's weight stays out of every
// sbatch and squeue): it replays a job trace through the production
// scheduling core and compares policies.
package main

import (
	"os"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/root"
	"github.com/tide-hpc/tide/cli/sim"
)

func main() {
	f := cmdutil.New()
	os.Exit(root.Run(sim.NewCmd(f), os.Args[1:], "tide sim", f))
}
