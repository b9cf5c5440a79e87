package noded

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/ctr"
	"github.com/tide-hpc/tide/noded/stepd"
)

// TestProcessJobExitCodes: the supervisor reads the job's real wait
// status, so a script's own exit code above 128 is an exit code and a
// death by signal is a signal, with either supervisor.
func TestProcessJobExitCodes(t *testing.T) {
	scripts := []struct {
		name, script string
		want         api.ExitStatus
	}{
		{name: "exit 130", script: "#!/bin/sh\nexit 130\n", want: api.ExitStatus{Code: 130}},
		{name: "exit 143", script: "#!/bin/sh\nexit 143\n", want: api.ExitStatus{Code: 143}},
		{name: "killed by SIGINT", script: "#!/bin/sh\nkill -INT $$\nsleep 5\n", want: api.ExitStatus{Signal: int(syscall.SIGINT)}},
		{name: "killed by SIGTERM", script: "#!/bin/sh\nkill -TERM $$\nsleep 5\n", want: api.ExitStatus{Signal: int(syscall.SIGTERM)}},
	}
	for _, mode := range []string{SupervisorShared, SupervisorPerJob} {
		t.Run(mode, func(t *testing.T) {
			n := newTestNode(t, t.TempDir())
			n.cfg.Supervisor = mode
			n.start(t)
			wd := t.TempDir()
			for i, sc := range scripts {
				t.Run(sc.name, func(t *testing.T) {
					spec := n.spec(t, uint64(700+i), sc.script, wd)
					n.launch(spec)
					r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
					if r.Exit != sc.want || r.Error != "" {
						t.Fatalf("report %+v, want exit %s", r, sc.want)
					}
				})
			}
		})
	}
}

// ctrTestNode is a test node running container jobs on the containerd
// of $TIDE_TEST_CONTAINERD, in a namespace of its own, with the busybox
// test image imported (skipped without one, or not as root).
func ctrTestNode(t *testing.T) *testNode {
	t.Helper()
	sock := os.Getenv("TIDE_TEST_CONTAINERD")
	if sock == "" || os.Getuid() != 0 {
		t.Skip("needs root and TIDE_TEST_CONTAINERD (a containerd socket; see scripts/containerd-private.sh)")
	}
	b := make([]byte, 4)
	rand.Read(b)
	ns := "tide-unit-" + hex.EncodeToString(b)
	tar := filepath.Join(t.TempDir(), "bb.tar")
	if out, err := exec.Command("../scripts/build-test-image.sh", tar).CombinedOutput(); err != nil {
		t.Fatalf("build image: %v\n%s", err, out)
	}
	c, err := ctr.Connect(context.Background(), sock, ns, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f, err := os.Open(tar)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Import(context.Background(), f)
	f.Close()
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	t.Cleanup(func() { c.RemoveImage(context.Background(), "tide-test/bb") })
	n := newTestNode(t, t.TempDir())
	n.cfg.Containerd = ContainerdConfig{Socket: sock, Namespace: ns, Snapshotter: "overlayfs"}
	if s := os.Getenv("TIDE_SNAPSHOTTER"); s != "" {
		n.cfg.Containerd.Snapshotter = s
	}
	return n
}

// TestContainerJobExitCodes: a container task's exit status is 128+N
// for a death by signal N; tided reports a signal only when it sent it.
func TestContainerJobExitCodes(t *testing.T) {
	n := ctrTestNode(t)
	n.start(t)
	wd := t.TempDir()
	tests := []struct {
		name, script string
		// kill has tided cancel the job once it printed "up".
		kill bool
		want api.ExitStatus
	}{
		{name: "exit 130 by itself", script: "#!/bin/sh\nexit 130\n", want: api.ExitStatus{Code: 130}},
		{name: "exit 137 by itself", script: "#!/bin/sh\nexit 137\n", want: api.ExitStatus{Code: 137}},
		// PID 1 ignores SIGTERM without a handler: the SIGKILL after
		// the kill wait ends it.
		{name: "cancelled", script: "#!/bin/sh\necho up\nwhile :; do sleep 1; done\n", kill: true,
			want: api.ExitStatus{Signal: int(syscall.SIGKILL)}},
		// Not told apart from a death by SIGTERM (documented).
		{name: "cancelled, trap exits 143", script: "#!/bin/sh\ntrap 'exit 143' TERM\necho up\nwhile :; do sleep 1; done\n", kill: true,
			want: api.ExitStatus{Signal: int(syscall.SIGTERM)}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := n.spec(t, uint64(800+i), tt.script, wd)
			spec.ContainerImage = "docker.io/tide-test/bb:latest"
			n.launch(spec)
			if tt.kill {
				out := filepath.Join(wd, fmt.Sprintf("slurm-%d.out", spec.JobID))
				waitGrows(t, "job started", out, 0)
				n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Kill: true}}})
			}
			r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
			if r.Exit != tt.want || r.Error != "" || r.Killed != tt.kill {
				t.Fatalf("report %+v, want exit %s", r, tt.want)
			}
		})
	}
}

// TestContainerSuspend pauses and resumes a container job through
// containerd (the cgroup freezer), with a process that left the job's
// process group, and kills it while paused.
func TestContainerSuspend(t *testing.T) {
	n := ctrTestNode(t)
	n.start(t)
	wd := t.TempDir()
	spec := n.spec(t, 901, ticker(true), wd)
	spec.ContainerImage = "docker.io/tide-test/bb:latest"
	n.launch(spec)
	n.fake.waitReport(t, spec.JobRef, api.NodeJobRunning)
	out, esc := filepath.Join(wd, "slurm-901.out"), filepath.Join(wd, "escaped.out")
	dir := jobDir(n, spec.JobRef)
	waitGrows(t, "job output", out, 0)
	waitGrows(t, "escaped process output", esc, 0)

	signalUntil(t, n, spec.JobRef, syscall.SIGSTOP, "frozen marker", func() bool {
		f := frozenMarker(t, dir)
		return f != nil && f.How == stepd.FreezeContainer
	})
	waitStill(t, "job output stops", out)
	waitStill(t, "escaped process stops", esc)

	signalUntil(t, n, spec.JobRef, syscall.SIGCONT, "frozen marker removed", func() bool { return frozenMarker(t, dir) == nil })
	waitGrows(t, "job output after resume", out, size(out))
	waitGrows(t, "escaped output after resume", esc, size(esc))

	signalUntil(t, n, spec.JobRef, syscall.SIGSTOP, "frozen again", func() bool { return frozenMarker(t, dir) != nil })
	waitStill(t, "job output stops again", out)
	n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Kill: true}}})
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if !r.Killed || r.Exit != (api.ExitStatus{Signal: int(syscall.SIGKILL)}) {
		t.Errorf("report %+v, want killed with 0:9", r)
	}
	waitStill(t, "escaped process gone with the task", esc)
}

// TestContainerSuspendSurvivesRestart: a tided restarted while a
// container job is paused reattaches to the paused task and resumes it
// on SIGCONT.
func TestContainerSuspendSurvivesRestart(t *testing.T) {
	n := ctrTestNode(t)
	stop := n.start(t)
	wd := t.TempDir()
	spec := n.spec(t, 902, ticker(false), wd)
	spec.ContainerImage = "docker.io/tide-test/bb:latest"
	n.launch(spec)
	out, dir := filepath.Join(wd, "slurm-902.out"), jobDir(n, spec.JobRef)
	waitGrows(t, "job output", out, 0)
	signalUntil(t, n, spec.JobRef, syscall.SIGSTOP, "frozen marker", func() bool {
		f := frozenMarker(t, dir)
		return f != nil && f.How == stepd.FreezeContainer
	})
	waitStill(t, "job output stops", out)
	stop()

	n.start(t)
	n.fake.waitFor(t, "second registration with the running job", func() bool {
		return n.fake.registrations == 2 && len(n.fake.lastReg.Jobs) == 1 && n.fake.lastReg.Jobs[0].State == api.NodeJobRunning
	})
	waitStill(t, "job still paused after the restart", out)
	signalUntil(t, n, spec.JobRef, syscall.SIGCONT, "frozen marker removed", func() bool { return frozenMarker(t, dir) == nil })
	waitGrows(t, "job output after resume", out, size(out))
	n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: spec.JobRef, Kill: true}}})
	if r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished); !r.Killed || r.Exit != (api.ExitStatus{Signal: int(syscall.SIGKILL)}) {
		t.Errorf("report %+v, want killed with 0:9", r)
	}
}

// TestContainerNvidiaHook runs a GPU job's container with a fake NVIDIA
// hook (containerd.nvidia_hook set to its path): runc runs it before
// the job with the container's spec, whose NVIDIA_VISIBLE_DEVICES names
// the job's GPUs by UUID.
func TestContainerNvidiaHook(t *testing.T) {
	n := ctrTestNode(t)
	dir := t.TempDir()
	got := filepath.Join(dir, "hook.out")
	hook := filepath.Join(dir, "nvidia-container-runtime-hook")
	// A hook runs without PATH; it reads the container state (with the
	// bundle directory) on stdin.
	script := "#!/bin/sh\nstate=$(/bin/cat)\nbundle=$(echo \"$state\" | /bin/sed 's/.*\"bundle\":\"\\([^\"]*\\)\".*/\\1/')\n" +
		"{ echo \"$1\"; /bin/grep -o 'NVIDIA_[A-Z_]*=[^\"]*' \"$bundle/config.json\"; } >" + got + "\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	n.cfg.Containerd.NvidiaHook = hook
	n.start(t)
	n.fake.waitFor(t, "registration", func() bool { return n.fake.registrations == 1 })
	devs := n.fake.lastReg.GPUs
	wd := t.TempDir()
	spec := n.spec(t, 903, "#!/bin/sh\necho \"$NVIDIA_VISIBLE_DEVICES\"\n", wd) // GPUs 1 and 3
	spec.ContainerImage = "docker.io/tide-test/bb:latest"
	n.launch(spec)
	if r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished); r.Exit != (api.ExitStatus{}) || r.Error != "" {
		t.Fatalf("report %+v", r)
	}
	want := "NVIDIA_VISIBLE_DEVICES=" + devs[1].UUID + "," + devs[3].UUID
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatalf("the hook did not run: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 3 || lines[0] != "prestart" || !slices.Contains(lines, want) ||
		!slices.Contains(lines, "NVIDIA_DRIVER_CAPABILITIES=compute,utility") {
		t.Fatalf("hook saw %q, want prestart and %s", lines, want)
	}
	if out := readFile(t, filepath.Join(wd, "slurm-903.out")); out != devs[1].UUID+","+devs[3].UUID+"\n" {
		t.Fatalf("job saw NVIDIA_VISIBLE_DEVICES %q", out)
	}
}
