package noded

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepcred"
	"github.com/tide-hpc/tide/internal/stepio"
)

// TestStepGrantBatchJob: a step of a batch job this node launched needs
// no hosted entry, and is refused once the job finished or for another
// uid.
func TestStepGrantBatchJob(t *testing.T) {
	d := fenceDaemon(t, "off", nil, nil)
	d.hosted.set(nil, 2) // the controller: nothing hosted here
	d.steps.SetHostedWait(200 * time.Millisecond)
	grant := func(step uint32, edit func(*api.StepGrant)) api.SignedGrant {
		return stepGrant(t, d.steps.Advertised(), func(g *api.StepGrant) {
			g.StepID = step
			if edit != nil {
				edit(g)
			}
		}, "/bin/echo", "batch step")
	}
	if _, nodeErr := runStep(t, d, grant(1, nil)); !strings.Contains(nodeErr, "job 42 (run 0) does not run on this node") {
		t.Fatalf("before the launch: node error %q", nodeErr)
	}
	addBatchJob(t, d, api.NodeAlloc{Node: "n1", CPUs: 2}, 0)
	if out, nodeErr := runStep(t, d, grant(2, nil)); nodeErr != "" || out != "batch step\nbatch step\n" {
		t.Fatalf("step of the launched job: output %q, node error %q", out, nodeErr)
	}
	if _, nodeErr := runStep(t, d, grant(3, func(g *api.StepGrant) { g.UserID += 7 })); !strings.Contains(nodeErr, fmt.Sprintf("runs on this node as uid %d", os.Getuid())) {
		t.Fatalf("another uid: node error %q", nodeErr)
	}
	d.mu.Lock()
	d.jobs[api.JobRef{JobID: 42}].status = &jobStatus{}
	d.mu.Unlock()
	if _, nodeErr := runStep(t, d, grant(4, nil)); !strings.Contains(nodeErr, "does not run on this node") {
		t.Fatalf("finished job: node error %q", nodeErr)
	}
}

// TestStepGrantWaitsForHostedList: a grant that arrives before the
// controller's list names its job waits for the list.
func TestStepGrantWaitsForHostedList(t *testing.T) {
	s := testStepServer(t)
	s.d.hosted.set(nil, 2)
	sg := stepGrant(t, s.advertised, nil, "/bin/echo", "late")
	time.AfterFunc(100*time.Millisecond, func() { hostTestJob(s.d) })
	if out, nodeErr := runStep(t, s.d, sg); nodeErr != "" || out != "late\nlate\n" {
		t.Fatalf("output %q, node error %q", out, nodeErr)
	}
}

// TestStepKeyPinning: the first key a controller presents is pinned on
// disk and survives a restart of tided; another key is refused, with a
// hint, whether it comes later or the pin was put there beforehand.
func TestStepKeyPinning(t *testing.T) {
	newServer := func(dir string) *testSteps {
		cfg := DefaultConfig()
		cfg.Name, cfg.StateDir, cfg.StepAddr, cfg.AllowRootJobs = "n1", dir, "127.0.0.1:0", true
		d := &Daemon{cfg: cfg, log: testLogger(), asRoot: os.Geteuid() == 0}
		if err := d.startSteps(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.stopSteps)
		hostTestJob(d)
		return &testSteps{Server: d.steps, d: d, advertised: d.steps.Advertised()}
	}
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	other := stepcred.NewSigner(otherPriv)
	signWith := func(s *testSteps, sg *stepcred.Signer, step uint32) api.SignedGrant {
		sg2, err := sg.Sign(mustDecode(t, stepGrant(t, s.advertised, func(g *api.StepGrant) { g.StepID = step }, "/bin/true")))
		if err != nil {
			t.Fatal(err)
		}
		return sg2
	}
	answer := func(s *testSteps, sg api.SignedGrant) stepio.Frame {
		_, f := dialStep(t, s, sg, stepio.StdinNone)
		return f
	}

	dir := t.TempDir()
	s := newServer(dir)
	if f := answer(s, signWith(s, testSigner, 1)); f.Type != stepio.Error || !strings.Contains(string(f.Payload), "no step key from the controller") {
		t.Fatalf("before any registration: %s %q", f.Type, f.Payload)
	}
	s.d.applySteps(api.NodeSyncResponse{StepKey: stepcred.EncodePublic(testSigner.Public())})
	if pub, err := stepcred.ReadPublicFile(filepath.Join(dir, PinnedStepKeyFile)); err != nil || !pub.Equal(testSigner.Public()) {
		t.Fatalf("pin file: %v", err)
	}
	if f := answer(s, signWith(s, testSigner, 2)); f.Type != stepio.Ready {
		t.Fatalf("grant of the pinned key: %s %q", f.Type, f.Payload)
	}
	// The controller comes back with another key.
	s.d.applySteps(api.NodeSyncResponse{StepKey: stepcred.EncodePublic(other.Public())})
	f := answer(s, signWith(s, other, 3))
	if f.Type != stepio.Error || !strings.Contains(string(f.Payload), "step key changed from the "+stepcred.Fingerprint(testSigner.Public())) {
		t.Fatalf("grant of the new key: %s %q", f.Type, f.Payload)
	}
	if f := answer(s, signWith(s, testSigner, 4)); f.Type != stepio.Ready {
		t.Fatalf("grant of the pinned key after the change: %s %q", f.Type, f.Payload)
	}

	// A restarted tided keeps the pin, whatever the controller says.
	s2 := newServer(dir)
	s2.d.applySteps(api.NodeSyncResponse{StepKey: stepcred.EncodePublic(other.Public())})
	if f := answer(s2, signWith(s2, other, 5)); f.Type != stepio.Error || !strings.Contains(string(f.Payload), "invalid step credential") {
		t.Fatalf("new key after a tided restart: %s %q", f.Type, f.Payload)
	}
	if f := answer(s2, signWith(s2, testSigner, 6)); f.Type != stepio.Ready {
		t.Fatalf("pinned key after a tided restart: %s %q", f.Type, f.Payload)
	}

	// A pin an operator placed before the first registration.
	dir3 := t.TempDir()
	if err := stepcred.WritePublicFile(filepath.Join(dir3, PinnedStepKeyFile), other.Public()); err != nil {
		t.Fatal(err)
	}
	s3 := newServer(dir3)
	s3.d.applySteps(api.NodeSyncResponse{StepKey: stepcred.EncodePublic(testSigner.Public())})
	if f := answer(s3, signWith(s3, testSigner, 7)); f.Type != stepio.Error || !strings.Contains(string(f.Payload), "step key changed") {
		t.Fatalf("key other than the provisioned pin: %s %q", f.Type, f.Payload)
	}

	// A pin file that is not a key stops the listener.
	dir4 := t.TempDir()
	os.WriteFile(filepath.Join(dir4, PinnedStepKeyFile), []byte("junk"), 0o644)
	cfg := DefaultConfig()
	cfg.Name, cfg.StateDir, cfg.StepAddr = "n1", dir4, "127.0.0.1:0"
	d4 := &Daemon{cfg: cfg, log: testLogger()}
	if err := d4.startSteps(); err == nil || !strings.Contains(err.Error(), "pinned controller step key") {
		d4.stopSteps()
		t.Fatalf("junk pin file: %v", err)
	}
}

// TestStepsThroughController runs steps on a real tided against the fake
// controller: the registration answer's key is pinned, batch jobs and
// the hosted list admit steps, and a job taken off the list is refused.
func TestStepsThroughController(t *testing.T) {
	n := newTestNode(t, t.TempDir())
	n.fake.stepKey = stepcred.EncodePublic(testSigner.Public())
	n.start(t)
	n.fake.waitFor(t, "registration", func() bool { return n.fake.registered })
	waitUntil(t, "key pinned", func() bool {
		pub := n.d.steps.PinnedKey()
		return pub != nil
	})
	n.d.steps.SetHostedWait(200 * time.Millisecond)
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	grant := func(job uint64, step uint32, argv ...string) api.SignedGrant {
		return stepGrant(t, n.d.steps.Advertised(), func(g *api.StepGrant) {
			g.JobID, g.StepID = job, step
			g.Nodes = g.Nodes[:1]
		}, argv...)
	}

	t.Run("batch job", func(t *testing.T) {
		ref := api.JobRef{JobID: 42}
		n.launch(n.spec(t, 42, "#!/bin/sh\nsleep 300\n", t.TempDir()))
		n.fake.waitReport(t, ref, api.NodeJobRunning)
		if out, nodeErr := runStep(t, n.d, grant(42, 0, "/bin/echo", "in batch")); nodeErr != "" || out != "in batch\nin batch\n" {
			t.Fatalf("output %q, node error %q", out, nodeErr)
		}
		n.fake.queue(api.NodeSyncResponse{Signals: []api.SignalCommand{{JobRef: ref, Kill: true}}})
		n.fake.waitReport(t, ref, api.NodeJobFinished)
	})
	t.Run("allocation", func(t *testing.T) {
		if _, nodeErr := runStep(t, n.d, grant(77, 0, "/bin/true")); !strings.Contains(nodeErr, "job 77 (run 0) does not run on this node") {
			t.Fatalf("before the controller tells: node error %q", nodeErr)
		}
		n.fake.setHosted([]api.HostedJob{{JobRef: api.JobRef{JobID: 77}, UserID: uid, GroupID: gid}}, 5)
		n.fake.waitHostedAck(t, 5)
		if out, nodeErr := runStep(t, n.d, grant(77, 1, "/bin/echo", "in allocation")); nodeErr != "" || out != "in allocation\nin allocation\n" {
			t.Fatalf("output %q, node error %q", out, nodeErr)
		}
		n.fake.setHosted(nil, 6)
		n.fake.waitHostedAck(t, 6)
		if _, nodeErr := runStep(t, n.d, grant(77, 2, "/bin/true")); !strings.Contains(nodeErr, "does not run on this node") {
			t.Fatalf("after the allocation ended: node error %q", nodeErr)
		}
	})
}
