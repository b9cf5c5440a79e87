package noded

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepio"
)

// TestSignalStepsCommand checks a signal command for a job's steps: the
// tasks of the job's steps on the node get it (each of them), and a
// command for another job, or another run of this one, reaches nothing.
func TestSignalStepsCommand(t *testing.T) {
	s := testStepServer(t)
	sg := testGrant(t, s.advertised, time.Now().Add(time.Hour), "/bin/sh", "-c",
		`trap 'echo "got USR2 $SLURM_PROCID"; exit 0' USR2; echo ready; while :; do sleep 0.05; done`)
	c, f := dialStep(t, s, sg, stepio.StdinNone)
	if f.Type != stepio.Ready {
		t.Fatalf("first frame %s %q", f.Type, f.Payload)
	}
	frames := make(chan stepio.Frame, 64)
	go func() {
		defer close(frames)
		for {
			f, err := stepio.ReadFrame(c)
			if err != nil {
				return
			}
			frames <- f
		}
	}()
	out := map[uint32]string{}
	exits := map[uint32]api.ExitStatus{}
	readUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.After(waitLimit)
		for !cond() {
			select {
			case f, ok := <-frames:
				if !ok {
					t.Fatalf("connection ended waiting for %s: output %v", what, out)
				}
				switch f.Type {
				case stepio.Stdout:
					out[f.Task] += string(f.Payload)
				case stepio.Exit:
					exits[f.Task], _ = stepio.ParseExit(f.Payload)
				}
			case <-deadline:
				t.Fatalf("gave up waiting for %s: output %v", what, out)
			}
		}
	}
	readUntil("both tasks ready", func() bool { return out[0] == "ready\n" && out[1] == "ready\n" })

	for _, other := range []api.JobRef{{JobID: 43}, {JobID: 42, Restart: 1}} {
		if s.d.applySignal(api.SignalCommand{JobRef: other, Signal: int(syscall.SIGUSR2), Steps: true}) {
			t.Errorf("a signal for job %d run %d reached job 42's step", other.JobID, other.Restart)
		}
	}
	if !s.d.applySignal(api.SignalCommand{JobRef: api.JobRef{JobID: 42}, Signal: int(syscall.SIGUSR2), Steps: true}) {
		t.Fatal("the signal for job 42's steps reached none")
	}
	readUntil("both tasks' exits", func() bool { return len(exits) == 2 })
	for task := uint32(0); task < 2; task++ {
		want := "ready\ngot USR2 " + string(rune('0'+task)) + "\n"
		if out[task] != want {
			t.Errorf("task %d printed %q, want %q: only the signals for job 42 run 0 reached it", task, out[task], want)
		}
		if exits[task] != (api.ExitStatus{}) {
			t.Errorf("task %d exit %s, want 0:0 (its trap ran)", task, exits[task])
		}
	}
}

// TestBatchSignalTargets checks the two batch shell targets on a node:
// BatchOnly (scancel -b, --signal=B:) reaches the shell and none of its
// children; the plain command (scancel -f) reaches the shell and its
// children.
func TestBatchSignalTargets(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	wd := t.TempDir()
	script := "#!/bin/sh\ntrap 'echo shell >> got' USR1\n" +
		"sh -c 'trap \"echo child >> got\" USR1; while :; do sleep 0.05; echo >> beat; done' &\n" +
		"while [ ! -e release ]; do sleep 0.05; done\n"
	spec := n.spec(t, 105, script, wd)
	n.launch(spec)
	n.fake.waitReport(t, spec.JobRef, api.NodeJobRunning)
	beats := func() int { b, _ := os.ReadFile(filepath.Join(wd, "beat")); return len(b) }
	got := func(who string) int {
		b, _ := os.ReadFile(filepath.Join(wd, "got"))
		return strings.Count(string(b), who)
	}
	waitUntil(t, "the child's loop", func() bool { return beats() > 0 })

	n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Signal: int(syscall.SIGUSR1), BatchOnly: true}}})
	waitUntil(t, "the shell's trap", func() bool { return got("shell") == 1 })
	// The child runs its trap, if it got the signal, before its next
	// beat: three more beats and it would have.
	after := beats()
	waitUntil(t, "three more beats of the child", func() bool { return beats() >= after+3 })
	if c := got("child"); c != 0 {
		t.Fatalf("the batch shell's signal reached its child (%d times)", c)
	}

	n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Signal: int(syscall.SIGUSR1)}}})
	waitUntil(t, "both traps", func() bool { return got("shell") == 2 && got("child") == 1 })
	if err := os.WriteFile(filepath.Join(wd, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Kill: true}}})
	n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
}

// TestWarningTimerOnlyForBatchShell checks that tided arms the
// --signal warning only for B: (the batch shell): the steps' warning is
// the controller's, which knows every node of the job.
func TestWarningTimerOnlyForBatchShell(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	wd := t.TempDir()
	script := "#!/bin/sh\nwhile [ ! -e release ]; do sleep 0.05; done\n"
	steps := n.spec(t, 106, script, wd)
	steps.TimeLimit = 3600
	steps.Signal = &api.SignalSpec{Signal: int(syscall.SIGUSR1), Seconds: 60}
	batch := n.spec(t, 107, script, wd)
	batch.TimeLimit = 3600
	batch.Signal = &api.SignalSpec{Signal: int(syscall.SIGUSR1), Seconds: 60, BatchOnly: true}
	n.launch(steps, batch)
	n.fake.waitReport(t, steps.JobRef, api.NodeJobRunning)
	n.fake.waitReport(t, batch.JobRef, api.NodeJobRunning)
	launched := func() bool {
		n.d.mu.Lock()
		defer n.d.mu.Unlock()
		for _, ref := range []api.JobRef{steps.JobRef, batch.JobRef} {
			if j := n.d.jobs[ref]; j == nil || j.launching != nil {
				return false
			}
		}
		return true
	}
	waitUntil(t, "both launches done", launched)
	n.d.mu.Lock()
	stepsTimer, batchTimer := n.d.jobs[steps.JobRef].warn != nil, n.d.jobs[batch.JobRef].warn != nil
	n.d.mu.Unlock()
	if stepsTimer || !batchTimer {
		t.Errorf("warning timers: steps' job %v, B: job %v; want only the B: job's", stepsTimer, batchTimer)
	}
	if err := os.WriteFile(filepath.Join(wd, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n.fake.waitReport(t, steps.JobRef, api.NodeJobFinished)
	n.fake.waitReport(t, batch.JobRef, api.NodeJobFinished)
}
