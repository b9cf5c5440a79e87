package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestArbitraryDistribution: -m arbitrary with SLURM_HOSTFILE places
// rank i on the file's i-th host, for a job's own allocation and for a
// step inside a job (Slurm's test 116_5).
func TestArbitraryDistribution(t *testing.T) {
	c := stepCluster(t)
	dir := c.workDir()
	hf := filepath.Join(dir, "hosts.arb")
	os.WriteFile(hf, []byte("gpu02\ngpu01\n"), 0o644)
	cmd := c.command(nil, "srun", "-l", "-m", "arbitrary", "printenv", "SLURMD_NODENAME")
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, "SLURM_HOSTFILE="+hf)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "0: gpu02") || !strings.Contains(string(out), "1: gpu01") {
		t.Fatalf("srun -m arbitrary: %v\n%q", err, out)
	}

	os.WriteFile(filepath.Join(dir, "hosts.step"), []byte("gpu02,gpu02\ngpu01\ngpu01 # the job's 4 tasks\n"), 0o644)
	j, log := c.batchOutput("#!/bin/sh\nSLURM_HOSTFILE=hosts.step srun -l -m arbitrary printenv SLURMD_NODENAME 2>&1 | sort\n", "-N2", "--ntasks-per-node=2")
	for _, want := range []string{"0: gpu02", "1: gpu02", "2: gpu01", "3: gpu01"} {
		if j.State != api.StateCompleted || !strings.Contains(log, want) {
			t.Fatalf("job %s, output lacks %q:\n%s", j.State, want, log)
		}
	}
}
