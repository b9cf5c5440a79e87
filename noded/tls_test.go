package noded

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
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
	"github.com/tide-hpc/tide/internal/pki"
)

// tlsCtld is the controller's side of joins, renewals and the node
// protocol over TLS, as tided sees it: it issues certificates of its own
// CA (valid for validity) and records who came with which certificate.
type tlsCtld struct {
	t        *testing.T
	ca       *pki.CA
	addr     string
	validity time.Duration

	mu sync.Mutex
	// tokens maps a token's id to its node ("" any), until used.
	tokens map[string]string
	secret map[string]string
	joins  int
	renews int
	// requests lists the node requests as "path cert=<node> key=<bool>".
	requests []string
	// serials are the serials of the certificates issued, in order.
	serials []string
}

func newTLSCtld(t *testing.T, validity time.Duration) *tlsCtld {
	t.Helper()
	ca, err := pki.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f := &tlsCtld{t: t, ca: ca, validity: validity, tokens: map[string]string{}, secret: map[string]string{}}
	key, _ := pki.NewKey()
	der, err := ca.IssueController(key.Public(), []string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	var h pki.Holder
	h.Set(&tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.PathNodeJoin, f.join)
	mux.HandleFunc("POST "+api.PathNodeRenew, f.renew)
	mux.HandleFunc("POST /api/v1/node/register", f.node)
	mux.HandleFunc("POST /api/v1/node/sync", f.node)
	srv := &http.Server{Handler: mux}
	go srv.Serve(tls.NewListener(ln, pki.ServerConfig(&h, ca.Pool())))
	t.Cleanup(func() { srv.Close() })
	return f
}

// token makes a join token for node ("" any).
func (f *tlsCtld) token(node string) string {
	tok, err := pki.NewToken(f.ca.Fingerprint())
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.tokens[tok.ID], f.secret[tok.ID] = node, tok.SecretHash()
	f.mu.Unlock()
	return tok.String()
}

func writeAPIErr(w http.ResponseWriter, err error) {
	status, body := api.NewErrorBody(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// issue signs a certificate request's PEM.
func (f *tlsCtld) issue(w http.ResponseWriter, csrPEM string) {
	csr, err := pki.ParseCSR([]byte(csrPEM))
	if err != nil {
		writeAPIErr(w, api.Invalid("%v", err))
		return
	}
	der, err := f.ca.IssueNode(csr, time.Now(), f.validity)
	if err != nil {
		writeAPIErr(w, err)
		return
	}
	c, _ := x509.ParseCertificate(der)
	f.serials = append(f.serials, c.SerialNumber.Text(16))
	json.NewEncoder(w).Encode(api.NodeCertResponse{Certificate: string(pki.CertPEM(der)), CA: string(f.ca.CertPEM()), Expires: c.NotAfter})
}

func (f *tlsCtld) join(w http.ResponseWriter, r *http.Request) {
	var req api.NodeJoinRequest
	json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.joins++
	tok, err := pki.ParseToken(req.Token)
	node, ok := f.tokens[tok.ID]
	if err != nil || !ok || !pki.SecretMatches(tok.Secret, f.secret[tok.ID]) {
		writeAPIErr(w, api.Errorf(api.ErrUnauthenticated, "join refused: unknown join token"))
		return
	}
	csr, _ := pki.ParseCSR([]byte(req.CSR))
	if node != "" && (csr == nil || csr.Subject.CommonName != node) {
		writeAPIErr(w, api.Errorf(api.ErrPermissionDenied, "join refused: join token %s is for node %s", tok.ID, node))
		return
	}
	delete(f.tokens, tok.ID)
	f.issue(w, req.CSR)
}

func (f *tlsCtld) renew(w http.ResponseWriter, r *http.Request) {
	_, name, err := pki.VerifiedNode(r.TLS)
	var req api.NodeRenewRequest
	json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		writeAPIErr(w, api.Errorf(api.ErrUnauthenticated, "%v", err))
		return
	}
	if csr, err := pki.ParseCSR([]byte(req.CSR)); err != nil || csr.Subject.CommonName != name {
		writeAPIErr(w, api.Errorf(api.ErrPermissionDenied, "renewal for another node"))
		return
	}
	f.renews++
	f.issue(w, req.CSR)
}

func (f *tlsCtld) node(w http.ResponseWriter, r *http.Request) {
	leaf, name, err := pki.VerifiedNode(r.TLS)
	serial := ""
	if leaf != nil {
		serial = leaf.SerialNumber.Text(16)
	}
	f.mu.Lock()
	f.requests = append(f.requests, r.URL.Path+" cert="+name+" serial="+serial+" key="+boolWord(r.Header.Get(client.KeyHeader) != ""))
	f.mu.Unlock()
	if err != nil {
		writeAPIErr(w, api.Errorf(api.ErrUnauthenticated, "%v", err))
		return
	}
	if strings.HasSuffix(r.URL.Path, "/sync") {
		time.Sleep(50 * time.Millisecond) // a short long poll
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte("{}\n"))
}

func boolWord(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// joinCfg is a node configuration for f, with a fresh tls_dir.
func joinCfg(t *testing.T, f *tlsCtld, name string) Config {
	cfg := DefaultConfig()
	cfg.Name = name
	cfg.Controller = f.addr
	cfg.TLSDir = filepath.Join(t.TempDir(), "nodes", "tls") // nodes/ made by the join
	cfg.KeyFile = "/nonexistent/cluster.key"
	return cfg
}

// TestJoin: tided join stores the node's certificate (mode 0600) and
// the CA's, which a node then loads; the token's node and one-time use
// are the controller's to enforce, and its refusals reach the operator.
func TestJoin(t *testing.T) {
	f := newTLSCtld(t, time.Hour)
	cfg := joinCfg(t, f, "gpu01")
	ctx := context.Background()
	tok := f.token("gpu01")
	r, err := Join(ctx, cfg, tok)
	if err != nil {
		t.Fatal(err)
	}
	if name, _ := pki.NodeName(r.Cert); name != "gpu01" || pki.Fingerprint(r.CA.Raw) != f.ca.Fingerprint() {
		t.Fatalf("joined as %q with CA %s", name, pki.Fingerprint(r.CA.Raw))
	}
	for path, want := range map[string]os.FileMode{r.CertFile: 0o600, cfg.TLSDir: 0o700, filepath.Dir(cfg.TLSDir): 0o755} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, want mode %v", path, err, want)
		}
	}
	if !Joined(cfg.TLSDir) {
		t.Fatal("Joined is false after a join")
	}
	nt, err := loadNodeTLS(cfg.TLSDir, "gpu01", time.Now())
	if err != nil || nt == nil {
		t.Fatalf("loadNodeTLS: %v, %v", nt, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a joined node without a cluster key: %v", err)
	}
	t.Run("another node's certificate", func(t *testing.T) {
		if _, err := loadNodeTLS(cfg.TLSDir, "gpu02", time.Now()); err == nil || !strings.Contains(err.Error(), "the certificate is node gpu01's, but this node is gpu02") {
			t.Fatalf("load gpu01's certificate as gpu02: %v", err)
		}
	})
	t.Run("expired", func(t *testing.T) {
		if _, err := loadNodeTLS(cfg.TLSDir, "gpu01", time.Now().Add(2*time.Hour)); err == nil || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("load an expired certificate: %v", err)
		}
	})
	t.Run("token used twice", func(t *testing.T) {
		_, err := Join(ctx, joinCfg(t, f, "gpu01"), tok)
		if err == nil || !strings.Contains(err.Error(), "unknown join token") {
			t.Fatalf("second join with a token: %v", err)
		}
	})
	t.Run("token for another node", func(t *testing.T) {
		_, err := Join(ctx, joinCfg(t, f, "gpu02"), f.token("gpu03"))
		if err == nil || !strings.Contains(err.Error(), "is for node gpu03") {
			t.Fatalf("join gpu02 with gpu03's token: %v", err)
		}
	})
	t.Run("bad token", func(t *testing.T) {
		if _, err := Join(ctx, joinCfg(t, f, "gpu02"), "tide1.nope"); err == nil || !strings.Contains(err.Error(), "not a join token") {
			t.Fatalf("join with garbage: %v", err)
		}
	})
}

// TestJoinWrongCAHash: a token whose CA hash is not the controller's CA
// fails before the token's secret is sent: the controller never sees a
// join request.
func TestJoinWrongCAHash(t *testing.T) {
	f := newTLSCtld(t, time.Hour)
	other, _ := pki.NewCA("other", time.Now())
	tok, _ := pki.ParseToken(f.token("gpu01"))
	tok.CAHash = other.Fingerprint()
	cfg := joinCfg(t, f, "gpu01")
	_, err := Join(context.Background(), cfg, tok.String())
	if err == nil || !strings.Contains(err.Error(), "does not present the CA of the join token") {
		t.Fatalf("join with another CA's hash: %v", err)
	}
	f.mu.Lock()
	joins := f.joins
	f.mu.Unlock()
	if joins != 0 {
		t.Fatalf("the controller saw %d join requests: the secret was sent to an unverified server", joins)
	}
	if Joined(cfg.TLSDir) {
		t.Fatal("a refused join wrote a certificate")
	}
}

// TestJoinPlainController: a controller without TLS is reported as
// such.
func TestJoinPlainController(t *testing.T) {
	srv := &http.Server{Handler: http.NotFoundHandler()}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	defer srv.Close()
	cfg := DefaultConfig()
	cfg.Name, cfg.Controller, cfg.TLSDir = "gpu01", ln.Addr().String(), t.TempDir()
	tok, _ := pki.NewToken(strings.Repeat("ab", 32))
	if _, err := Join(context.Background(), cfg, tok.String()); err == nil || !strings.Contains(err.Error(), "does not serve TLS") {
		t.Fatalf("join with a plain controller: %v", err)
	}
}

// TestDaemonMutualTLS: a joined tided registers and syncs over mutual
// TLS with its certificate and no cluster key, serves its step
// listener with it, renews it before it expires (validity 3 s here:
// after 2 s) again and again, and a restarted tided goes on with the
// newest certificate from tls_dir.
func TestDaemonMutualTLS(t *testing.T) {
	f := newTLSCtld(t, 3*time.Second)
	cfg := joinCfg(t, f, "n1")
	if _, err := Join(context.Background(), cfg, f.token("n1")); err != nil {
		t.Fatal(err)
	}
	cfg.StateDir = t.TempDir()
	cfg.StepAddr = "127.0.0.1:0"
	cfg.Cgroups = CgroupsOff
	cfg.Heartbeat = time.Second
	start := func() (*Daemon, func()) {
		d, err := Setup(context.Background(), cfg, Options{Logger: testLogger(), Executable: testExe})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		var once sync.Once
		return d, func() { once.Do(func() { cancel(); <-done }) }
	}
	d, stop := start()
	defer stop()
	requests := func() []string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return append([]string(nil), f.requests...)
	}
	waitUntil(t, "two renewals", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.renews >= 2
	})
	f.mu.Lock()
	last := f.serials[len(f.serials)-1]
	f.mu.Unlock()
	waitUntil(t, "a sync with the newest certificate", func() bool {
		for _, r := range requests() {
			if strings.Contains(r, "serial="+last) {
				return true
			}
		}
		return false
	})
	for _, r := range requests() {
		if !strings.Contains(r, " cert=n1 ") || !strings.HasSuffix(r, " key=no") {
			t.Fatalf("node request %q: want n1's certificate and no cluster key", r)
		}
	}

	// The step listener serves the node's certificate.
	pool := f.ca.Pool()
	c, err := tls.Dial("tcp", d.StepAddr(), pki.NodeClient(pool, "n1"))
	if err != nil {
		t.Fatalf("TLS to the step listener: %v", err)
	}
	c.Close()
	if c, err := tls.Dial("tcp", d.StepAddr(), pki.NodeClient(pool, "n2")); err == nil {
		c.Close()
		t.Fatal("the step listener passed for node n2")
	}

	stop()
	f.mu.Lock()
	newest := f.serials[len(f.serials)-1]
	f.mu.Unlock()
	nt, err := loadNodeTLS(cfg.TLSDir, "n1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := nt.cert.Get().Leaf.SerialNumber.Text(16); got != newest {
		t.Fatalf("tls_dir holds serial %s after the renewals, want the newest %s", got, newest)
	}
	n := len(requests())
	_, stop2 := start()
	defer stop2()
	waitUntil(t, "the restarted tided's registration", func() bool {
		for _, r := range requests()[n:] {
			if strings.HasPrefix(r, "/api/v1/node/register cert=n1") {
				return true
			}
		}
		return false
	})
}
