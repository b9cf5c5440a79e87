package noded

import (
	"bytes"
	"crypto/ed25519"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepcred"
	"github.com/tide-hpc/tide/internal/stepio"
	"github.com/tide-hpc/tide/noded/steps"
)

const stepKey = "step-test-key-0123456789"

// testSigner stands in for the controller's step key (a fixed seed:
// every test's controller is the same one).
var testSigner = stepcred.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))

// Every daemon the package's tests set up listens for steps on a free
// loopback port, never on all interfaces.
func init() { defaultStepAddr = "127.0.0.1:0" }

// pinTestKey pins testSigner's key in state directory dir, as the first
// registration would.
func pinTestKey(t *testing.T, dir string) {
	t.Helper()
	if err := stepcred.WritePublicFile(filepath.Join(dir, PinnedStepKeyFile), testSigner.Public()); err != nil {
		t.Fatal(err)
	}
}

// hostTestJob tells d, as the controller would, that job 42 (its first
// run) holds a share of it as the test's user.
func hostTestJob(d *Daemon) {
	d.hosted.set([]api.HostedJob{{JobRef: api.JobRef{JobID: 42}, UserID: uint32(os.Getuid()), GroupID: uint32(os.Getgid())}}, 1)
}

// testSteps is a daemon's step server, as the tests of the daemon's
// side of it (steps.go) use it.
type testSteps struct {
	*steps.Server
	d *Daemon
	// advertised is the address srun dials.
	advertised string
}

// testStepServer runs a step listener for node n1 on loopback, with
// job 42 hosted there.
func testStepServer(t *testing.T) *testSteps { return testStepServerRoot(t, true) }

// testStepServerRoot is testStepServer with allow_root_jobs given.
func testStepServerRoot(t *testing.T, allowRoot bool) *testSteps {
	t.Helper()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Name, cfg.KillWait, cfg.StateDir = "n1", time.Second, dir
	cfg.KeyFile = writeKey(t, dir, 0o600, stepKey+"\n")
	cfg.StepAddr = "127.0.0.1:0"
	cfg.AllowRootJobs = allowRoot // tests run as root in CI
	pinTestKey(t, dir)
	d := &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), asRoot: os.Geteuid() == 0}
	if err := d.startSteps(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stopSteps)
	hostTestJob(d)
	return &testSteps{Server: d.steps, d: d, advertised: d.steps.Advertised()}
}

// stepGrant is step 3 of job 42: two tasks on n1 (and one on n2)
// running argv, signed by testSigner after edit changed it.
func stepGrant(t *testing.T, addr string, edit func(*api.StepGrant), argv ...string) api.SignedGrant {
	t.Helper()
	now := time.Now()
	g := &api.StepGrant{JobID: 42, StepID: 3, JobName: "t", UserID: uint32(os.Getuid()), GroupID: uint32(os.Getgid()),
		User: "u", Issued: now, Expires: now.Add(time.Minute), JobEnd: now.Add(time.Hour), JobNodes: []string{"n1", "n2"}, NTasks: 3,
		Nodes: []api.StepNode{{Name: "n1", Addr: addr, Ranks: []int{0, 1}, CPUs: 4}, {Name: "n2", Addr: "127.0.0.1:9", Ranks: []int{2}, CPUs: 4}},
		Argv:  argv, Cwd: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}}
	if edit != nil {
		edit(g)
	}
	sg, err := testSigner.Sign(g)
	if err != nil {
		t.Fatal(err)
	}
	return sg
}

// testGrant is stepGrant good until expires.
func testGrant(t *testing.T, addr string, expires time.Time, argv ...string) api.SignedGrant {
	t.Helper()
	return stepGrant(t, addr, func(g *api.StepGrant) { g.Expires = expires }, argv...)
}

// dialStep connects and says hello; it returns the connection and the
// node's first answer.
func dialStep(t *testing.T, s interface{ Addr() string }, sg api.SignedGrant, mode string) (net.Conn, stepio.Frame) {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	hf, _ := stepio.JSON(stepio.Hello, 0, stepio.HelloMsg{Grant: sg, StdinMode: mode})
	if err := stepio.WriteFrame(c, hf); err != nil {
		t.Fatal(err)
	}
	f, err := stepio.ReadFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	return c, f
}

func mustDecode(t *testing.T, sg api.SignedGrant) *api.StepGrant {
	t.Helper()
	g, err := stepio.Decode(sg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
