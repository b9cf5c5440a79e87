// Command tide-stepd supervises jobs for tided (like slurmstepd): by
// default one "tide-stepd stepd-serve" serves all of a node's jobs, or
// (supervisor: per-job) tided starts "tide-stepd stepd --job-dir DIR"
// per job; either re-runs itself as "stepd-exec" to become a job's user.
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
