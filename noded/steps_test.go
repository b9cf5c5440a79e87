package noded

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepcred"
	"github.com/tide-hpc/tide/internal/stepio"
)

const stepKey = "step-test-key-0123456789"

// Every daemon the package's tests set up listens for steps on a free
// loopback port, never on all interfaces.
func init() { defaultStepAddr = "127.0.0.1:0" }

// testStepServer runs a step listener for node n1 on loopback.
func testStepServer(t *testing.T) *stepServer { return testStepServerRoot(t, true) }

// testStepServerRoot is testStepServer with allow_root_jobs given.
func testStepServerRoot(t *testing.T, allowRoot bool) *stepServer {
	t.Helper()
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Name, cfg.KillWait, cfg.StateDir = "n1", time.Second, dir
	cfg.KeyFile = writeKey(t, dir, 0o600, stepKey+"\n")
	cfg.StepAddr = "127.0.0.1:0"
	cfg.AllowRootJobs = allowRoot // tests run as root in CI
	d := &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), asRoot: os.Geteuid() == 0}
	if err := d.startSteps(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stopSteps)
	return d.steps
}

// testGrant is a step of two tasks on n1 (and one on n2) running argv.
func testGrant(t *testing.T, addr string, expires time.Time, argv ...string) api.SignedGrant {
	t.Helper()
	g := &api.StepGrant{JobID: 42, StepID: 3, JobName: "t", UserID: uint32(os.Getuid()), GroupID: uint32(os.Getgid()),
		User: "u", Expires: expires, JobNodes: []string{"n1", "n2"}, NTasks: 3,
		Nodes: []api.StepNode{{Name: "n1", Addr: addr, Ranks: []int{0, 1}, CPUs: 4}, {Name: "n2", Addr: "127.0.0.1:9", Ranks: []int{2}, CPUs: 4}},
		Argv:  argv, Cwd: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}}
	sg, err := stepcred.Sign(stepKey, g)
	if err != nil {
		t.Fatal(err)
	}
	return sg
}

// dialStep connects and says hello; it returns the connection and the
// node's first answer.
func dialStep(t *testing.T, s *stepServer, sg api.SignedGrant, mode string) (net.Conn, stepio.Frame) {
	t.Helper()
	c, err := net.Dial("tcp", s.ln.Addr().String())
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

func TestStepServerRunsTasks(t *testing.T) {
	s := testStepServer(t)
	sg := testGrant(t, s.advertised, time.Now().Add(time.Hour), "/bin/sh", "-c", `read line; echo "$SLURM_PROCID $line"; echo err >&2; exit $((SLURM_PROCID + 1))`)
	c, f := dialStep(t, s, sg, stepio.StdinAll)
	if f.Type != stepio.Ready {
		t.Fatalf("first frame %s %q", f.Type, f.Payload)
	}
	stepio.WriteFrame(c, stepio.Frame{Type: stepio.Stdin, Task: stepio.AllTasks, Payload: []byte("hi\n")})
	stepio.WriteFrame(c, stepio.Frame{Type: stepio.StdinEOF, Task: stepio.AllTasks})
	out := map[uint32]string{}
	errs := map[uint32]string{}
	exits := map[uint32]api.ExitStatus{}
	for {
		f, err := stepio.ReadFrame(c)
		if err != nil {
			break
		}
		switch f.Type {
		case stepio.Stdout:
			out[f.Task] += string(f.Payload)
		case stepio.Stderr:
			errs[f.Task] += string(f.Payload)
		case stepio.Exit:
			exits[f.Task], _ = stepio.ParseExit(f.Payload)
		}
	}
	want := map[uint32]api.ExitStatus{0: {Code: 1}, 1: {Code: 2}}
	if diff := cmp.Diff(want, exits); diff != "" {
		t.Errorf("exits (-want +got):\n%s", diff)
	}
	if out[0] != "0 hi\n" || out[1] != "1 hi\n" || errs[0] != "err\n" || errs[1] != "err\n" {
		t.Errorf("stdout %v stderr %v", out, errs)
	}
}

func TestStepServerRefuses(t *testing.T) {
	s := testStepServer(t)
	good := testGrant(t, s.advertised, time.Now().Add(time.Hour), "/bin/true")
	tampered := good
	tampered.Body = bytes.Replace(good.Body, []byte(`"/bin/true"`), []byte(`"/bin/echo"`), 1)
	otherKey, _ := stepcred.Sign("another-key-0123456789", mustDecode(t, good))
	tests := []struct {
		name string
		sg   api.SignedGrant
		want string
	}{
		{name: "tampered grant", sg: tampered, want: "invalid step credential"},
		{name: "grant signed with another key", sg: otherKey, want: "invalid step credential"},
		{name: "expired grant", sg: testGrant(t, s.advertised, time.Now().Add(-time.Second), "/bin/true"), want: "expired"},
		{name: "missing command", sg: testGrant(t, s.advertised, time.Now().Add(time.Hour), "no-such-command-xyz"), want: "command not found"},
	}
	if os.Geteuid() == 0 {
		strict := testStepServerRoot(t, false)
		_, f := dialStep(t, strict, testGrant(t, strict.advertised, time.Now().Add(time.Hour), "/bin/true"), stepio.StdinNone)
		if f.Type != stepio.Error || !strings.Contains(string(f.Payload), "root jobs are not allowed") {
			t.Errorf("root step on a node without allow_root_jobs: %s %q", f.Type, f.Payload)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, f := dialStep(t, s, tt.sg, stepio.StdinNone)
			if f.Type != stepio.Error || !strings.Contains(string(f.Payload), tt.want) {
				t.Fatalf("answer %s %q, want error containing %q", f.Type, f.Payload, tt.want)
			}
		})
	}
}

func mustDecode(t *testing.T, sg api.SignedGrant) *api.StepGrant {
	t.Helper()
	g, err := stepio.Decode(sg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestStepServerKillsOnDisconnect checks that a step whose srun goes
// away leaves no task behind, even one that ignores SIGTERM.
func TestStepServerKillsOnDisconnect(t *testing.T) {
	s := testStepServer(t)
	sg := testGrant(t, s.advertised, time.Now().Add(time.Hour), "/bin/sh", "-c", `trap "" TERM; sleep 300 & wait`)
	c, f := dialStep(t, s, sg, stepio.StdinNone)
	if f.Type != stepio.Ready {
		t.Fatalf("first frame %s %q", f.Type, f.Payload)
	}
	var ready stepio.ReadyMsg
	if err := json.Unmarshal(f.Payload, &ready); err != nil || len(ready.Pids) != 2 {
		t.Fatalf("ready %q: %v", f.Payload, err)
	}
	c.Close()
	for _, pid := range ready.Pids {
		for alive(pid) {
			time.Sleep(10 * time.Millisecond)
		}
		// The task's group (its sleep) went with it.
		for syscall.Kill(-pid, 0) == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

func TestStepEnv(t *testing.T) {
	g := &api.StepGrant{JobID: 1234, StepID: 2, JobName: "train", UserID: 1000, GroupID: 100, User: "alice",
		Partition: "gpu", Cluster: "c1", JobNodes: []string{"gpu01", "gpu02", "gpu03"}, NTasks: 3,
		Nodes: []api.StepNode{
			{Name: "gpu01", Addr: "10.0.0.1:6818", Ranks: []int{0, 1}, GPUs: [][]int{{0}, {3}}, CPUs: 8},
			{Name: "gpu02", Addr: "10.0.0.2:6818", Ranks: []int{2}, CPUs: 8},
		},
		Env: []string{"HOME=/home/alice", "CUDA_VISIBLE_DEVICES=0,1", "SLURM_PROCID=0", "NVIDIA_VISIBLE_DEVICES=GPU-x"}}
	tests := []struct {
		name    string
		node, k int
		want    map[string]string
		absent  []string
	}{
		{name: "second task of the first node", node: 0, k: 1, want: map[string]string{
			"HOME": "/home/alice", "PATH": defaultPath, "SLURM_JOB_ID": "1234", "SLURM_STEP_ID": "2", "SLURM_PROCID": "1",
			"SLURM_LOCALID": "1", "SLURM_NODEID": "0", "SLURM_NTASKS": "3", "SLURM_NNODES": "2",
			"SLURM_STEP_NODELIST": "gpu[01-02]", "SLURM_JOB_NODELIST": "gpu[01-03]", "SLURM_STEP_NUM_TASKS": "3",
			"SLURM_TASKS_PER_NODE": "2,1", "CUDA_VISIBLE_DEVICES": "3", "SLURM_STEP_GPUS": "0,3",
			"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29734", "WORLD_SIZE": "3", "RANK": "1", "LOCAL_RANK": "1",
			"LOCAL_WORLD_SIZE": "2", "TIDE_PROCID": "1", "SLURMD_NODENAME": "gpu01", "SLURM_GTIDS": "0,1"},
			absent: []string{"NVIDIA_VISIBLE_DEVICES"}},
		{name: "task on a node without GPUs drops the batch host's", node: 1, k: 0, want: map[string]string{
			"SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_NODEID": "1", "RANK": "2", "LOCAL_RANK": "0",
			"SLURMD_NODENAME": "gpu02", "MASTER_ADDR": "10.0.0.1"},
			absent: []string{"CUDA_VISIBLE_DEVICES", "TIDE_STEP_GPUS", "NVIDIA_VISIBLE_DEVICES"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := stepEnv(g, tt.node, tt.k)
			got := map[string]string{}
			keys := []string{}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				if _, dup := got[k]; dup {
					t.Errorf("%s set twice", k)
				}
				got[k] = v
				keys = append(keys, k)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			for _, k := range tt.absent {
				if slices.Contains(keys, k) {
					t.Errorf("%s set to %q, want it absent", k, got[k])
				}
			}
		})
	}
	// A MASTER_PORT of the user's own stays.
	g.Env = append(g.Env, "MASTER_PORT=1234")
	if v := envValue(stepEnv(g, 0, 0), "MASTER_PORT"); v != "1234" {
		t.Errorf("MASTER_PORT = %q, want the user's 1234", v)
	}
}

func TestResolveExe(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "local"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "noexec"), []byte("x"), 0o644)
	tests := []struct {
		name, exe, path string
		want            string
		wantErr         bool
	}{
		{name: "PATH lookup", exe: "tool", path: bin, want: filepath.Join(bin, "tool")},
		{name: "dot is relative to cwd", exe: "./local", path: bin, want: filepath.Join(dir, "local")},
		{name: "working directory last", exe: "local", path: bin, want: filepath.Join(dir, "local")},
		{name: "absolute", exe: "/bin/sh", path: bin, want: "/bin/sh"},
		{name: "not executable", exe: "./noexec", path: bin, wantErr: true},
		{name: "missing", exe: "nothing-here", path: bin, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveExe(tt.exe, dir, tt.path)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("resolveExe = %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestAdvertiseAddr(t *testing.T) {
	tests := []struct{ name, bound, host, want string }{
		{name: "loopback kept", bound: "127.0.0.1:4000", host: "gpu01", want: "127.0.0.1:4000"},
		{name: "any address becomes the hostname", bound: "0.0.0.0:6818", host: "gpu01", want: "gpu01:6818"},
		{name: "ipv6 any", bound: "[::]:6818", host: "gpu01", want: "gpu01:6818"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := advertiseAddr(tt.bound, tt.host); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}
