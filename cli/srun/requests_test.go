package srun

import (
	"testing"
	"time"
)

// TestParseArgsTasksPerNodeAlias: srun and salloc read sbatch's table,
// so Slurm's --tasks-per-node spelling of --ntasks-per-node works for
// them too (issue 22).
func TestParseArgsTasksPerNodeAlias(t *testing.T) {
	in := ParseInput{Environ: []string{"HOME=/h"}, Cwd: "/work", Host: "login1", Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, args := range [][]string{
		{"-N2", "--tasks-per-node=4", "hostname"},
		{"-N2", "--tasks-per-node", "4", "hostname"},
	} {
		a, err := ParseArgs(args, in)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if a.Spec.TasksPerNode != 4 || a.Spec.Nodes != 2 || len(a.Argv) != 1 {
			t.Errorf("%q: tasks per node %d, nodes %d, argv %q", args, a.Spec.TasksPerNode, a.Spec.Nodes, a.Argv)
		}
	}
}
