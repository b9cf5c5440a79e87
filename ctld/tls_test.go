package ctld

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/gres"
	"github.com/tide-hpc/tide/internal/pki"
)

// tlsHarness is a harness whose controller has a cluster CA (tls.mode
// on) in a state directory of its own, on the real clock: certificates
// are checked against it in handshakes.
// Each pair of repl replaces a line of testConfig.
func tlsHarness(t *testing.T, extra string, repl ...string) *harness {
	t.Helper()
	dir := t.TempDir()
	if _, err := pki.InitCA(filepath.Join(dir, "tls"), "t", time.Now()); err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(testConfig, "state_dir: /unused", "state_dir: "+dir, 1)
	for i := 0; i+1 < len(repl); i += 2 {
		cfg = strings.Replace(cfg, repl[i], repl[i+1], 1)
	}
	if !strings.Contains(extra, "tls:") {
		cfg += "tls: {mode: on}\n"
	}
	cfg += extra
	h := &harness{t: t, clock: &fakeClock{t: time.Now()}, db: filepath.Join(dir, "tide.db"),
		alice: caller{uid: 1000, gid: 1000, user: "alice", known: true}, config: cfg}
	h.open()
	return h
}

var operator = caller{uid: 0, gid: 0, user: "root", known: true, admin: true, auth: authSocket}

// csrFor is a new key and a certificate request naming node.
func csrFor(t *testing.T, node string) (*pki.Holder, string, func(api.NodeCertResponse) *pki.Holder) {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := pki.CreateCSR(key, node)
	if err != nil {
		t.Fatal(err)
	}
	holder := &pki.Holder{}
	// use turns the controller's answer into the node's TLS certificate.
	use := func(resp api.NodeCertResponse) *pki.Holder {
		certs, err := pki.ParseCerts([]byte(resp.Certificate))
		if err != nil {
			t.Fatal(err)
		}
		holder.Set(&tls.Certificate{Certificate: [][]byte{certs[0].Raw}, PrivateKey: key, Leaf: certs[0]})
		return holder
	}
	return holder, string(csr), use
}

// TestJoinTokens: a join token is for operators, works once, not after
// it expires, only for its node and only with its secret and its CA;
// the controller keeps only the secret's hash, durably, and audits
// without it.
func TestJoinTokens(t *testing.T) {
	h := tlsHarness(t, "")
	s := h.s
	if _, err := s.createNodeToken(h.alice, api.NodeTokenRequest{}); !errors.Is(err, api.ErrPermissionDenied) {
		t.Fatalf("token for a user: %v, want permission denied", err)
	}
	for _, req := range []api.NodeTokenRequest{{TTLS: 1}, {TTLS: -5}, {TTLS: 8 * 24 * 3600}, {Node: "gpu09"}} {
		if _, err := s.createNodeToken(operator, req); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("token %+v: %v, want invalid argument", req, err)
		}
	}
	anyTok, err := s.createNodeToken(operator, api.NodeTokenRequest{TTLS: 600})
	if err != nil {
		t.Fatal(err)
	}
	for01, err := s.createNodeToken(operator, api.NodeTokenRequest{TTLS: 600, Node: "gpu01"})
	if err != nil {
		t.Fatal(err)
	}
	short, err := s.createNodeToken(operator, api.NodeTokenRequest{TTLS: 60})
	if err != nil {
		t.Fatal(err)
	}
	if anyTok.Expires.Sub(h.clock.now()) > 600*time.Second || for01.Node != "gpu01" || !strings.HasPrefix(anyTok.Token, "tide1."+anyTok.ID+".") {
		t.Fatalf("tokens %+v, %+v", anyTok, for01)
	}
	tok, _ := pki.ParseToken(anyTok.Token)
	if tok.CAHash != s.tls.ca.Fingerprint() {
		t.Fatalf("token's CA hash %s, the CA's %s", tok.CAHash, s.tls.ca.Fingerprint())
	}
	join := func(token, node string) error {
		_, csr, _ := csrFor(t, node)
		_, err := s.join(api.NodeJoinRequest{Token: token, CSR: csr}, "10.0.0.1")
		return err
	}
	wrongSecret := strings.Replace(anyTok.Token, tok.Secret, strings.Repeat("0", 32), 1)
	otherCA := strings.Replace(anyTok.Token, tok.CAHash, strings.Repeat("ab", 32), 1)
	h.clock.add(2 * time.Minute) // short expires
	tests := []struct {
		name, token, node, want string
	}{
		{"malformed", "hello", "gpu01", "not a join token"},
		{"unknown", "tide1.0123456789abcdef." + strings.Repeat("1", 32) + "." + tok.CAHash, "gpu01", "unknown join token"},
		{"wrong secret", wrongSecret, "gpu01", "unknown join token " + anyTok.ID},
		{"another CA", otherCA, "gpu01", "is for the CA with sha256 abab"},
		{"expired", short.Token, "gpu01", "join token " + short.ID + " expired at"},
		{"another node", for01.Token, "gpu02", "join token " + for01.ID + " is for node gpu01, not gpu02"},
		{"undeclared node", anyTok.Token, "gpu07", `node "gpu07" is not declared`},
		{"good", anyTok.Token, "gpu02", ""},
		{"used", anyTok.Token, "gpu02", "join token " + anyTok.ID + " was already used (by node gpu02 from 10.0.0.1"},
		{"its node", for01.Token, "gpu01", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := join(tc.token, tc.node)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("join: %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), tok.Secret) {
				t.Fatal("the refusal repeats the secret")
			}
		})
	}

	// What is stored: hashes, not secrets, in a private file.
	path := filepath.Join(s.tls.dir, joinTokensFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode %v, want 0600", path, fi.Mode().Perm())
	}
	for _, tk := range []api.NodeTokenResponse{anyTok, for01, short} {
		p, _ := pki.ParseToken(tk.Token)
		if bytes.Contains(data, []byte(p.Secret)) {
			t.Errorf("the token file holds the secret of %s", tk.ID)
		}
		if !bytes.Contains(data, []byte(p.SecretHash())) {
			t.Errorf("the token file lacks the hash of %s", tk.ID)
		}
	}
	s.mu.Lock()
	var actions []string
	for _, a := range s.audit {
		actions = append(actions, a.Action+" "+a.Target)
		if strings.Contains(a.Detail, tok.Secret) {
			t.Errorf("audit record %+v holds the secret", a)
		}
	}
	s.mu.Unlock()
	want := "node-token any node,node-token node gpu01,node-token any node,node-join node gpu02,node-join node gpu01"
	if got := strings.Join(actions, ","); got != want {
		t.Errorf("audit: %s\nwant   %s", got, want)
	}

	// A restarted controller remembers the use.
	h.restart()
	if err := join(anyTok.Token, "gpu01"); err == nil || !strings.Contains(err.Error(), "was already used") {
		t.Fatalf("join after a restart with a used token: %v", err)
	}
	fresh, err := h.s.createNodeToken(operator, api.NodeTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fresh.Expires.Sub(h.clock.now()); got > time.Hour || got < time.Hour-time.Second {
		t.Errorf("default token lifetime %s, want 1h", got)
	}
}

// TestJoinTokenWithoutTLS: a controller without a CA makes no join
// tokens, and says why.
func TestJoinTokenWithoutTLS(t *testing.T) {
	h := newHarness(t)
	if _, err := h.s.createNodeToken(operator, api.NodeTokenRequest{}); err == nil || !strings.Contains(err.Error(), "tidectld ca init") {
		t.Fatalf("token without a CA: %v", err)
	}
}

// tlsServed is a controller with TLS serving its real listeners.
type tlsServed struct {
	h          *harness
	socket     string
	addr, api  string
	ca         *x509.CertPool
	caHash     string
	unixClient *client.Client
}

// serveTLS runs tlsHarness's controller (Server.Run) on a socket, a
// free node_addr and a free api_addr, until the test ends.
func serveTLS(t *testing.T, extra string) *tlsServed {
	t.Helper()
	dir, err := os.MkdirTemp("", "tide-ctld-tls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sv := &tlsServed{socket: filepath.Join(dir, "ctld.sock"), addr: freeAddr(t), api: freeAddr(t)}
	keyFile := filepath.Join(dir, "jwt.key")
	if err := os.WriteFile(keyFile, bytes.Repeat([]byte("k"), 32), 0o600); err != nil {
		t.Fatal(err)
	}
	sv.h = tlsHarness(t, "api_addr: "+sv.api+"\njwt: {key_file: "+keyFile+"}\n"+extra,
		"socket: /unused.sock", "socket: "+sv.socket, "node_addr: 127.0.0.1:0", "node_addr: "+sv.addr)
	sv.ca = sv.h.s.tls.pool
	sv.caHash = sv.h.s.tls.ca.Fingerprint()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sv.h.s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	sv.unixClient = client.NewUnix(sv.socket)
	t.Cleanup(sv.unixClient.Close)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := sv.unixClient.Cluster(context.Background()); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("controller does not answer: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return sv
}

// join gets node's certificate through node_addr with a fresh token,
// as tided join does, and returns it.
func (sv *tlsServed) join(t *testing.T, node string) *pki.Holder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, err := sv.unixClient.NodeToken(ctx, api.NodeTokenRequest{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	_, csr, use := csrFor(t, node)
	c := client.NewTLS(sv.addr, pki.PinnedClient(sv.caHash, "127.0.0.1"), "")
	defer c.Close()
	resp, err := c.Join(ctx, api.NodeJoinRequest{Token: tok.Token, CSR: csr})
	if err != nil {
		t.Fatalf("join %s: %v", node, err)
	}
	if resp.CA != string(sv.h.s.tls.ca.CertPEM()) {
		t.Fatal("the join's answer carries another CA")
	}
	return use(resp)
}

// nodeClient is a node's mutual-TLS client presenting cert (none for
// nil).
func (sv *tlsServed) nodeClient(t *testing.T, cert *pki.Holder) *client.Client {
	t.Helper()
	c := client.NewTLS(sv.addr, pki.ControllerClient(sv.ca, "127.0.0.1", cert), "")
	t.Cleanup(c.Close)
	return c
}

func registration(node string) api.NodeRegistration {
	gpus, _ := gres.Fake(node, gres.FakeConfig{Count: 8})
	return api.NodeRegistration{Name: node, CPUs: 8, MemoryMB: 64 * 1024, GPUs: gpus}
}

// TestNodeIdentityOverTLS: over TLS a node's certificate is its
// identity. gpu01's certificate registers and syncs gpu01 and nothing
// else; a connection without a certificate, or with the cluster key,
// cannot register or report; plain HTTP is not served.
func TestNodeIdentityOverTLS(t *testing.T) {
	sv := serveTLS(t, "")
	gpu01 := sv.join(t, "gpu01")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c01 := sv.nodeClient(t, gpu01)
	if _, err := c01.Register(ctx, registration("gpu01")); err != nil {
		t.Fatalf("gpu01 registers with its certificate: %v", err)
	}
	if _, err := c01.Sync(ctx, api.NodeSyncRequest{Name: "gpu01"}); err != nil {
		t.Fatalf("gpu01 syncs with its certificate: %v", err)
	}

	t.Run("gpu01's certificate cannot act as gpu02", func(t *testing.T) {
		_, err := c01.Register(ctx, registration("gpu02"))
		if !errors.Is(err, api.ErrPermissionDenied) || !strings.Contains(err.Error(), `certificate of node gpu01 does not allow acting as node "gpu02"`) {
			t.Fatalf("register gpu02 with gpu01's certificate: %v", err)
		}
		_, err = c01.Sync(ctx, api.NodeSyncRequest{Name: "gpu02", Jobs: []api.NodeJobReport{{JobID: 1, State: api.NodeJobFinished}}})
		if !errors.Is(err, api.ErrPermissionDenied) {
			t.Fatalf("sync as gpu02 with gpu01's certificate: %v", err)
		}
		nl, err := sv.unixClient.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nl.Nodes {
			if n.Name == "gpu02" && n.State != api.NodeUnknown {
				t.Errorf("gpu02 is %s after gpu01 posed as it, want UNKNOWN", n.State)
			}
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		c := sv.nodeClient(t, nil)
		for _, f := range []func() error{
			func() error { _, err := c.Register(ctx, registration("gpu02")); return err },
			func() error { _, err := c.Sync(ctx, api.NodeSyncRequest{Name: "gpu02"}); return err },
			func() error { _, err := c.RenewCert(ctx, api.NodeRenewRequest{}); return err },
		} {
			err := f()
			if !errors.Is(err, api.ErrUnauthenticated) || !strings.Contains(err.Error(), "node certificate of this cluster's CA is required") {
				t.Fatalf("without a certificate: %v", err)
			}
		}
	})
	t.Run("the cluster key over TLS", func(t *testing.T) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ControllerClient(sv.ca, "127.0.0.1", nil)}}
		defer hc.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(ctx, "POST", "https://"+sv.addr+"/api/v1/node/register", strings.NewReader(`{"name":"gpu02","cpus":8,"memory_mb":65536}`))
		req.Header.Set(client.KeyHeader, "k")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "the cluster key is not accepted over TLS") {
			t.Fatalf("register with the cluster key over TLS: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("plain HTTP with the cluster key", func(t *testing.T) {
		c := client.NewTCP(sv.addr, "k")
		defer c.Close()
		if _, err := c.Register(ctx, registration("gpu02")); err == nil {
			t.Fatal("a plain-HTTP registration with the cluster key was accepted")
		}
	})
	t.Run("a certificate of another CA", func(t *testing.T) {
		other, err := pki.NewCA("other", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		_, csr, use := csrFor(t, "gpu02")
		parsed, _ := pki.ParseCSR([]byte(csr))
		der, err := other.IssueNode(parsed, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		c := sv.nodeClient(t, use(api.NodeCertResponse{Certificate: string(pki.CertPEM(der))}))
		if _, err := c.Register(ctx, registration("gpu02")); err == nil {
			t.Fatal("a certificate of another CA registered gpu02")
		}
	})
	t.Run("metrics without a certificate", func(t *testing.T) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ControllerClient(sv.ca, "127.0.0.1", nil)}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get("https://" + sv.addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/metrics over TLS: %d", resp.StatusCode)
		}
	})
	t.Run("a join token is used once over the wire", func(t *testing.T) {
		tok, err := sv.unixClient.NodeToken(ctx, api.NodeTokenRequest{})
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewTLS(sv.addr, pki.PinnedClient(sv.caHash, "127.0.0.1"), "")
		defer c.Close()
		_, csr, _ := csrFor(t, "gpu02")
		if _, err := c.Join(ctx, api.NodeJoinRequest{Token: tok.Token, CSR: csr}); err != nil {
			t.Fatal(err)
		}
		_, err = c.Join(ctx, api.NodeJoinRequest{Token: tok.Token, CSR: csr})
		if !errors.Is(err, api.ErrUnauthenticated) || !strings.Contains(err.Error(), "was already used") {
			t.Fatalf("second join: %v", err)
		}
	})
}

// TestNodeCertRenewal: a node renews its certificate over mutual TLS
// with it, for its own name only; the new certificate works.
func TestNodeCertRenewal(t *testing.T) {
	sv := serveTLS(t, "")
	gpu01 := sv.join(t, "gpu01")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := sv.nodeClient(t, gpu01)
	_, csr02, _ := csrFor(t, "gpu02")
	if _, err := c.RenewCert(ctx, api.NodeRenewRequest{CSR: csr02}); !errors.Is(err, api.ErrPermissionDenied) {
		t.Fatalf("gpu01 renewing for gpu02: %v", err)
	}
	_, csr, use := csrFor(t, "gpu01")
	resp, err := c.RenewCert(ctx, api.NodeRenewRequest{CSR: csr})
	if err != nil {
		t.Fatal(err)
	}
	renewed := use(resp)
	if renewed.Get().Leaf.SerialNumber.Cmp(gpu01.Get().Leaf.SerialNumber) == 0 {
		t.Fatal("the renewal returned the same certificate")
	}
	if _, err := sv.nodeClient(t, renewed).Register(ctx, registration("gpu01")); err != nil {
		t.Fatalf("register with the renewed certificate: %v", err)
	}
}

// TestServerCertRenewal: the controller keeps its certificate until two
// thirds of its validity, then issues (and stores) a new one; one that
// lacks a host it should name is replaced at once.
func TestServerCertRenewal(t *testing.T) {
	h := tlsHarness(t, "tls: {mode: on, cert_validity: 3h}\n")
	s := h.s
	first := s.tls.server.Get().Leaf
	if got := first.NotAfter.Sub(first.NotBefore); got < 3*time.Hour || got > 3*time.Hour+10*time.Minute {
		t.Fatalf("controller certificate valid for %s, want 3h (+ skew)", got)
	}
	h.clock.add(time.Hour)
	if err := s.ensureServerCert(); err != nil {
		t.Fatal(err)
	}
	if s.tls.server.Get().Leaf != first {
		t.Fatal("renewed an hour into a 3h certificate")
	}
	h.clock.add(time.Hour + 10*time.Minute)
	if err := s.ensureServerCert(); err != nil {
		t.Fatal(err)
	}
	second := s.tls.server.Get().Leaf
	if second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("not renewed past two thirds of its validity")
	}
	kp, err := pki.LoadKeyPair(filepath.Join(s.tls.dir, pki.ServerFile))
	if err != nil || kp.Leaf.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Fatalf("server.pem holds %v, %v; want the renewed certificate", kp, err)
	}
	// A restart keeps the stored certificate; a new host name renews it.
	h.restart()
	if h.s.tls.server.Get().Leaf.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Fatal("a restart replaced a good certificate")
	}
	h.config += "\ntls: {mode: on, cert_validity: 3h, hostnames: [ctl.example, 10.9.8.7]}\n"
	h.config = strings.Replace(h.config, "tls: {mode: on, cert_validity: 3h}\n", "", 1)
	h.restart()
	third := h.s.tls.server.Get().Leaf
	if third.SerialNumber.Cmp(second.SerialNumber) == 0 || third.VerifyHostname("ctl.example") != nil || third.VerifyHostname("10.9.8.7") != nil {
		t.Fatalf("after adding tls.hostnames: serial %x, names %v %v", third.SerialNumber, third.DNSNames, third.IPAddresses)
	}
}

// TestTLSRequiresCA: tls.mode on without a CA keeps the controller from
// starting, and says what to do.
func TestTLSRequiresCA(t *testing.T) {
	cfg, err := ParseConfig(strings.NewReader(strings.Replace(testConfig, "state_dir: /unused", "state_dir: "+t.TempDir(), 1) + "tls: {mode: on}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tlsWanted(cl); err == nil || !strings.Contains(err.Error(), "tidectld ca init") {
		t.Fatalf("tls.mode on without a CA: %v", err)
	}
}

// TestAPIOverTLS: api_addr serves TLS with the controller's
// certificate; a client that verifies it with the CA gets in with its
// credential, a plain one does not.
func TestAPIOverTLS(t *testing.T) {
	sv := serveTLS(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, err := sv.unixClient.Token(ctx, api.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewRemoteTLS(sv.api, client.Bearer(tok.Token), pki.ControllerClient(sv.ca, "127.0.0.1", nil), "")
	defer c.Close()
	if _, err := c.Cluster(ctx); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	plain := client.NewRemote(sv.api, client.Bearer(tok.Token))
	defer plain.Close()
	if _, err := plain.Cluster(ctx); err == nil {
		t.Fatal("plain HTTP answered on api_addr")
	}
	other, _ := pki.NewCA("other", time.Now())
	wrong := client.NewRemoteTLS(sv.api, client.Bearer(tok.Token), pki.ControllerClient(other.Pool(), "127.0.0.1", nil), "check TIDE_CA")
	defer wrong.Close()
	_, err = wrong.Cluster(ctx)
	var te *client.TLSError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "check TIDE_CA") || errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("with another CA: %v, want a TLS error naming the hint, not retried", err)
	}
}

// wireTap is a TCP proxy that records the first bytes each connection
// sends.
type wireTap struct {
	ln    net.Listener
	mu    sync.Mutex
	first [][]byte
	all   bytes.Buffer
}

func newWireTap(t *testing.T, target string) *wireTap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wireTap{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go w.pipe(c, target)
		}
	}()
	return w
}

func (w *wireTap) pipe(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(c, up); c.Close() }()
	buf := make([]byte, 32<<10)
	firstSeen := false
	for {
		n, err := c.Read(buf)
		if n > 0 {
			w.mu.Lock()
			if !firstSeen {
				w.first = append(w.first, bytes.Clone(buf[:n]))
				firstSeen = true
			}
			w.all.Write(buf[:n])
			w.mu.Unlock()
			if _, err := up.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestNodeRequestsOnTheWire: what a node sends over TLS, as a tap
// between it and the controller sees it: every connection opens with a
// TLS ClientHello, and neither the cluster key header nor any request
// line crosses in clear.
func TestNodeRequestsOnTheWire(t *testing.T) {
	sv := serveTLS(t, "")
	gpu01 := sv.join(t, "gpu01")
	tap := newWireTap(t, sv.addr)
	c := client.NewTLS(tap.ln.Addr().String(), pki.ControllerClient(sv.ca, "127.0.0.1", gpu01), "")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Register(ctx, registration("gpu01")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sync(ctx, api.NodeSyncRequest{Name: "gpu01"}); err != nil {
		t.Fatal(err)
	}
	tap.mu.Lock()
	defer tap.mu.Unlock()
	if len(tap.first) == 0 {
		t.Fatal("no connection went through the tap")
	}
	for i, b := range tap.first {
		// A TLS handshake record (22), version 3.x, carrying a
		// ClientHello (1).
		if len(b) < 6 || b[0] != 0x16 || b[1] != 0x03 || b[5] != 0x01 {
			t.Errorf("connection %d opens with % x, not a TLS ClientHello", i, b[:min(len(b), 8)])
		}
	}
	for _, clear := range []string{client.KeyHeader, "POST /api", "gpu01\",", "HTTP/1.1"} {
		if bytes.Contains(tap.all.Bytes(), []byte(clear)) {
			t.Errorf("%q crossed the wire in clear", clear)
		}
	}
}

// TestTLSHandshakeFlood: connections that never finish a handshake sit
// in node_addr's unauthenticated pool like idle ones, and are evicted
// for newcomers; a node with a certificate still gets in.
func TestTLSHandshakeFlood(t *testing.T) {
	sv := serveTLS(t, "limits: {connections: 64, connections_per_peer: 8, operator_reserve: 4, unauthenticated: 16, unauthenticated_per_peer: 8, unauthenticated_timeout: 1m}\n")
	gpu01 := sv.join(t, "gpu01")
	const flood = 100
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	hello := []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01} // a ClientHello's first bytes, never finished
	for range flood {
		c, err := net.Dial("tcp", sv.addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(hello)
		conns = append(conns, c)
	}
	var node *limitListener
	sv.h.s.metrics.conns.mu.Lock()
	for _, l := range sv.h.s.metrics.conns.listeners {
		if l.name == "node" {
			node = l
		}
	}
	sv.h.s.metrics.conns.mu.Unlock()
	waitFor(t, "the flood to be evicted", func() bool {
		return int(counterValue(sv.h.s.metrics.connEvicted.WithLabelValues("node"))) >= flood-8
	})
	if _, unauth := node.counts(); unauth > 8 {
		t.Errorf("%d connections without a certificate open, want at most 8", unauth)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sv.nodeClient(t, gpu01)
	if _, err := c.Register(ctx, registration("gpu01")); err != nil {
		t.Fatalf("register during a handshake flood: %v", err)
	}
	if auth, _ := node.counts(); auth != 1 {
		t.Errorf("%d authenticated connections, want 1 (the node's)", auth)
	}
}

// TestTLSHandshakeTimeout: a connection that starts a handshake and
// stalls is closed after limits.unauthenticated_timeout, like an idle
// one.
func TestTLSHandshakeTimeout(t *testing.T) {
	sv := serveTLS(t, "limits: {unauthenticated_timeout: 1s}\n")
	c, err := net.Dial("tcp", sv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}); err != nil { // a ClientHello's start
		t.Fatal(err)
	}
	start := time.Now()
	// limits.header_timeout (10 s by default) would close it too, later:
	// 8 s leaves the 1 s cap seven seconds of slack and tells the two
	// apart.
	_ = c.SetReadDeadline(time.Now().Add(8 * time.Second))
	_, err = io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the stalled handshake was still open after %s", time.Since(start))
	}
}

// TestRenewalOfAnUndeclaredNode: a node taken out of the config gets no
// new certificate.
func TestRenewalOfAnUndeclaredNode(t *testing.T) {
	sv := serveTLS(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A certificate for gpu07, issued by the CA although gpu07 is not
	// declared (as for a node removed from tide.yaml since).
	_, csr, use := csrFor(t, "gpu07")
	parsed, _ := pki.ParseCSR([]byte(csr))
	der, err := sv.h.s.tls.ca.IssueNode(parsed, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := sv.nodeClient(t, use(api.NodeCertResponse{Certificate: string(pki.CertPEM(der))}))
	_, csr2, _ := csrFor(t, "gpu07")
	if _, err := c.RenewCert(ctx, api.NodeRenewRequest{CSR: csr2}); !errors.Is(err, api.ErrPermissionDenied) || !strings.Contains(err.Error(), "not declared") {
		t.Fatalf("renewal of an undeclared node: %v", err)
	}
	if _, err := c.Register(ctx, registration("gpu07")); err == nil {
		t.Fatal("an undeclared node registered")
	}
}
