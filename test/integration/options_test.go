package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestSlurmOptionsOnLocalCluster drives the Slurm-named commands the way
// job libraries and workflow engines do (issue 22): abbreviated long
// options, bundled short options, options after operands, and -V, run
// through the installed links against a cluster.
func TestSlurmOptionsOnLocalCluster(t *testing.T) {
	c := newCluster(t, 1)
	id := c.submit("#!/bin/sh\nsleep 300\n", "-t", "10:00")
	c.waitState(id, api.StateRunning, 30*time.Second)
	sid := fmt.Sprint(id)

	for _, tt := range []struct {
		args []string
		want string
	}{
		// sacct --job 27 and --clusters all were refused before.
		{[]string{"sacct", "--job", sid, "--clusters", "all", "-XPn", "--form=JobID,State"}, sid + "|RUNNING\n"},
		{[]string{"squeue", "--me", "--noh", "--form", "%i %t"}, sid + " R\n"},
		{[]string{"squeue", "-hj", sid, "-o", "%i"}, sid + "\n"},
		{[]string{"squeue", "-j", sid, "-h", "--format=%i"}, sid + "\n"},
		// A running job has no priority factors to show.
		{[]string{"sprio", "-hj" + sid}, "Unable to find jobs matching user/id(s) specified\n"},
	} {
		r := c.cli(tt.args...)
		if r.code != 0 || r.out != tt.want {
			t.Errorf("%s: exit %d, stdout %q (want %q), stderr %q", strings.Join(tt.args, " "), r.code, r.out, tt.want, r.err)
		}
	}
	if r := c.cli("scontrol", "show", "job", sid, "--json", "--one"); r.code != 0 || !strings.HasPrefix(r.out, "{") {
		t.Errorf("scontrol show job --json: exit %d, %.100q, %s", r.code, r.out, r.err)
	}
	if r := c.cli("sinfo", "--sum", "-h", "--Form=NodeList"); r.code != 0 || strings.TrimSpace(r.out) != "gpu01" {
		t.Errorf("sinfo --sum: exit %d, %q, %s", r.code, r.out, r.err)
	}

	for _, name := range []string{"sbatch", "srun", "salloc", "squeue", "sinfo", "sacct", "scancel", "scontrol", "sprio", "sstat"} {
		if r := c.cli(name, "-V"); r.code != 0 || r.out != "slurm 22.05.8\n" {
			t.Errorf("%s -V: exit %d, %q, %s", name, r.code, r.out, r.err)
		}
		r := c.cli(name, "--bogus")
		if r.code != 1 || !strings.HasPrefix(r.err, name+": unrecognized option '--bogus'\n") {
			t.Errorf("%s --bogus: exit %d, stderr %q", name, r.code, r.err)
		}
	}
	if r := c.cli("tide", "version"); r.code != 0 || !strings.HasPrefix(r.out, "tide ") {
		t.Errorf("tide version: exit %d, %q", r.code, r.out)
	}

	// An option after the job id, as scripts write it.
	r := c.cli("scancel", sid, "-v")
	if r.code != 0 || r.err != "scancel: Terminating job "+sid+"\n" {
		t.Fatalf("scancel %s -v: exit %d, stderr %q", sid, r.code, r.err)
	}
	if j := c.waitTerminal(id, 30*time.Second); j.State != api.StateCancelled {
		t.Errorf("job %d ended %s, want CANCELLED", id, j.State)
	}
}
