package integration

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestReconfigure edits the running controller's tide.yaml and has it
// re-read the file, as an operator would: with `scontrol reconfigure`
// (abbreviated too) and with SIGHUP. A running job keeps running
// throughout; a queue limit and a timeout take effect, and show config
// shows the new value; a user who is not an operator is refused, and so
// are a key that needs a restart and a broken file, which change
// nothing; a SIGHUP with a broken file leaves the daemon serving.
func TestReconfigure(t *testing.T) {
	c := newClusterOpts(t, clusterOpts{nodes: 1, ctldYAML: "queues:\n  - {name: ml}\n"})
	path := filepath.Join(c.dir, "tide.yaml")
	rewrite := func(old, new string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(string(b), old) != 1 {
			t.Fatalf("tide.yaml holds %q %d times:\n%s", old, strings.Count(string(b), old), b)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reconfigure := func(args ...string) result {
		t.Helper()
		return c.cli(append([]string{"scontrol"}, args...)...)
	}
	killWait := func() string {
		t.Helper()
		r := c.cli("scontrol", "show", "config")
		if r.code != 0 {
			t.Fatalf("show config: exit %d: %s", r.code, r.err)
		}
		return regexp.MustCompile(`(?m)^KillWait\s+= (.*)$`).FindStringSubmatch(r.out)[1]
	}
	stillRunning := func(id uint64) {
		t.Helper()
		if j := c.job(id); j.State != api.StateRunning {
			t.Fatalf("job %d is %s after the reload, want RUNNING", id, j.State)
		}
	}

	id := c.submit("#!/bin/sh\nsleep 300\n", "-A", "ml")
	c.waitState(id, api.StateRunning, 30*time.Second)

	// Slurm's test_108_4: as the operator, exit 0 and nothing printed.
	if r := reconfigure("reconfigure"); r.code != 0 || r.out != "" || r.err != "" {
		t.Fatalf("scontrol reconfigure of the same file: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	stillRunning(id)

	// A queue limit and a timeout, by the abbreviated command.
	rewrite("  - {name: ml}", "  - {name: ml, max_submit_per_user: 1}")
	rewrite("kill_wait: 2s", "kill_wait: 3s")
	if r := reconfigure("reconfig"); r.code != 0 || r.out != "" || r.err != "" {
		t.Fatalf("scontrol reconfig: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	stillRunning(id)
	if got := killWait(); got != "3 sec" {
		t.Errorf("show config KillWait = %q after the reload, want 3 sec", got)
	}
	r := c.cli("sbatch", "-A", "ml", "--wrap", "true")
	if r.code == 0 || !strings.Contains(r.err, "MaxSubmitJobs") {
		t.Errorf("second job in ml with max_submit_per_user 1: exit %d, out %q, err %q; want refused (MaxSubmitJobs)", r.code, r.out, r.err)
	}

	// Only operators may.
	if os.Getuid() == 0 {
		r := c.cliAs(nobodyCred, c.workDir(), "scontrol", "reconfigure")
		if r.code != 1 || !strings.Contains(r.err, "scontrol: error: slurm_reconfigure error: Access/permission denied") {
			t.Errorf("scontrol reconfigure as nobody: exit %d, err %q; want 1 and Access/permission denied", r.code, r.err)
		}
	}

	// A key that needs a restart refuses the whole file.
	rewrite("cluster_name: it", "cluster_name: other")
	rewrite("kill_wait: 3s", "kill_wait: 4s")
	r = reconfigure("reconfigure")
	if r.code != 1 || !strings.Contains(r.err, "scontrol: error: slurm_reconfigure error: cluster_name changed: restart tidectld to apply") {
		t.Errorf("reconfigure with a new cluster_name: exit %d, err %q; want refused naming cluster_name", r.code, r.err)
	}
	if got := killWait(); got != "3 sec" {
		t.Errorf("show config KillWait = %q after a refused reload, want 3 sec still", got)
	}
	rewrite("cluster_name: other", "cluster_name: it")

	// SIGHUP does what scontrol reconfigure does.
	rewrite("max_submit_per_user: 1", "max_submit_per_user: 3")
	if err := c.ctld.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	c.eventually(10*time.Second, "SIGHUP applies kill_wait 4s", func() bool { return killWait() == "4 sec" })
	if r := c.cli("sbatch", "-A", "ml", "--wrap", "true"); r.code != 0 {
		t.Errorf("job in ml after SIGHUP raised max_submit_per_user to 3: exit %d, err %q", r.code, r.err)
	}
	stillRunning(id)

	// A broken file: refused with the parser's words, and a SIGHUP
	// leaves the daemon serving with the settings it had.
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(append([]byte{}, good...), "scheduler: [broken\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	r = reconfigure("reconfigure")
	if r.code != 1 || !strings.Contains(r.err, "slurm_reconfigure error: config "+path) {
		t.Errorf("reconfigure of a broken file: exit %d, err %q; want refused naming the file", r.code, r.err)
	}
	if err := c.ctld.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	c.eventually(10*time.Second, "the failed SIGHUP reload is logged", func() bool {
		b, _ := os.ReadFile(filepath.Join(c.dir, "tidectld.log"))
		return strings.Contains(string(b), "reconfigure on SIGHUP failed")
	})
	if _, err := c.api.Cluster(context.Background()); err != nil {
		t.Fatalf("controller after a SIGHUP with a broken file: %v", err)
	}
	if c.ctld.ProcessState != nil {
		t.Fatalf("tidectld exited: %v", c.ctld.ProcessState)
	}
	if got := killWait(); got != "4 sec" {
		t.Errorf("show config KillWait = %q after a broken file, want 4 sec still", got)
	}
	stillRunning(id)
}
