package noded

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/cgroup"
	"github.com/tide-hpc/tide/noded/stepd"
)

func TestSerialOpsKeepOrder(t *testing.T) {
	var q serialOps
	var mu sync.Mutex
	var got []int
	release := make(chan struct{})
	// The first call blocks: everything queued meanwhile waits for it.
	q.do(func() { <-release; mu.Lock(); got = append(got, 0); mu.Unlock() })
	for i := 1; i < 50; i++ {
		q.do(func() { mu.Lock(); got = append(got, i); mu.Unlock() })
	}
	if !q.busy() {
		t.Fatal("queue idle with a blocked call")
	}
	close(release)
	waitUntil(t, "queue drained", func() bool { return !q.busy() })
	for i, v := range got {
		if v != i {
			t.Fatalf("calls ran in order %v", got)
		}
	}
	if len(got) != 50 {
		t.Fatalf("%d calls ran, want 50", len(got))
	}
	// An idle queue starts again.
	done := make(chan struct{})
	q.do(func() { close(done) })
	<-done
}

// freezeMode is how a test node freezes process jobs.
type freezeMode struct {
	name string
	how  string
	// setup configures the node, or skips the test where the host
	// cannot freeze that way; it returns a check that the job's cgroup
	// is frozen (nil without cgroups).
	setup func(t *testing.T, n *testNode) func(jobID uint64) bool
}

var freezeModes = []freezeMode{
	{name: "cgroup freezer", how: stepd.FreezeCgroup, setup: cgroupFreezeNode},
	{name: "SIGSTOP without cgroup", how: stepd.FreezeSignal, setup: func(t *testing.T, n *testNode) func(uint64) bool {
		n.cfg.Cgroups = CgroupsOff
		return nil
	}},
}

// cgroupFreezeNode confines the node's jobs in cgroups under a parent of
// their own (cgroups: required), or skips where that cannot be done here
// (not root, no writable hierarchy with a freezer).
func cgroupFreezeNode(t *testing.T, n *testNode) func(uint64) bool {
	if os.Getuid() != 0 {
		t.Skip("job cgroups need root")
	}
	h, err := cgroup.Detect(cgroup.DefaultRoot)
	if err != nil {
		t.Skipf("no cgroups here: %v", err)
	}
	if h.Version == cgroup.V1 && !h.Has(cgroup.Freezer) {
		t.Skip("cgroup v1 without a freezer hierarchy")
	}
	b := make([]byte, 4)
	rand.Read(b)
	parent := "tide-unit-susp-" + hex.EncodeToString(b)
	if err := h.Prepare(parent); err != nil {
		t.Skipf("cgroups not usable here: %v", err)
	}
	t.Cleanup(func() {
		if h.Version == cgroup.V2 {
			_ = syscall.Rmdir(filepath.Join(h.Root, parent))
			return
		}
		for _, c := range h.Controllers {
			_ = syscall.Rmdir(filepath.Join(h.Root, c, parent))
		}
	})
	n.cfg.Cgroups = CgroupsRequired
	n.cfg.CgroupParent = parent
	return func(jobID uint64) bool {
		dir := filepath.Join(parent, cgroup.JobName(jobID))
		if h.Version == cgroup.V2 {
			b, err := os.ReadFile(filepath.Join(h.Root, dir, "cgroup.events"))
			return err == nil && strings.Contains(string(b), "frozen 1")
		}
		b, err := os.ReadFile(filepath.Join(h.Root, cgroup.Freezer, dir, "freezer.state"))
		return err == nil && strings.TrimSpace(string(b)) == "FROZEN"
	}
}

// ticker is a job script that appends a line to its output every 20 ms;
// with escaped set it also starts a process in a session of its own
// that appends to escaped.out (it leaves the job's process group, not
// its cgroup).
func ticker(escaped bool) string {
	s := "#!/bin/sh\n"
	if escaped {
		s += "setsid sh -c 'while :; do echo x >>escaped.out; sleep 0.02; done' </dev/null >/dev/null 2>&1 &\n"
	}
	return s + "while :; do echo tick; sleep 0.02; done\n"
}

// size is the length of a file, 0 when it does not exist.
func size(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// waitStill waits until path stops growing: two looks 300 ms apart see
// the same size. A running ticker job never passes this, so it fails by
// timeout when the job was not stopped; a job that is slow to print
// cannot make it fail.
func waitStill(t *testing.T, what, path string) {
	t.Helper()
	waitUntil(t, what, func() bool {
		a := size(path)
		time.Sleep(300 * time.Millisecond)
		return size(path) == a && a > 0
	})
}

// waitGrows waits until path grows beyond n bytes.
func waitGrows(t *testing.T, what, path string, n int64) {
	t.Helper()
	waitUntil(t, what, func() bool { return size(path) > n })
}

// signalUntil sends sig to the job until cond holds. The fake
// controller sends a plain signal once, in the answer to the newest
// sync, which tided may have cancelled; SIGSTOP and SIGCONT repeated
// change nothing.
func signalUntil(t *testing.T, n *testNode, ref api.JobRef, sig syscall.Signal, what string, cond func() bool) {
	t.Helper()
	var last time.Time
	waitUntil(t, what, func() bool {
		if cond() {
			return true
		}
		if time.Since(last) > 2*time.Second {
			n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: ref, Signal: int(sig)}}})
			last = time.Now()
		}
		return false
	})
}

func frozenMarker(t *testing.T, dir string) *stepd.FrozenMarker {
	t.Helper()
	return stepd.ReadMarkers(dir).Frozen
}

// TestSuspendProcessJob suspends and resumes a process job with the
// controller's SIGSTOP and SIGCONT commands, then suspends it again and
// kills it: a frozen job must still die of its SIGTERM.
func TestSuspendProcessJob(t *testing.T) {
	for _, m := range freezeModes {
		t.Run(m.name, func(t *testing.T) {
			n := newTestNode(t, t.TempDir())
			frozen := m.setup(t, n)
			n.start(t)
			wd := t.TempDir()
			escaped := frozen != nil
			spec := n.spec(t, 601, ticker(escaped), wd)
			n.launch(spec)
			n.fake.waitReport(t, spec.JobRef, api.NodeJobRunning)
			out, esc := filepath.Join(wd, "slurm-601.out"), filepath.Join(wd, "escaped.out")
			dir := jobDir(n, spec.JobRef)
			waitGrows(t, "job output", out, 0)
			if escaped {
				waitGrows(t, "escaped process output", esc, 0)
			}

			signalUntil(t, n, spec.JobRef, syscall.SIGSTOP, "frozen marker", func() bool {
				f := frozenMarker(t, dir)
				return f != nil && f.How == m.how
			})
			waitStill(t, "job output stops", out)
			if escaped {
				waitStill(t, "escaped process stops", esc)
				if !frozen(spec.JobID) {
					t.Error("job cgroup not frozen")
				}
			}

			signalUntil(t, n, spec.JobRef, syscall.SIGCONT, "frozen marker removed", func() bool { return frozenMarker(t, dir) == nil })
			waitGrows(t, "job output after resume", out, size(out))
			if escaped {
				waitGrows(t, "escaped output after resume", esc, size(esc))
			}

			signalUntil(t, n, spec.JobRef, syscall.SIGSTOP, "frozen again", func() bool { return frozenMarker(t, dir) != nil })
			waitStill(t, "job output stops again", out)
			n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Kill: true}}})
			r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
			// SIGTERM, not the SIGKILL of the kill wait: the kill thawed the job.
			if !r.Killed || r.Exit != (api.ExitStatus{Signal: int(syscall.SIGTERM)}) {
				t.Errorf("report %+v, want killed with 0:15", r)
			}
			waitUntil(t, "frozen marker removed after the kill", func() bool { return frozenMarker(t, dir) == nil })
			if escaped {
				// The cgroup's end killed the escaped process too.
				waitStill(t, "escaped process gone", esc)
			}
		})
	}
}

// TestSuspendSurvivesRestart: a tided that restarts while a job is
// frozen knows it from the frozen marker, so that the kill thaws it.
func TestSuspendSurvivesRestart(t *testing.T) {
	for _, m := range freezeModes {
		t.Run(m.name, func(t *testing.T) {
			n := newTestNode(t, t.TempDir())
			m.setup(t, n)
			stop := n.start(t)
			wd := t.TempDir()
			spec := n.spec(t, 602, ticker(false), wd)
			n.launch(spec)
			n.fake.waitReport(t, spec.JobRef, api.NodeJobRunning)
			out := filepath.Join(wd, "slurm-602.out")
			waitGrows(t, "job output", out, 0)
			dir := jobDir(n, spec.JobRef)
			signalUntil(t, n, spec.JobRef, syscall.SIGSTOP, "frozen marker", func() bool {
				f := frozenMarker(t, dir)
				return f != nil && f.How == m.how
			})
			waitStill(t, "job output stops", out)
			stop()

			n.start(t)
			n.fake.waitFor(t, "second registration", func() bool { return n.fake.registrations == 2 })
			waitStill(t, "job still stopped after the restart", out)
			n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Kill: true}}})
			r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
			if !r.Killed || r.Exit != (api.ExitStatus{Signal: int(syscall.SIGTERM)}) {
				t.Errorf("report %+v, want killed with 0:15 (thawed before the kill)", r)
			}
		})
	}
}

// TestSuspendIgnored: a SIGSTOP for a job being killed, or one sent to
// the batch shell alone, does not freeze the job.
func TestSuspendIgnored(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.cfg.Cgroups = CgroupsOff
	n.start(t)
	wd := t.TempDir()
	// The script says when its trap is set: a TERM that came before
	// would end it with 0:15 and the test would check nothing.
	spec := n.spec(t, 603, "#!/bin/sh\ntrap 'echo term; sleep 1; exit 3' TERM\n: > trap-set\nwhile :; do sleep 0.02; done\n", wd)
	spec.KillWait = 30
	n.launch(spec)
	n.fake.waitReport(t, spec.JobRef, api.NodeJobRunning)
	dir := jobDir(n, spec.JobRef)
	waitUntil(t, "job pid recorded", func() bool { return exists(filepath.Join(dir, filePID)) })
	waitUntil(t, "trap set", func() bool { return exists(filepath.Join(wd, "trap-set")) })
	n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{
		{JobRef: spec.JobRef, Signal: int(syscall.SIGSTOP), BatchOnly: true},
		{JobRef: spec.JobRef, Signal: int(syscall.SIGCONT), BatchOnly: true},
		{JobRef: spec.JobRef, Kill: true},
	}})
	waitUntil(t, "kill marker", func() bool { return exists(filepath.Join(dir, markKilled)) })
	n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Signal: int(syscall.SIGSTOP)}}})
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if r.Exit != (api.ExitStatus{Code: 3}) {
		t.Errorf("report %+v, want the trap's exit 3", r)
	}
	if frozenMarker(t, dir) != nil {
		t.Error("a job being killed was frozen")
	}
}
