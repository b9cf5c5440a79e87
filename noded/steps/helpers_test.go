package steps

import (
	"bytes"
	"crypto/ed25519"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepcred"
	"github.com/tide-hpc/tide/internal/stepio"
	"github.com/tide-hpc/tide/noded/jobenv"
)

// waitLimit bounds every wait of these tests. It only turns a hang into
// a failure; nothing asserts how fast anything is.
const waitLimit = 45 * time.Second

// waitUntil polls a condition that no channel announces.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stepKey is the cluster key of the tests' node, which before issue 21
// was enough to forge a grant.
const stepKey = "step-test-key-0123456789"

// testSigner stands in for the controller's step key (a fixed seed:
// every test's controller is the same one).
var testSigner = stepcred.NewSigner(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))

// fakeHost is the node daemon as a step server test wants it: job 42
// (its first run) hosted as the test's user unless the test says
// otherwise, a batch job where the test puts one, MPS daemons where the
// test turns them on, and every step's final usage kept.
type fakeHost struct {
	mu      sync.Mutex
	hosted  map[api.JobRef][2]uint32
	changed chan struct{}
	wakes   int
	// batch answers BatchJob (nil: no batch job here).
	batch func(id uint64) (*api.LaunchSpec, int, bool)
	// mps: the node runs MPS daemons, with these directories per GPU.
	mps      map[int]jobenv.MPSDirs
	held     map[[2]uint64][]int
	released [][2]uint64
	ended    []StepUsage
}

var _ Host = (*fakeHost)(nil)

func newFakeHost() *fakeHost {
	h := &fakeHost{hosted: map[api.JobRef][2]uint32{}, changed: make(chan struct{}), held: map[[2]uint64][]int{}}
	h.host(api.JobRef{JobID: 42}, uint32(os.Getuid()), uint32(os.Getgid()))
	return h
}

// host lists ref as hosted here as uid and gid, as the controller would.
func (h *fakeHost) host(ref api.JobRef, uid, gid uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hosted[ref] = [2]uint32{uid, gid}
	close(h.changed)
	h.changed = make(chan struct{})
}

// unhost takes every job off the list.
func (h *fakeHost) unhost() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hosted = map[api.JobRef][2]uint32{}
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *fakeHost) JobUser(ref api.JobRef) (uint32, uint32, bool, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	u, ok := h.hosted[ref]
	return u[0], u[1], ok, h.changed
}

func (h *fakeHost) Wake() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wakes++
}

func (h *fakeHost) BatchJob(id uint64) (*api.LaunchSpec, int, bool) {
	h.mu.Lock()
	batch := h.batch
	h.mu.Unlock()
	if batch == nil {
		return nil, 0, false
	}
	return batch(id)
}

func (h *fakeHost) Groups(_, gid uint32) []uint32 { return []uint32{gid} }

func (h *fakeHost) AcquireMPS(job uint64, step uint32, gpus []int) (map[int]jobenv.MPSDirs, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mps == nil {
		return nil, false
	}
	h.held[[2]uint64{job, uint64(step)}] = gpus
	out := map[int]jobenv.MPSDirs{}
	for _, g := range gpus {
		if d, ok := h.mps[g]; ok {
			out[g] = d
		}
	}
	return out, true
}

func (h *fakeHost) ReleaseMPS(job uint64, step uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = append(h.released, [2]uint64{job, uint64(step)})
}

func (h *fakeHost) StepEnded(u StepUsage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = append(h.ended, u)
}

// endedSteps returns the final usages the host got.
func (h *fakeHost) endedSteps() []StepUsage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]StepUsage(nil), h.ended...)
}

// testConfig is the configuration of a step server for node n1 on
// loopback, whose state directory has testSigner's key pinned.
func testConfig(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	if err := stepcred.WritePublicFile(filepath.Join(dir, PinnedKeyFile), testSigner.Public()); err != nil {
		t.Fatal(err)
	}
	return Config{Node: "n1", Addr: "127.0.0.1:0", StateDir: dir, KillWait: time.Second,
		AsRoot: os.Geteuid() == 0, AllowRootJobs: true, LogLevel: "info"}
}

// startServer starts a step server of cfg with host, closed with the
// test.
func startServer(t *testing.T, cfg Config, host Host) *Server {
	t.Helper()
	s, err := Start(cfg, host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// testStepServer runs a step listener for node n1 on loopback, with
// job 42 hosted there.
func testStepServer(t *testing.T) *Server { return testStepServerRoot(t, true) }

// testStepServerRoot is testStepServer with allow_root_jobs given.
func testStepServerRoot(t *testing.T, allowRoot bool) *Server {
	t.Helper()
	cfg := testConfig(t)
	cfg.AllowRootJobs = allowRoot // tests run as root in CI
	return startServer(t, cfg, newFakeHost())
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
func dialStep(t *testing.T, s *Server, sg api.SignedGrant, mode string) (net.Conn, stepio.Frame) {
	t.Helper()
	return dialStepHello(t, s, stepio.HelloMsg{Grant: sg, StdinMode: mode})
}

// runStep runs a step to its end and returns its tasks' output, or the
// node's error.
func runStep(t *testing.T, s *Server, sg api.SignedGrant) (string, string) {
	t.Helper()
	c, f := dialStep(t, s, sg, stepio.StdinNone)
	if f.Type == stepio.Error {
		return "", string(f.Payload)
	}
	if f.Type != stepio.Ready {
		t.Fatalf("first frame %s %q", f.Type, f.Payload)
	}
	var out strings.Builder
	for {
		f, err := stepio.ReadFrame(c)
		if err != nil {
			break
		}
		if f.Type == stepio.Stdout || f.Type == stepio.Stderr {
			out.Write(f.Payload)
		}
	}
	return out.String(), ""
}
