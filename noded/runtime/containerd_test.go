package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/ctr"
	"github.com/tide-hpc/tide/noded/stepd"
)

// testContainerd is the containerd runtime on the containerd of
// $TIDE_TEST_CONTAINERD, in a namespace of its own, with the busybox
// test image imported (skipped without one, or not as root).
func testContainerd(t *testing.T) *Containerd {
	t.Helper()
	sock := os.Getenv("TIDE_TEST_CONTAINERD")
	if sock == "" || os.Getuid() != 0 {
		t.Skip("needs root and TIDE_TEST_CONTAINERD (a containerd socket; see scripts/containerd-private.sh)")
	}
	b := make([]byte, 4)
	rand.Read(b)
	tar := filepath.Join(t.TempDir(), "bb.tar")
	if out, err := exec.Command("../../scripts/build-test-image.sh", tar).CombinedOutput(); err != nil {
		t.Fatalf("build image: %v\n%s", err, out)
	}
	c, err := ctr.Connect(context.Background(), sock, "tide-unit-"+hex.EncodeToString(b), os.Getenv("TIDE_SNAPSHOTTER"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(tar)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Import(context.Background(), f)
	f.Close()
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	r := NewContainerd(c, ContainerdConfig{Node: "n1", StateDir: t.TempDir(), Pull: ctr.PullNever, Logger: testLogger()})
	t.Cleanup(func() {
		c.RemoveImage(context.Background(), "tide-test/bb")
		r.Close()
	})
	return r
}

// containerJob is a container job of the test's own user running
// script in the test image.
func containerJob(t *testing.T, id uint64, script string) Job {
	j := testJob(t, id, script)
	wd := t.TempDir()
	spec := &api.LaunchSpec{JobRef: j.Ref, ContainerImage: "docker.io/tide-test/bb:latest"}
	j.Spec = spec
	j.Resolve = func() Launch {
		return Launch{Env: []string{"PATH=/bin"}, Files: Files{Stdin: "/dev/null", Stdout: filepath.Join(wd, "out")},
			WorkDir: wd, User: User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Groups: []uint32{uint32(os.Getgid())}, Umask: -1},
			CPUs: 1, MemoryMB: 64}
	}
	return j
}

// TestContainerdRuntime runs a job through containerd: its task is
// running, has processes and a cgroup to measure, freezes and thaws,
// dies of the signal sent (recorded so that 128+N reads as signal N),
// and leaves no container behind.
func TestContainerdRuntime(t *testing.T) {
	r := testContainerd(t)
	ctx := context.Background()
	j := containerJob(t, 90, "#!/bin/sh\necho up\nwhile :; do sleep 1; done\n")
	exited, err := r.Start(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.State(j); got != Running {
		t.Fatalf("State = %s, want running", got)
	}
	st, err := r.Stats(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats of the running task: %+v", st)
	if len(st.Pids) == 0 {
		t.Errorf("Stats %+v: no processes", st)
	}
	if st.Source == StatsCgroup && !st.HasMemory {
		t.Errorf("Stats %+v: a cgroup without memory", st)
	}
	how, err := r.Freeze(ctx, j, func(string) {})
	if err != nil || how != stepd.FreezeContainer {
		t.Fatalf("Freeze = %q, %v", how, err)
	}
	if err := r.Thaw(ctx, j, how); err != nil {
		t.Fatal(err)
	}
	// PID 1 without a handler ignores SIGTERM; SIGKILL to all ends it.
	if err := r.Signal(ctx, j, syscall.SIGKILL, false); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, exited, "the task's end")
	if st := readStatus(t, j); st.Exit != (api.ExitStatus{Signal: int(syscall.SIGKILL)}) {
		t.Errorf("status %+v, want SIGKILL", st)
	}
	if r.State(j) != Stopped {
		t.Error("still running after its end")
	}
	if err := r.Signal(ctx, j, syscall.SIGTERM, false); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Signal after the end = %v, want ErrNotRunning", err)
	}
	cctx, cancel := r.ctx()
	defer cancel()
	list, err := r.c.Containers(cctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.ID() == r.containerID(j.Ref) {
			t.Error("container left after the job's end")
		}
	}
	if err := r.Delete(ctx, j); err != nil {
		t.Errorf("Delete of a removed container: %v", err)
	}
}

// TestContainerdStartFaults: what the job asks for and cannot have is
// the job's fault; an image the node lacks with pulls off too.
func TestContainerdStartFaults(t *testing.T) {
	r := testContainerd(t)
	tests := []struct {
		name  string
		setup func(j *Job)
	}{
		{name: "input file", setup: func(j *Job) {
			res := j.Resolve
			j.Resolve = func() Launch { l := res(); l.Files.Stdin = "/etc/hostname"; return l }
		}},
		{name: "missing mount source", setup: func(j *Job) {
			j.Spec.ContainerMounts = []api.ContainerMount{{Source: "/nonexistent/tide", Destination: "/data"}}
		}},
		{name: "image not on the node", setup: func(j *Job) { j.Spec.ContainerImage = "docker.io/tide-test/none:latest" }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := containerJob(t, uint64(95+i), "#!/bin/sh\ntrue\n")
			tt.setup(&j)
			if _, err := r.Start(context.Background(), j); err == nil || !IsJobFault(err) {
				t.Errorf("Start = %v, want the job's fault", err)
			}
		})
	}
}
