// Command tide-stepd supervises one job for tided (like slurmstepd):
// tided starts "tide-stepd stepd --job-dir DIR" per job, and the
// supervisor re-runs itself as "stepd-exec" to become the job's user.
package main

import (
	"fmt"
	"os"

	"github.com/tide-hpc/tide/noded/stepd"
)

func main() {
	if err := stepd.Main(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tide-stepd:", err)
		os.Exit(1)
	}
}
