package noded

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/runtime"
	"github.com/tide-hpc/tide/noded/stepd"
)

// These tests run the daemon's bookkeeping (launches, kills, held
// signals, suspend, lost jobs, restarts) against runtime.Fake: no
// process runs, and each test says how its jobs end.

// fakeNode is a test node whose process jobs run under a fake runtime.
func fakeNode(t *testing.T) (*testNode, *runtime.Fake) {
	n := newTestNode(t, t.TempDir())
	f := runtime.NewFake("supervisor")
	n.rt = f
	return n, f
}

// ops writes the fake's calls for ref as "start", "signal 15",
// "signal 10 batch", "freeze", "thaw fake", "delete"...
func ops(f *runtime.Fake, ref api.JobRef) []string {
	var out []string
	for _, c := range f.CallsOf(ref) {
		s := c.Op
		switch c.Op {
		case "signal":
			s += fmt.Sprintf(" %d", c.Signal)
			if c.BatchOnly {
				s += " batch"
			}
		case "thaw":
			s += " " + c.How
		}
		out = append(out, s)
	}
	return out
}

// waitFake waits, woken by the fake's changes, until cond holds.
func waitFake(t *testing.T, f *runtime.Fake, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		changed := f.Changed()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// waitOps waits until the fake's calls for ref are want.
func waitOps(t *testing.T, f *runtime.Fake, ref api.JobRef, want ...string) {
	t.Helper()
	waitFake(t, f, fmt.Sprintf("calls %q", want), func() bool { return slices.Equal(ops(f, ref), want) })
}

func TestFakeRuntimeJobEnds(t *testing.T) {
	n, f := fakeNode(t)
	n.start(t)
	wd := t.TempDir()
	exit := n.spec(t, 801, "#!/bin/sh\n", wd)
	oom := n.spec(t, 802, "#!/bin/sh\n", wd)
	n.launch(exit, oom)
	waitFake(t, f, "both jobs started", func() bool { return f.Started(exit.JobRef) && f.Started(oom.JobRef) })
	n.fake.waitReport(t, exit.JobRef, api.NodeJobRunning)
	if err := f.Exit(exit.JobRef, api.ExitStatus{Code: 5}); err != nil {
		t.Fatal(err)
	}
	if r := n.fake.waitReport(t, exit.JobRef, api.NodeJobFinished); r.Exit != (api.ExitStatus{Code: 5}) || r.Error != "" ||
		!r.StartTime.Equal(exit.StartTime) || r.LaunchFailed {
		t.Errorf("report %+v, want exit 5:0", r)
	}
	if err := f.End(oom.JobRef, stepd.Status{Exit: api.ExitStatus{Signal: 9}, EndTime: time.Now(), OOM: true}); err != nil {
		t.Fatal(err)
	}
	if r := n.fake.waitReport(t, oom.JobRef, api.NodeJobFinished); !r.OOM || r.Exit.Signal != 9 {
		t.Errorf("report %+v, want an OOM kill", r)
	}
	// The runtime had the complete job directory.
	for _, f := range []string{fileLaunch, fileExec, fileScript} {
		if !exists(filepath.Join(jobDir(n, exit.JobRef), f)) {
			t.Errorf("%s missing in the job directory", f)
		}
	}
}

// TestFakeRuntimeKillEscalates: a kill sends SIGTERM through the
// runtime, and SIGKILL after the kill wait to a job that traps it.
func TestFakeRuntimeKillEscalates(t *testing.T) {
	n, f := fakeNode(t)
	f.Trap(syscall.SIGTERM)
	n.start(t)
	spec := n.spec(t, 811, "#!/bin/sh\n", t.TempDir())
	n.launch(spec)
	waitOps(t, f, spec.JobRef, "start")
	n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Kill: true}}})
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if !r.Killed || r.Exit != (api.ExitStatus{Signal: int(syscall.SIGKILL)}) {
		t.Errorf("report %+v, want killed by SIGKILL", r)
	}
	if diff := cmp.Diff([]string{"start", "signal 15", "signal 9"}, ops(f, spec.JobRef)); diff != "" {
		t.Errorf("runtime calls (-want +got):\n%s", diff)
	}
	if m := readMarkers(jobDir(n, spec.JobRef)); m.Killed == nil {
		t.Error("no kill marker")
	}
}

// TestFakeRuntimeHeldSignal: a signal for a job whose runtime has not
// started its first process yet is held, and delivered once it runs.
func TestFakeRuntimeHeldSignal(t *testing.T) {
	n, f := fakeNode(t)
	f.HoldStarts(true)
	f.Trap(syscall.SIGUSR1)
	n.start(t)
	spec := n.spec(t, 821, "#!/bin/sh\n", t.TempDir())
	n.fake.queue(api.NodeSyncResponse{Launch: []api.LaunchSpec{spec},
		Signals: []api.SignalCommand{{JobRef: spec.JobRef, Signal: int(syscall.SIGUSR1)}}})
	waitUntil(t, "the signal held for the job's process", func() bool {
		n.d.mu.Lock()
		defer n.d.mu.Unlock()
		j := n.d.jobs[spec.JobRef]
		return j != nil && j.launching == nil && len(j.held) == 1
	})
	if diff := cmp.Diff([]string{"start"}, ops(f, spec.JobRef)); diff != "" {
		t.Errorf("runtime calls before the job runs (-want +got):\n%s", diff)
	}
	if err := f.Run(spec.JobRef); err != nil {
		t.Fatal(err)
	}
	waitOps(t, f, spec.JobRef, "start", "signal 10")
	if err := f.Exit(spec.JobRef, api.ExitStatus{}); err != nil {
		t.Fatal(err)
	}
	n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
}

// TestFakeRuntimeSuspend: SIGSTOP freezes through the runtime with the
// frozen marker written first, SIGCONT thaws the way the marker says,
// and a kill of a frozen job thaws it before its signal.
func TestFakeRuntimeSuspend(t *testing.T) {
	n, f := fakeNode(t)
	n.start(t)
	spec := n.spec(t, 831, "#!/bin/sh\n", t.TempDir())
	n.launch(spec)
	waitOps(t, f, spec.JobRef, "start")
	dir := jobDir(n, spec.JobRef)
	signal := func(sig syscall.Signal) {
		n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Signal: int(sig)}}})
	}
	signal(syscall.SIGSTOP)
	waitOps(t, f, spec.JobRef, "start", "freeze")
	if m := stepd.ReadMarkers(dir).Frozen; m == nil || m.How != runtime.FakeFreeze || f.Frozen(spec.JobRef) != runtime.FakeFreeze {
		t.Errorf("frozen marker %+v, fake frozen %q", m, f.Frozen(spec.JobRef))
	}
	signal(syscall.SIGCONT)
	waitOps(t, f, spec.JobRef, "start", "freeze", "thaw fake")
	waitUntil(t, "the frozen marker removed", func() bool { return stepd.ReadMarkers(dir).Frozen == nil })
	signal(syscall.SIGSTOP)
	waitOps(t, f, spec.JobRef, "start", "freeze", "thaw fake", "freeze")
	n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Kill: true}}})
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if !r.Killed || r.Exit != (api.ExitStatus{Signal: int(syscall.SIGTERM)}) {
		t.Errorf("report %+v, want killed by SIGTERM", r)
	}
	if diff := cmp.Diff([]string{"start", "freeze", "thaw fake", "freeze", "thaw fake", "signal 15"}, ops(f, spec.JobRef)); diff != "" {
		t.Errorf("runtime calls (-want +got):\n%s", diff)
	}
}

// TestFakeRuntimeStartFailures: a start that fails is the node's fault
// (the controller may retry elsewhere) unless the runtime says it is the
// job's own.
func TestFakeRuntimeStartFailures(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		nodeSide bool
	}{
		{name: "node", err: errors.New("supervisor socket gone"), nodeSide: true},
		{name: "job", err: runtime.JobFault(errors.New("could not open stdout file /x: permission denied"))},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, f := fakeNode(t)
			f.FailStarts(tt.err)
			n.start(t)
			spec := n.spec(t, uint64(841+i), "#!/bin/sh\n", t.TempDir())
			n.launch(spec)
			r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
			if want := "start supervisor: " + tt.err.Error(); r.Error != want || r.LaunchFailed != tt.nodeSide || r.Exit != (api.ExitStatus{Code: 1}) {
				t.Errorf("report %+v, want error %q, launch failed %v", r, want, tt.nodeSide)
			}
		})
	}
}

// TestFakeRuntimeLostJob: a job its runtime lost (no status) is reported
// lost, and the runtime removes what is left of it.
func TestFakeRuntimeLostJob(t *testing.T) {
	n, f := fakeNode(t)
	n.start(t)
	spec := n.spec(t, 851, "#!/bin/sh\n", t.TempDir())
	n.launch(spec)
	waitOps(t, f, spec.JobRef, "start")
	if err := f.Lose(spec.JobRef); err != nil {
		t.Fatal(err)
	}
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if r.Exit != (api.ExitStatus{Signal: 9}) || r.Error != lostError {
		t.Errorf("report %+v, want lost", r)
	}
	waitFake(t, f, "the lost job deleted", func() bool { return f.Deleted(spec.JobRef) })
}

// TestFakeRuntimeRestart: a restarted tided reattaches through the
// runtime the jobs it still runs, and records as lost (with the
// runtime's cleanup) those it lost meanwhile.
func TestFakeRuntimeRestart(t *testing.T) {
	n, f := fakeNode(t)
	stopA := n.start(t)
	wd := t.TempDir()
	runs := n.spec(t, 861, "#!/bin/sh\n", wd)
	lost := n.spec(t, 862, "#!/bin/sh\n", wd)
	n.launch(runs, lost)
	waitFake(t, f, "both jobs started", func() bool { return f.Started(runs.JobRef) && f.Started(lost.JobRef) })
	n.fake.waitReport(t, lost.JobRef, api.NodeJobRunning)
	stopA()
	if f.Closes() != 1 {
		t.Errorf("runtime closed %d times at the stop, want once", f.Closes())
	}
	if err := f.Lose(lost.JobRef); err != nil { // while tided is down
		t.Fatal(err)
	}
	n.start(t)
	n.fake.waitFor(t, "second registration", func() bool { return n.fake.registrations == 2 })
	if reg := n.fake.lastReg.Jobs; len(reg) != 2 || reg[0].State != api.NodeJobRunning || reg[1].State != api.NodeJobFinished ||
		reg[1].Error != lostError || reg[1].LaunchFailed {
		t.Errorf("registration reports %+v, want 861 running and 862 lost", reg)
	}
	if diff := cmp.Diff([]string{"start", "reattach"}, ops(f, runs.JobRef)); diff != "" {
		t.Errorf("calls for the running job (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"start", "reattach", "delete"}, ops(f, lost.JobRef)); diff != "" {
		t.Errorf("calls for the lost job (-want +got):\n%s", diff)
	}
	if err := f.Exit(runs.JobRef, api.ExitStatus{Code: 7}); err != nil {
		t.Fatal(err)
	}
	if r := n.fake.waitReport(t, runs.JobRef, api.NodeJobFinished); r.Exit != (api.ExitStatus{Code: 7}) {
		t.Errorf("report %+v, want exit 7:0", r)
	}
}

// TestFakeContainerRuntime: a node with a container runtime registers
// the containerd feature and runs image jobs under it, other jobs under
// the process runtime; what the container runtime gets resolved is the
// job's environment, files and share of the node.
func TestFakeContainerRuntime(t *testing.T) {
	n, procs := fakeNode(t)
	ctrs := &resolvingFake{Fake: runtime.NewFake("container")}
	n.ctrRT = ctrs
	n.start(t)
	n.fake.waitFor(t, "registration", func() bool { return n.fake.registrations == 1 })
	if !slices.Contains(n.fake.lastReg.Features, api.FeatureContainerd) {
		t.Errorf("features %v lack containerd", n.fake.lastReg.Features)
	}
	wd := t.TempDir()
	img := n.spec(t, 871, "#!/bin/sh\n", wd)
	img.ContainerImage = "docker.io/tide-test/bb:latest"
	plain := n.spec(t, 872, "#!/bin/sh\n", wd)
	n.launch(img, plain)
	waitOps(t, ctrs.Fake, img.JobRef, "start")
	waitOps(t, procs, plain.JobRef, "start")
	if len(ctrs.CallsOf(plain.JobRef)) != 0 || len(procs.CallsOf(img.JobRef)) != 0 {
		t.Errorf("a job went to the other runtime: container %v, process %v", ctrs.Calls(), procs.Calls())
	}
	l := ctrs.launch(img.JobRef)
	if l.Files.Stdout != filepath.Join(wd, "slurm-871.out") || l.WorkDir != wd || l.CPUs != 1 ||
		!slices.Equal(l.GPUs, []int{1, 3}) || !slices.Contains(l.Env, "SLURM_JOB_ID=871") || l.User.UID != img.UserID {
		t.Errorf("resolved launch %+v", l)
	}
	for _, f := range []*runtime.Fake{ctrs.Fake, procs} {
		for _, c := range f.Calls() {
			if c.Op == "start" {
				if err := f.Exit(c.Ref, api.ExitStatus{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	n.fake.waitReport(t, img.JobRef, api.NodeJobFinished)
	n.fake.waitReport(t, plain.JobRef, api.NodeJobFinished)
}

// resolvingFake is a fake runtime that keeps what each started job
// resolved to.
type resolvingFake struct {
	*runtime.Fake
	mu       sync.Mutex
	launches map[api.JobRef]runtime.Launch
}

func (r *resolvingFake) Start(ctx context.Context, j runtime.Job) (<-chan struct{}, error) {
	l := j.Resolve()
	r.mu.Lock()
	if r.launches == nil {
		r.launches = map[api.JobRef]runtime.Launch{}
	}
	r.launches[j.Ref] = l
	r.mu.Unlock()
	return r.Fake.Start(ctx, j)
}

func (r *resolvingFake) launch(ref api.JobRef) runtime.Launch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.launches[ref]
}
