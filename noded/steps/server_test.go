package steps

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
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
	"github.com/tide-hpc/tide/noded/jobenv"
)

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

// TestStepServerRefuses checks that a grant that is not the
// controller's, or that is for a job not running here as its user, or
// that was used before, starts nothing: the refused step's command would
// leave a mark.
func TestStepServerRefuses(t *testing.T) {
	s := testStepServer(t)
	s.SetHostedWait(200 * time.Millisecond)
	mark := filepath.Join(t.TempDir(), "ran")
	argv := []string{"/bin/sh", "-c", "echo ran >> " + mark}
	grant := func(edit func(*api.StepGrant)) api.SignedGrant { return stepGrant(t, s.advertised, edit, argv...) }
	good := grant(nil)
	tampered := good
	tampered.Body = bytes.Replace(good.Body, []byte(`"user_id":`), []byte(`"user_id":1`), 1)
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	otherKey, _ := stepcred.NewSigner(otherPriv).Sign(mustDecode(t, good))
	// What anyone holding the cluster key could make before issue 21:
	// an HMAC of the grant under that key, here for root and a job that
	// does not exist.
	forged := func(body []byte) api.SignedGrant {
		m := hmac.New(sha256.New, []byte(stepKey))
		m.Write(body)
		return api.SignedGrant{Body: body, Cred: hex.EncodeToString(m.Sum(nil))}
	}
	rootBody, _ := json.Marshal(mustDecode(t, grant(func(g *api.StepGrant) { g.JobID, g.UserID, g.GroupID = 999, 0, 0 })))
	tests := []struct {
		name string
		sg   api.SignedGrant
		want string
	}{
		{name: "tampered grant", sg: tampered, want: "invalid step credential"},
		{name: "grant signed with another key", sg: otherKey, want: "n1: invalid step credential: not signed by the controller's step key"},
		{name: "grant forged with the cluster key", sg: forged(rootBody), want: "invalid step credential"},
		{name: "expired grant", sg: grant(func(g *api.StepGrant) { g.Expires = time.Now().Add(-time.Second) }), want: "step credential expired"},
		{name: "grant for other nodes", sg: grant(func(g *api.StepGrant) { g.Nodes = g.Nodes[1:] }), want: "step 42.3 does not run on n1"},
		{name: "job not on this node", sg: grant(func(g *api.StepGrant) { g.JobID = 43 }), want: "n1: step refused: job 43 (run 0) does not run on this node"},
		{name: "earlier run of the job", sg: grant(func(g *api.StepGrant) { g.Restart = 1 }), want: "job 42 (run 1) does not run on this node"},
		{name: "another uid", sg: grant(func(g *api.StepGrant) { g.UserID++ }), want: "not as the grant's uid"},
		{name: "another gid", sg: grant(func(g *api.StepGrant) { g.GroupID++ }), want: "not as the grant's uid"},
		{name: "issued before tided started", sg: grant(func(g *api.StepGrant) { g.Issued = s.since.Add(-time.Second) }), want: "before this node's tided started"},
	}
	if os.Geteuid() == 0 {
		strict := testStepServerRoot(t, false)
		_, f := dialStep(t, strict, stepGrant(t, strict.advertised, nil, argv...), stepio.StdinNone)
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
	if b, err := os.ReadFile(mark); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused step ran: %q %v", b, err)
	}

	t.Run("replayed grant", func(t *testing.T) {
		if out, nodeErr := runStep(t, s, good); nodeErr != "" || out != "" {
			t.Fatalf("first use: output %q, node error %q", out, nodeErr)
		}
		_, f := dialStep(t, s, good, stepio.StdinNone)
		if want := "step 42.3 already started on this node"; f.Type != stepio.Error || !strings.Contains(string(f.Payload), want) {
			t.Fatalf("replay answered %s %q, want error containing %q", f.Type, f.Payload, want)
		}
		if b, _ := os.ReadFile(mark); string(b) != "ran\nran\n" {
			t.Fatalf("marks %q, want the two tasks of the first use only", b)
		}
	})
	t.Run("missing command: the tasks fail as their execve would", func(t *testing.T) {
		c, f := dialStep(t, s, stepGrant(t, s.advertised, func(g *api.StepGrant) { g.StepID = 4 }, "no-such-command-xyz"), stepio.StdinNone)
		if f.Type != stepio.Ready {
			t.Fatalf("answer %s %q", f.Type, f.Payload)
		}
		stderr, _, exits := stepFrames(t, c)
		for _, task := range []uint32{0, 1} {
			if exits[task].Code != 2 || stderr[task] != "slurmstepd: error: execve(): no-such-command-xyz: No such file or directory\n" {
				t.Errorf("task %d: exit %v, stderr %q", task, exits[task], stderr[task])
			}
		}
	})
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
			"HOME": "/home/alice", "PATH": jobenv.DefaultPath, "SLURM_JOB_ID": "1234", "SLURM_STEP_ID": "2", "SLURM_PROCID": "1",
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

// TestExecFailure: a program that cannot be run makes a task that fails
// as its execve would under slurmstepd: the reason on its stderr, the
// errno as its exit code.
func TestExecFailure(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "noexec"), []byte("x"), 0o644)
	tests := []struct {
		exe, msg string
		code     int
	}{
		{exe: "/bad/bad/bad", msg: "slurmstepd: error: execve(): /bad/bad/bad: No such file or directory\n", code: 2},
		{exe: "no-such-command", msg: "slurmstepd: error: execve(): no-such-command: No such file or directory\n", code: 2},
		{exe: "./noexec", msg: "slurmstepd: error: execve(): ./noexec: Permission denied\n", code: 13},
		{exe: dir, msg: "slurmstepd: error: execve(): " + dir + ": Permission denied\n", code: 13},
	}
	for _, tt := range tests {
		t.Run(tt.exe, func(t *testing.T) {
			_, err := resolveExe(tt.exe, dir, "/usr/bin")
			var ee *execError
			if !errors.As(err, &ee) {
				t.Fatalf("resolveExe error %v is not an execError", err)
			}
			cmd := execFailCmd(ee, nil, dir)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err = cmd.Run()
			var xe *exec.ExitError
			if !errors.As(err, &xe) || xe.ExitCode() != tt.code {
				t.Fatalf("exit %v, want code %d", err, tt.code)
			}
			if stderr.String() != tt.msg {
				t.Fatalf("stderr %q, want %q", stderr.String(), tt.msg)
			}
		})
	}
}

// TestViaTaskPIDShellUmask: the task runs with the umask srun sent, and
// an invalid one is ignored.
func TestViaTaskPIDShellUmask(t *testing.T) {
	for _, tt := range []struct{ env, want string }{
		{env: "SLURM_UMASK=0023", want: "0023"},
		{env: "SLURM_UMASK=0077", want: "0077"},
		{env: "SLURM_UMASK=; rm -rf /", want: ""},
	} {
		cmd := viaTaskPIDShell(&exec.Cmd{Path: "/bin/sh", Args: []string{"sh", "-c", "umask"}, Env: []string{tt.env}})
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		got := strings.TrimSpace(string(out))
		if tt.want == "" {
			if got == "" {
				t.Errorf("%s: no umask printed", tt.env)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("%s: umask %s, want %s", tt.env, got, tt.want)
		}
	}
}
