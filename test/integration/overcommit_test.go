package integration

import (
	"regexp"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestOvercommit covers --overcommit, --mincpus and --tmp end to end
// (issue 22, Slurm's test_--overcommit and test_--mem--mincpus--tmp):
// more tasks than the node's 64 CPUs run with -O, in srun's own
// allocation and in a batch job whose sruns inherit SLURM_OVERCOMMIT;
// requests no node can hold are refused with Slurm's words; the node's
// TmpDisk (tided's tmp_disk_mb) shows in scontrol and sinfo.
func TestOvercommit(t *testing.T) {
	c := newClusterOpts(t, clusterOpts{nodes: 1, nodeYAML: "tmp_disk_mb: 2048\n"})
	const notAvail = "Requested node configuration is not available"

	t.Run("srun -n 65 --overcommit runs 65 tasks on a 64-CPU node", func(t *testing.T) {
		r := c.cli("srun", "-N", "1", "-w", "gpu01", "-n", "65", "--overcommit", "-v", "true")
		if r.code != 0 || !regexp.MustCompile(`srun: ntasks\s+: 65`).MatchString(r.err) {
			t.Fatalf("exit %d, stderr:\n%s", r.code, r.err)
		}
		r = c.cli("srun", "-N1", "-w", "gpu01", "-n65", "-O", "-l", "printenv", "SLURM_OVERCOMMIT")
		lines := strings.Split(strings.TrimSpace(r.out), "\n")
		if r.code != 0 || len(lines) != 65 || !strings.HasSuffix(lines[0], ": 1") {
			t.Fatalf("exit %d, %d lines (want 65 of SLURM_OVERCOMMIT=1):\n%s\nstderr:\n%s", r.code, len(lines), r.out, r.err)
		}
	})

	t.Run("without --overcommit 65 tasks never fit 64 CPUs", func(t *testing.T) {
		r := c.cli("srun", "-N", "1", "-w", "gpu01", "-n", "65", "true")
		if r.code == 0 || !strings.Contains(r.err, notAvail) {
			t.Fatalf("exit %d, stderr:\n%s", r.code, r.err)
		}
	})

	t.Run("a batch job with --overcommit and its sruns", func(t *testing.T) {
		script := "#!/bin/sh\necho OC=$SLURM_OVERCOMMIT\nsrun sh -c 'echo task' | wc -l\n"
		j, out := c.batchOutput(script, "-N1", "-n65", "-O")
		if j.State != api.StateCompleted || !strings.Contains(out, "OC=1\n") || !strings.Contains(out, "65\n") {
			t.Fatalf("job %s %s, output:\n%s", j.State, j.ReasonDetail, out)
		}
		if !j.Overcommit || j.AllocCPUs() != 1 || len(j.Alloc) != 1 || j.Alloc[0].Tasks != 65 {
			t.Errorf("job record: overcommit %v, allocation %+v", j.Overcommit, j.Alloc)
		}
	})

	t.Run("--mincpus", func(t *testing.T) {
		r := c.cli("srun", "--mincpus=999999", "true")
		if r.code == 0 || !strings.Contains(r.err, notAvail) {
			t.Errorf("--mincpus=999999: exit %d, stderr:\n%s", r.code, r.err)
		}
		if r := c.cli("srun", "--mincpus=1", "true"); r.code != 0 {
			t.Errorf("--mincpus=1: exit %d, stderr:\n%s", r.code, r.err)
		}
		r = c.cli("srun", "--mincpus=8", "printenv", "SLURM_CPUS_ON_NODE")
		if r.code != 0 || strings.TrimSpace(r.out) != "8" {
			t.Errorf("--mincpus=8: exit %d, SLURM_CPUS_ON_NODE %q, stderr:\n%s", r.code, r.out, r.err)
		}
	})

	t.Run("--tmp against the node's TmpDisk", func(t *testing.T) {
		for _, tmp := range []string{"999999", "2049", "3G"} {
			r := c.cli("srun", "--tmp="+tmp, "true")
			if r.code == 0 || !strings.Contains(r.err, notAvail) || !strings.Contains(r.err, "temporary disk") {
				t.Errorf("--tmp=%s: exit %d, stderr:\n%s", tmp, r.code, r.err)
			}
		}
		for _, tmp := range []string{"0", "2048", "2G"} {
			if r := c.cli("srun", "--tmp="+tmp, "true"); r.code != 0 {
				t.Errorf("--tmp=%s: exit %d, stderr:\n%s", tmp, r.code, r.err)
			}
		}
		if r := c.cli("srun", "--tmp=-1", "true"); r.code == 0 || !strings.Contains(r.err, "Invalid --tmp specification") {
			t.Errorf("--tmp=-1: exit %d, stderr:\n%s", r.code, r.err)
		}
	})

	t.Run("scontrol and sinfo show the node's TmpDisk", func(t *testing.T) {
		if r := c.cli("scontrol", "show", "node", "gpu01"); !strings.Contains(r.out, " TmpDisk=2048 ") {
			t.Errorf("scontrol show node:\n%s", r.out)
		}
		if r := c.cli("sinfo", "-h", "-o", "%d"); strings.TrimSpace(r.out) != "2048" {
			t.Errorf("sinfo %%d: %q", r.out)
		}
		if r := c.cli("scontrol", "show", "config"); !regexp.MustCompile(`MaxTasksPerNode\s+= 512\n`).MatchString(r.out) {
			t.Errorf("scontrol show config MaxTasksPerNode:\n%s", r.out)
		}
	})
}
