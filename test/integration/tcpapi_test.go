package integration

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/munge/mungetest"
)

// daemonCred runs a command as Debian's daemon (uid/gid 1).
var daemonCred = &syscall.Credential{Uid: 1, Gid: 1}

// cliEnv runs a command as cred (nil: as the test) with env added to
// the environment, in the work dir.
func (c *cluster) cliEnv(cred *syscall.Credential, env []string, args ...string) result {
	c.t.Helper()
	return runBin(c.t, c.workDir(), cred, append(c.caEnv(), env...), args...)
}

// runBin runs binDir's args[0] in dir with this process's environment
// plus env, as cred when not nil, and returns its output and exit code.
func runBin(t *testing.T, dir string, cred *syscall.Credential, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, args[0]), args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return result{out: out.String(), err: errb.String(), code: code}
}

// TestTCPAPIWithTokens runs the CLI against api_addr with tokens from
// `tide token`, as two users: each acts as its token says, neither can
// act on the other's jobs, and a tampered token is refused with nothing
// changed.
func TestTCPAPIWithTokens(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: runs the CLI as nobody and daemon")
	}
	key := make([]byte, 32)
	rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "jwt_hs256.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	c := newClusterOpts(t, clusterOpts{nodes: 1, singleHost: true, ctldYAML: fmt.Sprintf("api_addr: %s\njwt: {key_file: %s, max_lifespan: 1h}\n", addr, keyFile)})

	// Each user gets a token over the socket, for itself.
	token := func(cred *syscall.Credential, args ...string) string {
		t.Helper()
		r := c.cliAs(cred, c.workDir(), append([]string{"tide", "token"}, args...)...)
		tok, ok := strings.CutPrefix(strings.TrimSpace(r.out), "TIDE_JWT=")
		if r.code != 0 || !ok || strings.Count(tok, ".") != 2 {
			t.Fatalf("tide token %v: exit %d, out %q, err %q", args, r.code, r.out, r.err)
		}
		return tok
	}
	nobodyTok := token(nobodyCred, "--lifespan=10m")
	daemonTok := token(daemonCred)
	if r := c.cliAs(nobodyCred, c.workDir(), "tide", "token", "--username=daemon"); r.code != 1 ||
		!strings.Contains(r.err, "only operators may get tokens for other users") {
		t.Errorf("nobody's token for daemon: exit %d, %q", r.code, r.err)
	}
	if r := c.cliAs(nil, c.workDir(), "tide", "token", "--lifespan=2h"); r.code != 1 ||
		!strings.Contains(r.err, "lifespan 7200s is more than the 1h0m0s jwt.max_lifespan allows") {
		t.Errorf("token over the maximum: exit %d, %q", r.code, r.err)
	}

	// Over TCP: the socket is out of reach (a path that does not exist),
	// so every answer comes from api_addr.
	remote := func(cred *syscall.Credential, tok string, args ...string) result {
		t.Helper()
		return c.cliEnv(cred, []string{"TIDE_SOCKET=/nonexistent/tide.sock", "TIDE_CONTROLLER=" + addr, "TIDE_JWT=" + tok}, args...)
	}
	script := filepath.Join(c.workDir(), "sleep.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	submit := func(cred *syscall.Credential, tok string) uint64 {
		t.Helper()
		r := remote(cred, tok, "sbatch", "--parsable", "-o", "/dev/null", script)
		var id uint64
		if _, err := fmt.Sscan(strings.TrimSpace(r.out), &id); r.code != 0 || err != nil {
			t.Fatalf("sbatch over TCP: exit %d, out %q, err %q", r.code, r.out, r.err)
		}
		return id
	}
	mine := submit(nobodyCred, nobodyTok)
	theirs := submit(daemonCred, daemonTok)
	for id, want := range map[uint64]string{mine: "nobody", theirs: "daemon"} {
		if j := c.waitState(id, api.StateRunning, 20*time.Second); j.User != want {
			t.Errorf("job %d runs as %s, want %s", id, j.User, want)
		}
	}
	r := remote(nobodyCred, nobodyTok, "squeue", "-h", "-o", "%i %u %T")
	want := fmt.Sprintf("%d nobody RUNNING\n%d daemon RUNNING\n", mine, theirs)
	if r.code != 0 || r.out != want {
		t.Errorf("squeue over TCP: exit %d, out %q, err %q; want %q", r.code, r.out, r.err, want)
	}

	// The identity is the token's, not the process's: root with
	// nobody's token is nobody (sacct's default is then nobody's jobs,
	// and daemon's job is out of reach).
	if r := remote(nil, nobodyTok, "sacct", "-n", "-X", "-P", "-o", "JobID,User"); r.code != 0 || r.out != fmt.Sprintf("%d|nobody\n", mine) {
		t.Errorf("sacct as root with nobody's token: exit %d, out %q, err %q", r.code, r.out, r.err)
	}
	r = remote(nil, nobodyTok, "scancel", fmt.Sprint(theirs))
	if r.code != 1 || !strings.Contains(r.err, fmt.Sprintf("Kill job error on job id %d: Access/permission denied", theirs)) {
		t.Errorf("scancel of daemon's job with nobody's token: exit %d, %q", r.code, r.err)
	}
	if j := c.job(theirs); j.State != api.StateRunning {
		t.Errorf("daemon's job is %s after nobody's scancel, want RUNNING", j.State)
	}

	// A tampered token (nobody's payload claiming root) is refused
	// with a clear message, and changes nothing.
	parts := strings.Split(nobodyTok, ".")
	forged := parts[0] + "." + tamper(t, parts[1]) + "." + parts[2]
	r = remote(nobodyCred, forged, "scancel", fmt.Sprint(theirs))
	if r.code != 1 || !strings.Contains(r.err, "tidectld: authentication failed: JWT signature invalid") {
		t.Errorf("scancel with a tampered token: exit %d, %q", r.code, r.err)
	}
	if j := c.job(theirs); j.State != api.StateRunning {
		t.Errorf("daemon's job is %s after a tampered token's scancel, want RUNNING", j.State)
	}

	// Each user cancels its own job over TCP.
	for _, u := range []struct {
		cred *syscall.Credential
		tok  string
		id   uint64
	}{{nobodyCred, nobodyTok, mine}, {daemonCred, daemonTok, theirs}} {
		if r := remote(u.cred, u.tok, "scancel", fmt.Sprint(u.id)); r.code != 0 {
			t.Errorf("scancel %d by its owner over TCP: exit %d, %q", u.id, r.code, r.err)
		}
		c.waitTerminal(u.id, 20*time.Second)
	}
	// The audit log names how they came in.
	if r := c.cli("tide", "audit"); !strings.Contains(r.out, "auth=jwt addr=127.0.0.1") {
		t.Errorf("tide audit does not show the TCP callers:\n%s%s", r.out, r.err)
	}
}

// tamper rewrites a token payload's user to root, keeping it base64url.
func tamper(t *testing.T, payload string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Replace(string(raw), `"sun":"nobody"`, `"sun":"root"`, 1)
	if out == string(raw) {
		t.Fatalf("payload %s names no nobody", raw)
	}
	return base64.RawURLEncoding.EncodeToString([]byte(out))
}

// TestTCPAPIWithMunge runs the CLI from "another host" (its own munged,
// sharing the controller's key) against api_addr as two users, with
// MUNGE credentials: identity is what munged vouches for, neither user
// can act on the other's jobs, and a command without a reachable munged
// fails clearly.
func TestTCPAPIWithMunge(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: runs the CLI as nobody and daemon")
	}
	ctl := mungetest.Start(t)
	login := mungetest.StartWithKey(t, ctl.Key)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	c := newClusterOpts(t, clusterOpts{nodes: 1, singleHost: true, ctldYAML: fmt.Sprintf("api_addr: %s\nmunge: {socket: %s}\n", addr, ctl.Socket)})
	gone := filepath.Join(c.dir, "no-such.sock")
	env := []string{"TIDE_CONTROLLER=" + addr, "TIDE_MUNGE_SOCKET=" + login.Socket, "TIDE_SOCKET=" + gone}

	r := c.cliEnv(nobodyCred, env, "sbatch", "--parsable", "-H", "--wrap", "true")
	if r.code != 0 {
		t.Fatalf("sbatch as nobody over TCP: %d %s", r.code, r.err)
	}
	id := strings.TrimSpace(r.out)
	if out := c.cliEnv(nobodyCred, env, "squeue", "-h", "-o", "%i %u").out; strings.TrimSpace(out) != id+" nobody" {
		t.Fatalf("squeue as nobody: %q", out)
	}
	if r := c.cliEnv(daemonCred, env, "scancel", id); r.code == 0 || !strings.Contains(r.err, "Access/permission denied") {
		t.Fatalf("daemon cancelled nobody's job over TCP: %d %s", r.code, r.err)
	}
	if r := c.cliEnv(nobodyCred, env, "scancel", id); r.code != 0 {
		t.Fatalf("nobody's own scancel: %d %s", r.code, r.err)
	}
	noMunge := []string{"TIDE_CONTROLLER=" + addr, "TIDE_MUNGE_SOCKET=" + gone, "TIDE_SOCKET=" + gone}
	if r := c.cliEnv(nobodyCred, noMunge, "squeue"); r.code != 1 || !strings.Contains(r.err, "get a MUNGE credential from munged") {
		t.Fatalf("without munged: %d %s", r.code, r.err)
	}
}
