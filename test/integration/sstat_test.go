package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// spinStep holds 50 MB in the shell's memory and keeps a CPU busy until
// the file "stop" appears in the work dir.
const spinStep = `x=$(head -c 50000000 /dev/zero | tr '\0' a)
while [ ! -e stop ]; do :; done
echo ${#x}
`

// TestSstat runs a batch job whose srun step burns CPU and holds
// memory: squeue -s lists the batch step and step 0 while it runs,
// sstat shows what step 0 used so far once the node sampled it (every
// acct_gather_frequency), and once the step ended sstat says it is not
// running any more.
func TestSstat(t *testing.T) {
	c := newClusterOpts(t, clusterOpts{nodes: 1, nodeYAML: "acct_gather_frequency: 1s\n"})
	c.writeWork("spin.sh", spinStep)
	script := fmt.Sprintf("#!/bin/sh\nexport PATH=%s:$PATH\nsrun -n1 -J spin sh ./spin.sh\n", binDir)
	id := c.submit(script, "-o", "/dev/null")
	// The step must not outlive a failed test.
	defer c.writeWork("stop", "")
	c.waitState(id, api.StateRunning, 60*time.Second)
	step := fmt.Sprintf("%d.0", id)

	t.Run("squeue -s", func(t *testing.T) {
		defer c.as(t)()
		var r result
		c.eventually(30*time.Second, "squeue -s lists step 0", func() bool {
			r = c.cli("squeue", "-s", "-h", "-o", "%i %j %A %N", "-j", fmt.Sprint(id))
			return r.code == 0 && strings.Contains(r.out, step+" spin ")
		})
		want := fmt.Sprintf("%s spin 1 gpu01\n%d.batch batch 1 gpu01\n", step, id)
		if r.out != want {
			t.Errorf("squeue -s -j %d: %q, want %q", id, r.out, want)
		}
		// The default format, with its header.
		r = c.cli("squeue", "--steps="+step)
		lines := strings.Split(strings.TrimRight(r.out, "\n"), "\n")
		if r.code != 0 || len(lines) != 2 || strings.Fields(lines[0])[0] != "STEPID" || strings.Fields(lines[1])[0] != step {
			t.Errorf("squeue --steps=%s: exit %d, %q (stderr %q)", step, r.code, r.out, r.err)
		}
	})

	t.Run("sstat while the step runs", func(t *testing.T) {
		defer c.as(t)()
		var f []string
		c.eventually(30*time.Second, "a usage sample with a second of CPU and the 50 MB", func() bool {
			r := c.cli("sstat", "-n", "-P", "-j", step, "-o", "JobID,AveCPU,MaxRSS,MaxRSSNode,MaxRSSTask,NTasks,TRESUsageInTot")
			f = strings.Split(strings.TrimSpace(r.out), "|")
			return r.code == 0 && len(f) == 7 && f[1] != "" && f[2] != "" &&
				parseCPU(t, f[1]) >= time.Second && parseSize(t, f[2]) >= 45e6
		})
		t.Logf("sstat: %q", f)
		if f[0] != step || f[3] != "gpu01" || f[4] != "0" || f[5] != "1" || !strings.Contains(f[6], "mem=") {
			t.Errorf("sstat -j %s: %q", step, f)
		}
		// A job without a step stands for its lowest numbered srun step;
		// -a adds the batch step.
		r := c.cli("sstat", "-n", "-P", "-o", "JobID", "-j", fmt.Sprint(id))
		if r.code != 0 || r.out != step+"\n" {
			t.Errorf("sstat -j %d: %q (exit %d, %q)", id, r.out, r.code, r.err)
		}
		r = c.cli("sstat", "-a", "-n", "-P", "-o", "JobID", "-j", fmt.Sprint(id))
		if want := fmt.Sprintf("%d.batch\n%s\n", id, step); r.code != 0 || r.out != want {
			t.Errorf("sstat -a -j %d: %q, want %q (exit %d, %q)", id, r.out, want, r.code, r.err)
		}
		// The default fields, with the header and its dashes.
		r = c.cli("sstat", "-j", step)
		lines := strings.Split(strings.TrimRight(r.out, "\n"), "\n")
		if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "JobID ") || !strings.HasPrefix(lines[2], step+" ") {
			t.Errorf("sstat -j %s: exit %d, %q (stderr %q)", step, r.code, r.out, r.err)
		}
	})

	t.Run("after the step", func(t *testing.T) {
		defer c.as(t)()
		c.writeWork("stop", "")
		if j := c.waitTerminal(id, 60*time.Second); j.State != api.StateCompleted {
			t.Fatalf("job %d %s %s", id, j.State, j.Exit)
		}
		r := c.cli("sstat", "-n", "-P", "-j", step)
		if want := fmt.Sprintf("sstat: error: StepId=%s not found running.\n", step); r.code != 0 || r.out != "" || r.err != want {
			t.Errorf("sstat -j %s after the job: exit %d, %q, stderr %q; want stderr %q", step, r.code, r.out, r.err, want)
		}
		if r := c.cli("squeue", "-s", "-h", "-j", fmt.Sprint(id)); r.code != 0 || r.out != "" {
			t.Errorf("squeue -s -j %d after the job: exit %d, %q (%q)", id, r.code, r.out, r.err)
		}
	})
}
