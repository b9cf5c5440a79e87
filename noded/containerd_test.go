package noded

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tide-hpc/tide/ctld/api"
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
	n := ctrTestNode(t)
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
