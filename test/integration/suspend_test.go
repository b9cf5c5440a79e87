package integration

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/stepd"
)

// suspendCluster starts a one-node cluster whose batch class is
// preempted by suspension. Its node freezes jobs in their cgroups where
// this host allows job cgroups (root, a hierarchy with a freezer), which
// the second result says; elsewhere it stops their process groups.
func suspendCluster(t *testing.T) (*cluster, bool) {
	t.Helper()
	nodeYAML, frozen := "cgroups: off\n", false
	if os.Getuid() == 0 {
		if h, err := cgroup.Detect(cgroup.DefaultRoot); err == nil && (h.Version == cgroup.V2 || h.Has(cgroup.Freezer)) {
			b := make([]byte, 4)
			rand.Read(b)
			parent := "tide-it-susp-" + hex.EncodeToString(b)
			if err := h.Prepare(parent); err == nil {
				t.Cleanup(func() { h.RemoveParent(parent) })
				nodeYAML, frozen = fmt.Sprintf("cgroups: required\ncgroup_parent: %s\n", parent), true
			}
		}
	}
	c := newClusterOpts(t, clusterOpts{nodes: 1, nodeYAML: nodeYAML,
		ctldYAML: "qos:\n  - {name: batch, preempt_mode: suspend, min_runtime: 0s}\n"})
	return c, frozen
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// waitStill waits until path stops growing (the same size twice, 500 ms
// apart). A running job that prints every 50 ms never passes, so a job
// that was not stopped fails by timeout; a slow job cannot fail it.
func (c *cluster) waitStill(what, path string) int64 {
	c.t.Helper()
	var n int64
	c.eventually(30*time.Second, what, func() bool {
		n = fileSize(path)
		time.Sleep(500 * time.Millisecond)
		return n > 0 && fileSize(path) == n
	})
	return n
}

func (c *cluster) waitGrows(what, path string, n int64) {
	c.t.Helper()
	c.eventually(30*time.Second, what, func() bool { return fileSize(path) > n })
}

// TestSuspendPreemption: a CPU-only job of a suspend class is preempted
// by an urgent job that needs its CPUs. While SUSPENDED it produces no
// output (nor does a process it started in a session of its own, where
// the job has a cgroup to freeze); when the urgent job ends it resumes
// and prints again. Suspended a second time, it can still be cancelled.
func TestSuspendPreemption(t *testing.T) {
	c, frozen := suspendCluster(t)
	t.Logf("jobs frozen in their cgroups: %v (else their process groups are stopped)", frozen)
	wd := c.workDir()
	victimScript := "#!/bin/sh\n"
	if frozen {
		victimScript += "setsid sh -c 'while :; do echo x >>escaped.out; sleep 0.05; done' </dev/null >/dev/null 2>&1 &\n"
	}
	victimScript += "while :; do echo tick; sleep 0.05; done\n"
	victim := c.submit(victimScript, "--qos=batch", "-c", "64", "-o", "victim-%j.out")
	out, esc := filepath.Join(wd, fmt.Sprintf("victim-%d.out", victim)), filepath.Join(wd, "escaped.out")
	c.waitState(victim, api.StateRunning, 30*time.Second)
	c.waitGrows("victim output", out, 0)
	if frozen {
		c.waitGrows("escaped process output", esc, 0)
	}

	urgentScript := "#!/bin/sh\nwhile [ ! -e release-$SLURM_JOB_ID ]; do sleep 0.1; done\n"
	urgent := c.submit(urgentScript, "--qos=inference", "-c", "64", "-o", "urgent-%j.out")
	c.waitState(victim, api.StateSuspended, 30*time.Second)
	c.waitState(urgent, api.StateRunning, 30*time.Second)
	// tided writes the frozen marker just before it freezes the job.
	marker := filepath.Join(c.dir, "nodes", "gpu01", "jobs", fmt.Sprintf("%d.0", victim), stepd.MarkFrozen)
	c.eventually(30*time.Second, "frozen marker on the node", func() bool {
		var m stepd.FrozenMarker
		return stepd.ReadJSON(marker, &m) == nil && m.How != ""
	})
	n := c.waitStill("suspended victim stops printing", out)
	var e int64
	if frozen {
		e = c.waitStill("escaped process stops printing", esc)
	}
	// Still nothing while the urgent job runs.
	time.Sleep(time.Second)
	if j := c.job(victim); j.State != api.StateSuspended {
		t.Fatalf("victim %s while the urgent job runs", j.State)
	}
	if got := fileSize(out); got != n {
		t.Fatalf("suspended victim printed: %d bytes, then %d", n, got)
	}
	if frozen && fileSize(esc) != e {
		t.Fatal("the escaped process of the suspended victim printed")
	}

	release := func(id uint64) {
		if err := os.WriteFile(filepath.Join(wd, "release-"+strconv.FormatUint(id, 10)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	release(urgent)
	c.waitTerminal(urgent, 30*time.Second)
	c.waitState(victim, api.StateRunning, 30*time.Second)
	c.waitGrows("resumed victim prints", out, n)
	c.eventually(30*time.Second, "frozen marker removed", func() bool { return !stepd.Exists(marker) })
	if frozen {
		c.waitGrows("escaped process prints again", esc, e)
	}

	// Suspended again, then cancelled: a frozen job still dies.
	urgent2 := c.submit(urgentScript, "--qos=inference", "-c", "64", "-o", "urgent-%j.out")
	c.waitState(victim, api.StateSuspended, 30*time.Second)
	c.waitStill("victim stops again", out)
	if r := c.cli("scancel", strconv.FormatUint(victim, 10)); r.code != 0 {
		t.Fatalf("scancel: %s%s", r.out, r.err)
	}
	if j := c.waitTerminal(victim, 30*time.Second); j.State != api.StateCancelled {
		t.Fatalf("cancelled suspended victim ended %s %s", j.State, j.Exit)
	}
	if frozen {
		c.waitStill("escaped process gone with the job", esc)
	}
	release(urgent2)
	c.waitTerminal(urgent2, 30*time.Second)
}
