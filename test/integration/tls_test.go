package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/pki"
	"github.com/tide-hpc/tide/internal/stepio"
)

// tap is a TCP proxy that keeps a copy of what clients send through it,
// and the first bytes of each connection: a packet capture's view of
// one direction, without a packet capture.
type tap struct {
	ln    net.Listener
	mu    sync.Mutex
	first [][]byte
	sent  bytes.Buffer
}

func newTap(t *testing.T, target string) *tap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tap{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c, target)
		}
	}()
	return p
}

func (p *tap) pipe(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(c, up); c.Close() }()
	buf := make([]byte, 32<<10)
	for first := true; ; first = false {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if first {
				p.first = append(p.first, bytes.Clone(buf[:n]))
			}
			p.sent.Write(buf[:n])
			p.mu.Unlock()
			if _, err := up.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// isClientHello reports whether b starts a TLS handshake record (22,
// version 3.x) carrying a ClientHello (1).
func isClientHello(b []byte) bool {
	return len(b) >= 6 && b[0] == 0x16 && b[1] == 0x03 && b[5] == 0x01
}

// TestTLSCluster is the whole flow of issue 21's TLS: the cluster CA
// (tidectld ca init), nodes joined with one-time tokens (tided join),
// and from then on mutual TLS between nodes and the controller with no
// cluster key on the wire, node identities checked by the controller,
// srun's step connections over TLS, the CLI over TCP pinning the CA.
func TestTLSCluster(t *testing.T) {
	jwtKey := filepath.Join(t.TempDir(), "jwt.key")
	key := make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(jwtKey, key, 0o600); err != nil {
		t.Fatal(err)
	}
	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	c := newClusterOpts(t, clusterOpts{nodes: 2, singleHost: true, ctldYAML: fmt.Sprintf("api_addr: %s\njwt: {key_file: %s}\n", apiAddr, jwtKey)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, err := pki.ReadPool(c.caFile)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a node's requests on the wire", func(t *testing.T) {
		// gpu02 restarts behind a tap: every connection it makes opens
		// with a TLS ClientHello, and nothing of its requests (the
		// cluster key header, request lines, its name in a report)
		// crosses in clear.
		p := newTap(t, fmt.Sprintf("127.0.0.1:%d", c.port))
		kill(c.tided["gpu02"], syscall.SIGTERM)
		cfgFile := filepath.Join(c.dir, "gpu02.yaml")
		b, err := os.ReadFile(cfgFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg := strings.Replace(string(b), fmt.Sprintf("controller: 127.0.0.1:%d", c.port), "controller: "+p.ln.Addr().String(), 1)
		if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		c.startTided("gpu02")
		c.eventually(20*time.Second, "gpu02 registered through the tap", func() bool {
			p.mu.Lock()
			n := p.sent.Len()
			p.mu.Unlock()
			return n > 0 && strings.Contains(c.cli("sinfo", "-h", "-N", "-n", "gpu02", "-o", "%t").out, "idle")
		})
		j := c.waitTerminal(c.submit("#!/bin/sh\necho on-gpu02\n", "-w", "gpu02"), 30*time.Second)
		if j.State != api.StateCompleted {
			t.Fatalf("job on gpu02 behind the tap: %s", j.State)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		for i, f := range p.first {
			if !isClientHello(f) {
				t.Errorf("connection %d of gpu02 opens with % x, not a TLS ClientHello", i, f[:min(len(f), 8)])
			}
		}
		for _, clear := range []string{client.KeyHeader, "integration-test-key", "POST /api", "HTTP/1.1", `"name":"gpu02"`} {
			if bytes.Contains(p.sent.Bytes(), []byte(clear)) {
				t.Errorf("%q crossed the wire in clear", clear)
			}
		}
		if len(p.first) == 0 {
			t.Fatal("no connection went through the tap")
		}
	})

	t.Run("gpu01's certificate cannot act as gpu02", func(t *testing.T) {
		kp, err := pki.LoadKeyPair(filepath.Join(c.tlsDir("gpu01"), "node.pem"))
		if err != nil {
			t.Fatal(err)
		}
		var h pki.Holder
		h.Set(kp)
		nc := client.NewTLS(fmt.Sprintf("127.0.0.1:%d", c.port), pki.ControllerClient(pool, "127.0.0.1", &h), "")
		defer nc.Close()
		_, err = nc.Register(ctx, api.NodeRegistration{Name: "gpu02", CPUs: 1, MemoryMB: 1024})
		if !errors.Is(err, api.ErrPermissionDenied) {
			t.Fatalf("register gpu02 with gpu01's certificate: %v", err)
		}
		_, err = nc.Sync(ctx, api.NodeSyncRequest{Name: "gpu02", Jobs: []api.NodeJobReport{{JobID: 424242, State: api.NodeJobFinished}}})
		if !errors.Is(err, api.ErrPermissionDenied) {
			t.Fatalf("sync as gpu02 with gpu01's certificate: %v", err)
		}
		if got := strings.TrimSpace(c.cli("sinfo", "-h", "-N", "-n", "gpu02", "-o", "%t").out); got != "idle" {
			t.Errorf("gpu02 is %q after gpu01 posed as it", got)
		}
		b, _ := os.ReadFile(filepath.Join(c.dir, "tidectld.log"))
		if !bytes.Contains(b, []byte("certificate of node gpu01 used to report as node")) {
			t.Error("the controller did not log the impersonation")
		}
	})

	t.Run("the cluster key alone does not get in", func(t *testing.T) {
		plain := client.NewTCP(fmt.Sprintf("127.0.0.1:%d", c.port), "integration-test-key-0123456789")
		defer plain.Close()
		if _, err := plain.Register(ctx, api.NodeRegistration{Name: "gpu02", CPUs: 1, MemoryMB: 1024}); err == nil {
			t.Fatal("plain HTTP with the cluster key registered a node")
		}
		hc, base := c.nodeHTTP()
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/v1/node/register", strings.NewReader(`{"name":"gpu02","cpus":1,"memory_mb":1024}`))
		req.Header.Set(client.KeyHeader, "integration-test-key-0123456789")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !bytes.Contains(body, []byte("not accepted over TLS")) {
			t.Fatalf("the cluster key over TLS: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("join tokens on the command line", func(t *testing.T) {
		tidectld := func(args ...string) result {
			return c.cliAs(nil, c.workDir(), append([]string{"tidectld", "--config", filepath.Join(c.dir, "tide.yaml")}, args...)...)
		}
		r := tidectld("node-token", "create", "--ttl", "2m", "--node", "gpu01")
		tok := strings.TrimSpace(r.out)
		if r.code != 0 || !strings.HasPrefix(tok, "tide1.") || strings.Count(tok, "\n") != 0 || !strings.Contains(r.err, "one join by node gpu01") {
			t.Fatalf("node-token create: exit %d, out %q, err %q", r.code, r.out, r.err)
		}
		// A token whose CA hash is not the controller's CA's: tided
		// refuses the controller before sending anything.
		parsed, err := pki.ParseToken(tok)
		if err != nil {
			t.Fatal(err)
		}
		parsed.CAHash = strings.Repeat("0", 64)
		join := func(token string) result {
			cmd := exec.Command(filepath.Join(binDir, "tided"), "--config", filepath.Join(c.dir, "gpu01.yaml"),
				"--tls-dir", t.TempDir(), "join", "--token", "-")
			cmd.Stdin = strings.NewReader(token + "\n")
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			return result{out: out.String(), err: errb.String(), code: code}
		}
		if r := join(parsed.String()); r.code == 0 || !strings.Contains(r.err, "does not present the CA of the join token") {
			t.Fatalf("join with another CA's hash: exit %d, %q", r.code, r.err)
		}
		if r := join(tok); r.code != 0 || !strings.Contains(r.out, "joined the cluster as node gpu01") {
			t.Fatalf("join: exit %d, out %q, err %q", r.code, r.out, r.err)
		}
		if r := join(tok); r.code == 0 || !strings.Contains(r.err, "was already used") {
			t.Fatalf("second join with one token: exit %d, %q", r.code, r.err)
		}
		if r := c.cliAs(&syscall.Credential{Uid: 65534, Gid: 65534}, c.workDir(), "tidectld", "--config", filepath.Join(c.dir, "tide.yaml"),
			"node-token", "create"); os.Getuid() == 0 && (r.code == 0 || !strings.Contains(r.err, "join tokens are for operators")) {
			t.Fatalf("node-token create as nobody: exit %d, %q", r.code, r.err)
		}
		audit, err := c.api.Audit(ctx, 50)
		if err != nil {
			t.Fatal(err)
		}
		var acts []string
		for _, a := range audit {
			if strings.HasPrefix(a.Action, "node-") {
				acts = append(acts, a.Action)
			}
			if strings.Contains(a.Detail, parsed.Secret) {
				t.Errorf("audit record %+v holds a token's secret", a)
			}
		}
		if n := strings.Count(strings.Join(acts, " "), "node-join"); n < 3 {
			t.Errorf("audit has %d node-join records (2 at the cluster's start, 1 here), actions %v", n, acts)
		}
	})

	t.Run("srun over TLS", func(t *testing.T) {
		r := c.cli("srun", "-N2", "-l", "printenv", "SLURMD_NODENAME")
		if r.code != 0 || !strings.Contains(r.out, "gpu01") || !strings.Contains(r.out, "gpu02") {
			t.Fatalf("srun: exit %d, out %q, err %q", r.code, r.out, r.err)
		}
		// The step listener speaks TLS only: srun's frames in clear get
		// no answer.
		addr := nodeStepAddr(t, c, "gpu01")
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		hf, _ := stepio.JSON(stepio.Hello, 0, stepio.HelloMsg{StdinMode: stepio.StdinNone})
		_ = stepio.WriteFrame(conn, hf)
		_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
		if f, err := stepio.ReadFrame(conn); err == nil {
			t.Fatalf("the step listener answered a plain connection: %s %q", f.Type, f.Payload)
		}
	})

	t.Run("the CLI over TCP pins the CA", func(t *testing.T) {
		r := c.cli("tide", "token")
		tok, ok := strings.CutPrefix(strings.TrimSpace(r.out), "TIDE_JWT=")
		if r.code != 0 || !ok {
			t.Fatalf("tide token: exit %d, %q %q", r.code, r.out, r.err)
		}
		env := []string{"TIDE_SOCKET=/nonexistent/tide.sock", "TIDE_CONTROLLER=" + apiAddr, "TIDE_JWT=" + tok}
		if r := c.cliEnv(nil, env, "squeue", "-h"); r.code != 0 {
			t.Fatalf("squeue over TLS: exit %d, %q", r.code, r.err)
		}
		other, err := pki.NewCA("other", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		otherFile := filepath.Join(t.TempDir(), "other.crt")
		os.WriteFile(otherFile, other.CertPEM(), 0o644)
		before := len(c.cli("squeue", "-h", "-o", "%i").out)
		r = c.cliEnv(nil, append(env, "TIDE_CA="+otherFile), "sbatch", "--wrap", "true")
		if r.code != 1 || !strings.Contains(r.err, "certificate signed by unknown authority") || !strings.Contains(r.err, "TIDE_CA="+otherFile) {
			t.Fatalf("sbatch with another CA: exit %d, %q", r.code, r.err)
		}
		r = c.cliEnv(nil, append(env, "TIDE_CA=/nonexistent/ca.crt"), "squeue")
		if r.code != 1 || !strings.Contains(r.err, "TIDE_CA") {
			t.Fatalf("squeue without the CA: exit %d, %q", r.code, r.err)
		}
		if after := len(c.cli("squeue", "-h", "-o", "%i").out); after != before {
			t.Error("a refused sbatch queued a job")
		}
	})
}

// TestTLSCertRenewal: with certificates valid 8 s, every tided renews
// its own after about 5 s, again and again, and the controller its
// own; the cluster keeps working through it: jobs, srun (whose step
// listeners serve the renewed certificates), a tided restarted on its
// renewed certificate.
func TestTLSCertRenewal(t *testing.T) {
	c := newClusterOpts(t, clusterOpts{nodes: 2, ctldYAML: "tls: {mode: on, cert_validity: 8s}\n"})
	renewals := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(c.dir, name+".log"))
		return bytes.Count(b, []byte("node certificate renewed"))
	}
	c.eventually(40*time.Second, "two renewals on every node", func() bool {
		return renewals("gpu01") >= 2 && renewals("gpu02") >= 2
	})
	b, _ := os.ReadFile(filepath.Join(c.dir, "tidectld.log"))
	// ca init issued the first; every renewal logs this line.
	if !bytes.Contains(b, []byte("controller certificate issued")) {
		t.Errorf("the controller did not renew its own certificate:\n%s", b)
	}
	c.waitIdle()
	j, out := c.batchOutput("#!/bin/sh\nsrun -l printenv SLURMD_NODENAME | sort\n", "-N2")
	if j.State != api.StateCompleted || out != "0: gpu01\n1: gpu02\n" {
		t.Fatalf("job with srun after renewals: %s %s, output %q", j.State, j.Exit, out)
	}
	kill(c.tided["gpu01"], syscall.SIGTERM)
	c.startTided("gpu01")
	c.eventually(20*time.Second, "gpu01 back on its renewed certificate", func() bool {
		b, _ := os.ReadFile(filepath.Join(c.dir, "gpu01.log"))
		return bytes.Count(b, []byte("registered with controller")) >= 2
	})
	c.waitIdle()
}
