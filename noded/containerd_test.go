package noded

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/noded/ctr"
)

func TestSetupRefusesDeadContainerd(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.cfg.Containerd.Socket = filepath.Join(t.TempDir(), "nobody-listens.sock")
	_, err := Setup(context.Background(), n.cfg, Options{Logger: testLogger(), Executable: testExe})
	if err == nil || !strings.Contains(err.Error(), "containerd (containerd.socket)") {
		t.Fatalf("Setup = %v, want a containerd error", err)
	}
}

// TestContainerJobWithoutContainerd: a container job that reaches a
// node without containerd fails with a reason, and the node does not
// claim the containerd feature.
func TestContainerJobWithoutContainerd(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.start(t)
	n.fake.waitFor(t, "registration", func() bool { return n.fake.registrations == 1 })
	if slices.Contains(n.fake.lastReg.Features, api.FeatureContainerd) {
		t.Fatalf("features %v without containerd", n.fake.lastReg.Features)
	}
	spec := n.spec(t, 301, "#!/bin/sh\ntrue\n", t.TempDir())
	spec.ContainerImage = "docker.io/tide-test/bb:latest"
	n.launch(spec)
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if r.Exit.Code != 1 || !strings.Contains(r.Error, "no container runtime on node n1") {
		t.Fatalf("report %+v", r)
	}
}

// TestDaemonContainerJob runs a job in the busybox test image against
// the containerd of $TIDE_TEST_CONTAINERD (skipped without one).
func TestDaemonContainerJob(t *testing.T) {
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
	defer c.Close()
	f, _ := os.Open(tar)
	imgs, err := c.Import(context.Background(), f)
	f.Close()
	if err != nil || len(imgs) != 1 || imgs[0].Name != "docker.io/tide-test/bb:latest" {
		t.Fatalf("import: %v %+v", err, imgs)
	}
	defer c.RemoveImage(context.Background(), "tide-test/bb")

	n := newTestNode(t, t.TempDir())
	n.cfg.Containerd = ContainerdConfig{Socket: sock, Namespace: ns, Snapshotter: "overlayfs"}
	if s := os.Getenv("TIDE_SNAPSHOTTER"); s != "" {
		n.cfg.Containerd.Snapshotter = s
	}
	n.start(t)
	n.fake.waitFor(t, "registration", func() bool { return n.fake.registrations == 1 })
	if !slices.Contains(n.fake.lastReg.Features, api.FeatureContainerd) {
		t.Fatalf("features %v lack containerd", n.fake.lastReg.Features)
	}
	wd := t.TempDir()
	spec := n.spec(t, 401, "#!/bin/sh\necho \"$SLURM_JOB_ID $(cat /etc/passwd | wc -l)\"\nexit 4\n", wd)
	spec.ContainerImage = "docker.io/tide-test/bb:latest"
	n.launch(spec)
	r := n.fake.waitReport(t, spec.JobRef, api.NodeJobFinished)
	if r.Exit != (api.ExitStatus{Code: 4}) || r.Error != "" || r.OOM {
		t.Fatalf("report %+v", r)
	}
	// The image's /etc/passwd has two lines: the script ran in the image.
	if got := readFile(t, filepath.Join(wd, "slurm-401.out")); got != "401 2\n" {
		t.Fatalf("output %q", got)
	}
}
