package noded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// launchGate is a launch hook that stops one job's launch at one step
// until the test opens it: a launch stuck in a slow system call, as far
// as tided can tell.
type launchGate struct {
	job  uint64
	step string // a prefix of the step's name
	// honourCtx makes the stuck step give up at the launch's deadline;
	// without it the step outlasts the deadline (an NFS stat, a CPU-bound
	// pattern) and returns only when opened.
	honourCtx bool

	entered, open, left chan struct{}
	once                sync.Once

	mu    sync.Mutex
	steps []string // every step of the job's launch that was reached
}

func newLaunchGate(job uint64, step string) *launchGate {
	return &launchGate{job: job, step: step, entered: make(chan struct{}), open: make(chan struct{}), left: make(chan struct{})}
}

func (g *launchGate) hook(ctx context.Context, ref api.JobRef, step string) error {
	if ref.JobID != g.job {
		return nil
	}
	g.mu.Lock()
	g.steps = append(g.steps, step)
	g.mu.Unlock()
	if !strings.HasPrefix(step, g.step) {
		return nil
	}
	defer close(g.left)
	g.once.Do(func() { close(g.entered) })
	if g.honourCtx {
		select {
		case <-g.open:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	<-g.open
	return nil
}

func (g *launchGate) reached() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.steps...)
}

func (g *launchGate) wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("gave up waiting for %s", what)
	}
}

// syncsSeen is the number of sync requests the fake controller took.
func (f *fakeCtld) syncsSeen() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// waitSyncs waits until the fake took n more syncs than it had at from:
// the node goes on reporting.
func (f *fakeCtld) waitSyncs(t *testing.T, from, n int) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d more syncs", n), func() bool { return f.syncsSeen() >= from+n })
}

// launchDone waits until job ref's launch is over (run or cleaned up).
func (n *testNode) launchDone(t *testing.T, ref api.JobRef) {
	t.Helper()
	waitUntil(t, "launch of "+dirName(ref)+" over", func() bool {
		n.d.mu.Lock()
		defer n.d.mu.Unlock()
		j := n.d.jobs[ref]
		return j == nil || j.launching == nil
	})
}

// TestLaunchBesideSyncLoop: a launch that does not come back keeps
// neither the node's heartbeats nor its other launches waiting, and the
// job runs once its launch goes on.
func TestLaunchBesideSyncLoop(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.cfg.Heartbeat = 100 * time.Millisecond
	gate := newLaunchGate(601, stepJobDir)
	n.hook = gate.hook
	n.start(t)
	n.fake.waitFor(t, "registration", func() bool { return n.fake.registrations == 1 })
	wd := t.TempDir()
	slow := n.spec(t, 601, "#!/bin/sh\necho slow done\n", wd)
	quick := n.spec(t, 602, "#!/bin/sh\necho quick done\n", wd)
	n.launch(slow, quick)
	gate.wait(t, gate.entered, "the slow launch to block")

	// Both are reported at once: the slow one as launching (its
	// directory is not complete, nothing of it runs), the quick one
	// runs to its end meanwhile.
	n.fake.waitReport(t, slow.JobRef, api.NodeJobLaunching)
	if r := n.fake.waitReport(t, quick.JobRef, api.NodeJobFinished); r.Exit != (api.ExitStatus{}) {
		t.Errorf("quick job: %+v", r)
	}
	n.fake.waitSyncs(t, n.fake.syncsSeen(), 3)
	if got := readFile(t, filepath.Join(wd, "slurm-602.out")); got != "quick done\n" {
		t.Errorf("quick job's output %q", got)
	}

	close(gate.open)
	if r := n.fake.waitReport(t, slow.JobRef, api.NodeJobFinished); r.Exit != (api.ExitStatus{}) || r.Error != "" {
		t.Errorf("slow job: %+v", r)
	}
	if got := readFile(t, filepath.Join(wd, "slurm-601.out")); got != "slow done\n" {
		t.Errorf("slow job's output %q", got)
	}
	n.fake.mu.Lock()
	defer n.fake.mu.Unlock()
	if n.fake.registrations != 1 {
		t.Errorf("the node registered %d times, want once", n.fake.registrations)
	}
}

// TestLaunchTimeout: a launch stuck past launch_timeout fails its job
// with the step it was stuck in while the node goes on reporting; when
// the stuck step comes back, nothing of the job starts.
func TestLaunchTimeout(t *testing.T) {
	tests := []struct {
		name      string
		step      string
		honourCtx bool
		// marker: a SIGKILL marker is left for the runtime (the launch
		// had committed).
		marker bool
	}{
		{name: "job directory, stuck for good", step: stepJobDir},
		{name: "job directory, giving up at the deadline", step: stepJobDir, honourCtx: true},
		{name: "supervisor start", step: stepStart, marker: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t, t.TempDir())
			n.cfg.Heartbeat = 100 * time.Millisecond
			n.cfg.LaunchTimeout = time.Second
			id := uint64(611 + i)
			gate := newLaunchGate(id, tt.step)
			gate.honourCtx = tt.honourCtx
			n.hook = gate.hook
			n.start(t)
			wd := t.TempDir()
			spec := n.spec(t, id, "#!/bin/sh\necho ran > ran\n", wd)
			n.launch(spec)
			gate.wait(t, gate.entered, "the launch to block")
			from := n.fake.syncsSeen()
			r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
			wantErr := "launch timed out after 1s while " + tt.step
			if !strings.HasPrefix(r.Error, wantErr) || !r.LaunchFailed || r.Exit != (api.ExitStatus{Code: 1}) {
				t.Errorf("report = %+v, want a failed launch with error %q…", r, wantErr)
			}
			n.fake.waitSyncs(t, from, 2)
			dir := jobDir(n, spec.JobRef)
			if m := readMarkers(dir); tt.marker && (m.Killed == nil || m.Killed.Signal != int(syscall.SIGKILL)) {
				t.Errorf("killed marker %+v, want SIGKILL for the runtime", m.Killed)
			}

			close(gate.open)
			if !tt.honourCtx {
				gate.wait(t, gate.left, "the stuck step to come back")
			}
			n.launchDone(t, spec.JobRef)
			if steps := gate.reached(); steps[len(steps)-1] != tt.step && !strings.HasPrefix(steps[len(steps)-1], tt.step) {
				t.Errorf("the launch went on after its deadline: steps %q", steps)
			}
			for _, f := range []string{fileStepdPID, filePID} {
				if exists(filepath.Join(dir, f)) {
					t.Errorf("%s exists: the job was handed to a supervisor after its deadline", f)
				}
			}
			if st, err := readStatus(filepath.Join(dir, fileStatus)); tt.step != stepJobDir && (err != nil || st.Error != r.Error) {
				t.Errorf("status.json %+v, %v; want the timeout", st, err)
			}
			n.fake.queue(api.NodeSyncResponse{Ack: []api.JobRef{spec.JobRef}})
			waitUntil(t, "job directory removed after the ack", func() bool {
				_, err := os.Stat(dir)
				return os.IsNotExist(err)
			})
			if exists(filepath.Join(wd, "ran")) || exists(filepath.Join(wd, fmt.Sprintf("slurm-%d.out", id))) {
				t.Error("the job ran after its launch timed out")
			}
			n.fake.mu.Lock()
			defer n.fake.mu.Unlock()
			if n.fake.registrations != 1 {
				t.Errorf("the node registered %d times, want once", n.fake.registrations)
			}
		})
	}
}

// TestLaunchCommandsDuringLaunch: kills, forgets, signals and limits
// that come while a launch is under way find the job and act once the
// launch gets that far: a kill before the runtime has the job ends it
// unstarted (the supervisor reads the marker before it starts the
// script), a signal and a new limit reach the job once it runs.
func TestLaunchCommandsDuringLaunch(t *testing.T) {
	t.Run("kill while the directory is written", func(t *testing.T) {
		testKillDuringLaunch(t, 621, stepJobDir, false)
	})
	t.Run("kill while the supervisor starts", func(t *testing.T) {
		testKillDuringLaunch(t, 622, stepStart, false)
	})
	t.Run("forget while the directory is written", func(t *testing.T) {
		testKillDuringLaunch(t, 623, stepJobDir, true)
	})
	t.Run("signal and limit while the directory is written", func(t *testing.T) {
		n := newTestNode(t, t.TempDir())
		gate := newLaunchGate(624, stepJobDir)
		n.hook = gate.hook
		n.start(t)
		wd := t.TempDir()
		// No trap: it could come after the signal. The shell dies of it.
		script := "#!/bin/sh\nwhile :; do sleep 0.05; done\n"
		spec := n.spec(t, 624, script, wd)
		n.launch(spec)
		gate.wait(t, gate.entered, "the launch to block")
		n.fake.queue(api.NodeSyncResponse{
			Signals: []api.SignalCommand{{JobRef: spec.JobRef, Signal: int(syscall.SIGUSR1), BatchOnly: true}},
			Limits:  []api.LimitUpdate{{JobRef: spec.JobRef, TimeLimit: 3600}},
		})
		waitUntil(t, "signal and limit held by the launch", func() bool {
			n.d.mu.Lock()
			defer n.d.mu.Unlock()
			j := n.d.jobs[spec.JobRef]
			return j != nil && len(j.held) == 1 && j.launching != nil && j.launching.limit != nil
		})
		close(gate.open)
		r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
		if r.Exit != (api.ExitStatus{Signal: int(syscall.SIGUSR1)}) || r.Error != "" || r.Killed {
			t.Errorf("report = %+v, want the job ended by the USR1 sent during its launch", r)
		}
		var saved api.LaunchSpec
		if err := readJSON(filepath.Join(jobDir(n, spec.JobRef), fileLaunch), &saved); err != nil || saved.TimeLimit != 3600 {
			t.Errorf("launch.json time limit = %d (%v), want the update made during the launch", saved.TimeLimit, err)
		}
	})
}

func testKillDuringLaunch(t *testing.T, id uint64, step string, forget bool) {
	n := newTestNode(t, t.TempDir())
	gate := newLaunchGate(id, step)
	n.hook = gate.hook
	n.start(t)
	wd := t.TempDir()
	spec := n.spec(t, id, "#!/bin/sh\necho ran > ran\nsleep 300\n", wd)
	n.launch(spec)
	gate.wait(t, gate.entered, "the launch to block")
	if step == stepJobDir {
		n.fake.waitReport(t, spec.JobRef, api.NodeJobLaunching)
	} else {
		// Committed: reported as running.
		n.fake.waitReport(t, spec.JobRef, api.NodeJobRunning)
	}
	dir := jobDir(n, spec.JobRef)
	if forget {
		n.fake.queue(api.NodeSyncResponse{Forget: []api.JobRef{spec.JobRef}})
	} else {
		n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Kill: true}}})
	}
	waitUntil(t, "the kill to reach the job", func() bool {
		n.d.mu.Lock()
		defer n.d.mu.Unlock()
		j := n.d.jobs[spec.JobRef]
		return j != nil && j.marks.Killed != nil
	})
	close(gate.open)
	if forget {
		waitUntil(t, "forgotten job dropped", func() bool {
			n.d.mu.Lock()
			defer n.d.mu.Unlock()
			_, err := os.Stat(dir)
			return n.d.jobs[spec.JobRef] == nil && os.IsNotExist(err)
		})
	} else {
		r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
		if !r.Killed || r.Exit != (api.ExitStatus{Signal: int(syscall.SIGTERM)}) || r.Error != "" || r.LaunchFailed {
			t.Errorf("report = %+v, want killed by SIGTERM before it ran", r)
		}
		if !exists(filepath.Join(dir, fileStatus)) {
			t.Error("no status.json for the killed job")
		}
	}
	if exists(filepath.Join(wd, "ran")) || exists(filepath.Join(wd, fmt.Sprintf("slurm-%d.out", id))) {
		t.Error("the job ran although it was killed during its launch")
	}
}

// TestLaunchHookError: a step that fails fails the launch as the node's
// fault (the controller may retry elsewhere), naming the step.
func TestLaunchHookError(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.hook = func(_ context.Context, ref api.JobRef, step string) error {
		if strings.HasPrefix(step, stepStart) {
			return fmt.Errorf("no supervisor today")
		}
		return nil
	}
	n.start(t)
	wd := t.TempDir()
	spec := n.spec(t, 631, "#!/bin/sh\necho ran > ran\n", wd)
	n.launch(spec)
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if want := "starting the supervisor: no supervisor today"; r.Error != want || !r.LaunchFailed || r.Exit != (api.ExitStatus{Code: 1}) {
		t.Errorf("report = %+v, want a failed launch with %q", r, want)
	}
	if exists(filepath.Join(wd, "ran")) {
		t.Error("the job ran")
	}
}

// TestLaunchHostilePattern is the probe at the node: an output
// pattern with a billion-wide padding is launched like any other, its
// file named with the padding capped at ten.
func TestLaunchHostilePattern(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	wd := t.TempDir()
	spec := n.spec(t, 641, "#!/bin/sh\necho hi\n", wd)
	spec.Stdout = "out%0999999999j"
	n.launch(spec)
	if r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished); r.Exit != (api.ExitStatus{}) || r.Error != "" {
		t.Errorf("report = %+v", r)
	}
	if got := readFile(t, filepath.Join(wd, "out0000000641")); got != "hi\n" {
		t.Errorf("output = %q", got)
	}
}
