package integration

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestControllerCrash kills tidectld with SIGKILL while jobs run and
// others pend: after a restart no job is lost, the running ones finish
// with the right state, the pending ones start.
func TestControllerCrash(t *testing.T) {
	c := newCluster(t, 2)
	// Fill both nodes' GPUs with running jobs so later ones must pend.
	var running []uint64
	for i := 0; i < 4; i++ {
		running = append(running, c.submit("#!/bin/sh\nsleep 4\nexit 0\n", "--gpus=4"))
	}
	failing := c.submit("#!/bin/sh\nsleep 4\nexit 2\n", "--gpus=0")
	for _, id := range running {
		c.waitState(id, api.StateRunning, 20*time.Second)
	}
	var pending []uint64
	for i := 0; i < 3; i++ {
		pending = append(pending, c.submit("#!/bin/sh\necho pending-ran\n", "--gpus=8"))
	}
	if j := c.job(pending[0]); j.State != api.StatePending {
		t.Fatalf("job %d is %s, want PENDING", pending[0], j.State)
	}
	kill(c.ctld, syscall.SIGKILL)
	time.Sleep(2 * time.Second) // jobs keep running without the controller
	c.startCtld()

	for _, id := range running {
		if j := c.waitTerminal(id, 40*time.Second); j.State != api.StateCompleted {
			t.Errorf("job %d ended %s, want COMPLETED", id, j.State)
		}
	}
	if got, want := c.sacctLine(failing), fmt.Sprintf("%d|FAILED|2:0", failing); got != want {
		c.waitTerminal(failing, 20*time.Second)
		if got = c.sacctLine(failing); got != want {
			t.Errorf("sacct = %q, want %q", got, want)
		}
	}
	for _, id := range pending {
		if j := c.waitTerminal(id, 60*time.Second); j.State != api.StateCompleted {
			t.Errorf("pending job %d ended %s", id, j.State)
		}
	}
	// Ids keep growing after the restart.
	next := c.submit("#!/bin/sh\ntrue\n")
	if next <= pending[len(pending)-1] {
		t.Fatalf("id %d reused after restart (last %d)", next, pending[len(pending)-1])
	}
}

// TestNodeDaemonRestart restarts tided while a job runs: the job is
// reattached and its end is reported with the right state.
func TestNodeDaemonRestart(t *testing.T) {
	c := newCluster(t, 1)
	id := c.submit("#!/bin/sh\nsleep 3\nexit 4\n")
	c.waitState(id, api.StateRunning, 20*time.Second)
	time.Sleep(500 * time.Millisecond)
	kill(c.tided["gpu01"], syscall.SIGKILL)
	time.Sleep(time.Second)
	c.startTided("gpu01")
	c.waitTerminal(id, 30*time.Second)
	if got, want := c.sacctLine(id), fmt.Sprintf("%d|FAILED|4:0", id); got != want {
		t.Fatalf("sacct = %q, want %q", got, want)
	}
	// A job that finishes while tided is down is reported when it returns.
	id2 := c.submit("#!/bin/sh\nsleep 1\n")
	c.waitState(id2, api.StateRunning, 20*time.Second)
	kill(c.tided["gpu01"], syscall.SIGTERM)
	time.Sleep(3 * time.Second)
	c.startTided("gpu01")
	if j := c.waitTerminal(id2, 30*time.Second); j.State != api.StateCompleted {
		t.Fatalf("job %d ended %s", id2, j.State)
	}
}
