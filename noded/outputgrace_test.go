package noded

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// stepRecorder is a launch hook that records a job's launch steps and
// runs at, once, when the job reaches step.
type stepRecorder struct {
	step string
	at   func()

	mu    sync.Mutex
	steps []string
	once  sync.Once
}

func (r *stepRecorder) hook(_ context.Context, _ api.JobRef, step string) error {
	r.mu.Lock()
	r.steps = append(r.steps, step)
	r.mu.Unlock()
	if step == r.step && r.at != nil {
		r.once.Do(r.at)
	}
	return nil
}

func (r *stepRecorder) reached() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.steps)
}

// TestOutputGrace: a job whose output directory does not exist yet
// waits up to output_grace for it (issue 22: a workflow creates it just
// after sbatch returns), runs once it appears, fails as before when it
// never does, and ends unstarted when killed meanwhile.
func TestOutputGrace(t *testing.T) {
	t.Run("the directory appears during the grace", func(t *testing.T) {
		n := newTestNode(t, t.TempDir())
		wd := t.TempDir()
		later := filepath.Join(wd, "logs", "run1")
		rec := &stepRecorder{step: stepOutputDir, at: func() {
			if err := os.MkdirAll(later, 0o755); err != nil {
				t.Error(err)
			}
		}}
		n.hook = rec.hook
		n.cfg.OutputGrace = 30 * time.Second
		n.start(t)
		spec := n.spec(t, 701, "#!/bin/sh\necho hello\necho oops >&2\n", wd)
		spec.Stdout, spec.Stderr = "logs/run1/%x-%J.out", "logs/run1/%x-%J-%s.err"
		n.launch(spec)
		if r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished); r.Exit != (api.ExitStatus{}) || r.Error != "" {
			t.Fatalf("report = %+v, want a clean exit", r)
		}
		if got := readFile(t, filepath.Join(later, "job701-701.out")); got != "hello\n" {
			t.Errorf("output %q", got)
		}
		if got := readFile(t, filepath.Join(later, "job701-701-batch.err")); got != "oops\n" {
			t.Errorf("error file %q", got)
		}
		if !slices.Contains(rec.reached(), stepOutputDir) {
			t.Errorf("steps %q: the launch did not wait", rec.reached())
		}
	})

	t.Run("no wait when the directory exists", func(t *testing.T) {
		n := newTestNode(t, t.TempDir())
		rec := &stepRecorder{}
		n.hook = rec.hook
		n.start(t)
		spec := n.spec(t, 702, "#!/bin/sh\necho hi\n", t.TempDir())
		n.launch(spec)
		n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
		if slices.Contains(rec.reached(), stepOutputDir) {
			t.Errorf("steps %q: waited for an existing directory", rec.reached())
		}
	})

	t.Run("the directory never appears", func(t *testing.T) {
		n := newTestNode(t, t.TempDir())
		n.cfg.OutputGrace = 300 * time.Millisecond
		n.start(t)
		wd := t.TempDir()
		spec := n.spec(t, 703, "#!/bin/sh\necho ran > ran\n", wd)
		spec.Stdout = "missing/out-%j"
		start := time.Now()
		n.launch(spec)
		r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
		want := "could not open stdout file " + filepath.Join(wd, "missing", "out-703") + ": no such file or directory"
		if r.Error != want || r.Exit != (api.ExitStatus{Code: 1}) || r.LaunchFailed {
			t.Errorf("report = %+v, want the job's own failure %q", r, want)
		}
		if waited := time.Since(start); waited < n.cfg.OutputGrace {
			t.Errorf("failed after %s, before the grace of %s", waited, n.cfg.OutputGrace)
		}
		if exists(filepath.Join(wd, "ran")) {
			t.Error("the script ran")
		}
	})

	t.Run("killed while waiting", func(t *testing.T) {
		n := newTestNode(t, t.TempDir())
		waiting := make(chan struct{})
		rec := &stepRecorder{step: stepOutputDir, at: func() { close(waiting) }}
		n.hook = rec.hook
		n.cfg.OutputGrace = 50 * time.Second
		n.start(t)
		wd := t.TempDir()
		spec := n.spec(t, 704, "#!/bin/sh\necho ran > ran\n", wd)
		spec.Stdout = "missing/out"
		n.launch(spec)
		select {
		case <-waiting:
		case <-time.After(waitLimit):
			t.Fatal("the launch did not wait for the directory")
		}
		// Not committed: nothing of the job can run yet.
		n.fake.waitReport(t, spec.JobRef, api.NodeJobLaunching)
		n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Kill: true}}})
		r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
		if !r.Killed || r.Exit != (api.ExitStatus{Signal: int(syscall.SIGTERM)}) || r.Error != "" {
			t.Errorf("report = %+v, want killed before it ran", r)
		}
		if exists(filepath.Join(wd, "ran")) {
			t.Error("the job ran although it was killed while waiting")
		}
	})

	t.Run("the grace is at most half the launch timeout", func(t *testing.T) {
		n := newTestNode(t, t.TempDir())
		n.cfg.LaunchTimeout = 2 * time.Second
		n.cfg.OutputGrace = 30 * time.Second
		n.start(t)
		spec := n.spec(t, 706, "#!/bin/sh\ntrue\n", t.TempDir())
		spec.Stdout = "missing/out"
		n.launch(spec)
		r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
		if !strings.HasPrefix(r.Error, "could not open stdout file") || r.LaunchFailed {
			t.Errorf("report = %+v, want the job's own failure on its file, not a launch timeout", r)
		}
	})

	t.Run("the launch timeout names the wait", func(t *testing.T) {
		n := newTestNode(t, t.TempDir())
		n.cfg.Heartbeat = 100 * time.Millisecond
		n.cfg.LaunchTimeout = time.Second
		n.cfg.OutputGrace = 900 * time.Millisecond // capped at 500ms
		// Slow the wait past the deadline: the hook stands for a stat
		// that hangs (NFS).
		n.hook = func(ctx context.Context, _ api.JobRef, step string) error {
			if step == stepOutputDir {
				<-ctx.Done()
			}
			return nil
		}
		n.start(t)
		spec := n.spec(t, 705, "#!/bin/sh\ntrue\n", t.TempDir())
		spec.Stdout = "missing/out"
		n.launch(spec)
		r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
		if !strings.HasPrefix(r.Error, "launch timed out after 1s while "+stepOutputDir) || !r.LaunchFailed {
			t.Errorf("report = %+v, want the launch timeout naming the wait", r)
		}
	})
}

// TestMissingDirs: only a directory that does not exist is waited for.
func TestMissingDirs(t *testing.T) {
	wd := t.TempDir()
	file := filepath.Join(wd, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		files JobFiles
		want  string
	}{
		{JobFiles{Stdout: filepath.Join(wd, "out")}, ""},
		{JobFiles{Stdout: filepath.Join(wd, "a", "out")}, filepath.Join(wd, "a")},
		{JobFiles{Stdout: filepath.Join(wd, "out"), Stderr: filepath.Join(wd, "b", "c", "err")}, filepath.Join(wd, "b", "c")},
		{JobFiles{Stdout: filepath.Join(file, "out")}, ""}, // a file in the way fails at once
		{JobFiles{Stdout: "/dev/null"}, ""},
	} {
		if got := missingDirs(tt.files); got != tt.want {
			t.Errorf("missingDirs(%+v) = %q, want %q", tt.files, got, tt.want)
		}
	}
}

func TestOutputGraceConfig(t *testing.T) {
	for _, tt := range []struct {
		grace   time.Duration
		wantErr bool
	}{
		{0, false},
		{5 * time.Second, false},
		{-time.Second, true},
		{DefaultLaunchTimeout, false}, // capped at half of it when used
	} {
		c := validConfig(t)
		c.OutputGrace = tt.grace
		err := c.Validate()
		if (err != nil) != tt.wantErr || err != nil && !strings.Contains(err.Error(), "output_grace") {
			t.Errorf("output_grace %s: %v", tt.grace, err)
		}
	}
}
