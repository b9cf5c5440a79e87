package steps

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

// TestCancelOneStep checks scancel J.S on a node: the named step's
// tasks are killed and srun hears Slurm's notice; another step of the
// job goes on; a cancel that comes before the step's srun does keeps
// the step from starting.
func TestCancelOneStep(t *testing.T) {
	s := testStepServer(t)
	dir := t.TempDir()
	run := func(step uint32, script string) (chan stepio.Frame, stepio.Frame) {
		sg := stepGrant(t, s.advertised, func(g *api.StepGrant) { g.StepID = step; g.Cwd = dir }, "/bin/sh", "-c", script)
		c, f := dialStep(t, s, sg, stepio.StdinNone)
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
		return frames, f
	}
	loop := `touch up.$SLURM_STEP_ID.$SLURM_PROCID; while :; do sleep 0.05; done`
	step3, f := run(3, loop)
	if f.Type != stepio.Ready {
		t.Fatalf("step 3: first frame %s %q", f.Type, f.Payload)
	}
	step4, f := run(4, loop)
	if f.Type != stepio.Ready {
		t.Fatalf("step 4: first frame %s %q", f.Type, f.Payload)
	}
	deadline := time.Now().Add(waitLimit)
	for _, name := range []string{"up.3.0", "up.3.1", "up.4.0", "up.4.1"} {
		for {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never appeared", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if s.Signal(api.JobRef{JobID: 42}, []uint32{3, 7}, syscall.SIGKILL) == 0 {
		t.Fatal("the cancel reached no step")
	}
	var notice string
	exits := map[uint32]api.ExitStatus{}
	for f := range step3 {
		switch f.Type {
		case stepio.Notice:
			if f.Task != stepio.NoticeCancelled {
				t.Errorf("notice kind %d", f.Task)
			}
			notice += string(f.Payload)
		case stepio.Exit:
			exits[f.Task], _ = stepio.ParseExit(f.Payload)
		}
	}
	if !strings.HasPrefix(notice, "slurmstepd: error: *** STEP 42.3 ON n1 CANCELLED AT ") || !strings.HasSuffix(notice, " ***\n") {
		t.Errorf("notice %q", notice)
	}
	if exits[0].Signal != int(syscall.SIGKILL) || exits[1].Signal != int(syscall.SIGKILL) {
		t.Errorf("step 3's exits %v, want SIGKILL", exits)
	}
	// Step 4 was not named: it still runs.
	select {
	case f, ok := <-step4:
		if ok && f.Type == stepio.Exit {
			t.Fatalf("step 4 ended: %v", f)
		}
	case <-time.After(200 * time.Millisecond):
	}
	s.Signal(api.JobRef{JobID: 42}, []uint32{4}, syscall.SIGKILL)
	// Step 7 was cancelled before its srun came: it does not start.
	_, f = run(7, `touch started.7`)
	if f.Type != stepio.Error || !strings.Contains(string(f.Payload), "step 42.7 was cancelled") {
		t.Fatalf("step 7: first frame %s %q", f.Type, f.Payload)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "started.7")); err == nil {
		t.Fatal("the cancelled step 7 ran")
	}
}
