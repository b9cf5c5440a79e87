package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func newTestCA(t *testing.T) *CA {
	t.Helper()
	ca, err := NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestInitLoadCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	ca, err := InitCA(dir, "dev", t0)
	if err != nil {
		t.Fatal(err)
	}
	if !Exists(dir) {
		t.Fatal("Exists is false after InitCA")
	}
	for f, want := range map[string]os.FileMode{CAKeyFile: 0o600, CACertFile: 0o644, ".": 0o700} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm() &^ 0o022; got != want&^0o022 || fi.Mode().Perm()&0o077 != 0 && f == CAKeyFile {
			t.Errorf("%s mode %v, want %v", f, fi.Mode().Perm(), want)
		}
	}
	if got := ca.Cert.NotAfter.Sub(t0); got != CAValidity {
		t.Errorf("CA valid for %s, want %s", got, CAValidity)
	}
	if !ca.Cert.IsCA || ca.Cert.Subject.CommonName != "Tide cluster CA dev" {
		t.Errorf("CA certificate: IsCA %v, CN %q", ca.Cert.IsCA, ca.Cert.Subject.CommonName)
	}
	if _, err := InitCA(dir, "dev", t0); !errors.Is(err, ErrExists) {
		t.Fatalf("second InitCA: %v, want ErrExists", err)
	}
	got, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Fingerprint() != ca.Fingerprint() || len(ca.Fingerprint()) != 64 {
		t.Fatalf("loaded CA %s, made %s", got.Fingerprint(), ca.Fingerprint())
	}

	t.Run("key readable by others", func(t *testing.T) {
		if err := os.Chmod(filepath.Join(dir, CAKeyFile), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(filepath.Join(dir, CAKeyFile), 0o600)
		_, err := LoadCA(dir)
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("LoadCA with a 0644 key: %v", err)
		}
	})
	t.Run("key of another CA", func(t *testing.T) {
		other := t.TempDir()
		if _, err := InitCA(other, "x", t0); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(other, CACertFile))
		if err := os.WriteFile(filepath.Join(dir, CACertFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(filepath.Join(dir, CACertFile), ca.CertPEM(), 0o644)
		if _, err := LoadCA(dir); err == nil || !strings.Contains(err.Error(), "is not the key of") {
			t.Fatalf("LoadCA with a foreign certificate: %v", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := LoadCA(t.TempDir()); !isNotExist(err) {
			t.Fatalf("LoadCA of an empty dir: %v", err)
		}
	})
}

func TestIssueController(t *testing.T) {
	ca := newTestCA(t)
	key, _ := NewKey()
	now := time.Now()
	der, err := ca.IssueController(key.Public(), []string{"ctl.example", "localhost", "10.1.2.3", "::1"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	if err := ca.Verify(cert, now, x509.ExtKeyUsageServerAuth); err != nil {
		t.Fatal(err)
	}
	if err := ca.Verify(cert, now, x509.ExtKeyUsageClientAuth); err == nil {
		t.Error("the controller's certificate is good for client authentication")
	}
	for _, h := range []string{"ctl.example", "localhost", "10.1.2.3", "::1"} {
		if err := cert.VerifyHostname(h); err != nil {
			t.Errorf("VerifyHostname(%s): %v", h, err)
		}
	}
	if err := cert.VerifyHostname("10.9.9.9"); err == nil {
		t.Error("the certificate names 10.9.9.9")
	}
	if !IsController(cert) {
		t.Error("IsController is false")
	}
	if _, err := NodeName(cert); err == nil {
		t.Error("the controller's certificate names a node")
	}
	if got := cert.NotAfter.Sub(now); (got - time.Hour).Abs() > time.Second {
		t.Errorf("valid for %s, want 1h", got)
	}
}

func TestIssueNode(t *testing.T) {
	ca := newTestCA(t)
	key, _ := NewKey()
	csrPEM, err := CreateCSR(key, "gpu01")
	if err != nil {
		t.Fatal(err)
	}
	csr, err := ParseCSR(csrPEM)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	der, err := ca.IssueNode(csr, now, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth} {
		if err := ca.Verify(cert, now, u); err != nil {
			t.Errorf("usage %v: %v", u, err)
		}
	}
	if name, err := NodeName(cert); err != nil || name != "gpu01" {
		t.Errorf("NodeName = %q, %v", name, err)
	}
	if IsController(cert) {
		t.Error("a node certificate passes for the controller's")
	}
	if err := cert.VerifyHostname("gpu01"); err != nil {
		t.Error(err)
	}
	want := now.Add(20 * 24 * time.Hour)
	if got := RenewAt(cert); got.Sub(want).Abs() > time.Second {
		t.Errorf("RenewAt %s, want %s", got, want)
	}

	t.Run("never past the CA", func(t *testing.T) {
		der, err := ca.IssueNode(csr, now, 20*365*24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		if !c.NotAfter.Equal(ca.Cert.NotAfter) {
			t.Errorf("NotAfter %s, the CA's %s", c.NotAfter, ca.Cert.NotAfter)
		}
	})
	t.Run("expired CA", func(t *testing.T) {
		if _, err := ca.IssueNode(csr, ca.Cert.NotAfter.Add(time.Hour), time.Hour); err == nil || !strings.Contains(err.Error(), "CA expired") {
			t.Errorf("issue after the CA's expiry: %v", err)
		}
	})
}

func TestParseCSR(t *testing.T) {
	key, _ := NewKey()
	good, _ := CreateCSR(key, "gpu01")
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, p384)
	if err != nil {
		t.Fatal(err)
	}
	blk := decodePEM(good, "CERTIFICATE REQUEST")
	blk.Bytes[len(blk.Bytes)-3] ^= 0xff // in the signature
	tampered := pemBlock("CERTIFICATE REQUEST", blk.Bytes)
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{name: "good", in: good},
		{name: "not PEM", in: []byte("hello"), want: "no PEM CERTIFICATE REQUEST"},
		{name: "P-384", in: pemBlock("CERTIFICATE REQUEST", der), want: "want P-256"},
		{name: "tampered", in: tampered, want: "certificate request"},
		{name: "huge", in: make([]byte, maxCSR+1), want: "at most"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCSR(tc.in)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func TestValidNodeName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"gpu01", true}, {"node-1.rack_2", true}, {"", false}, {"-x", false}, {".x", false},
		{"a/b", false}, {"a b", false}, {"gpu01\n", false}, {strings.Repeat("a", 63), true}, {strings.Repeat("a", 64), false},
	} {
		if err := ValidNodeName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidNodeName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestToken(t *testing.T) {
	tok, err := NewToken(strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	s := tok.String()
	got, err := ParseToken(" " + s + "\n")
	if err != nil || got != tok {
		t.Fatalf("ParseToken(%q) = %+v, %v", s, got, err)
	}
	if !SecretMatches(tok.Secret, tok.SecretHash()) || SecretMatches(strings.Repeat("0", 32), tok.SecretHash()) {
		t.Error("SecretMatches")
	}
	if !ValidTokenID(tok.ID) {
		t.Error("ValidTokenID of a fresh id")
	}
	other, _ := NewToken(tok.CAHash)
	if other.ID == tok.ID || other.Secret == tok.Secret {
		t.Error("two tokens share an id or a secret")
	}
	parts := strings.Split(s, ".")
	for _, tc := range []struct{ name, in, want string }{
		{"prefix", "tide2." + strings.Join(parts[1:], "."), "not a join token"},
		{"parts", strings.Join(parts[:3], "."), "not a join token"},
		{"short id", "tide1.abc." + strings.Join(parts[2:], "."), "id is not 16"},
		{"bad secret", "tide1." + parts[1] + "." + strings.Repeat("z", 32) + "." + parts[3], "secret is not 32"},
		{"short hash", strings.Join(parts[:3], ".") + ".abcd", "CA hash is not 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseToken(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), tok.Secret) {
				t.Fatal("the error repeats the secret")
			}
		})
	}
}

func TestKeyPairFile(t *testing.T) {
	ca := newTestCA(t)
	key, _ := NewKey()
	csrPEM, _ := CreateCSR(key, "gpu01")
	csr, _ := ParseCSR(csrPEM)
	der, _ := ca.IssueNode(csr, time.Now(), time.Hour)
	path := filepath.Join(t.TempDir(), "node.pem")
	if err := WriteKeyPair(path, [][]byte{der, ca.Cert.Raw}, key); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	kp, err := LoadKeyPair(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(kp.Certificate) != 2 || kp.Leaf.Subject.CommonName != "gpu01" {
		t.Fatalf("loaded %d certificates, leaf %q", len(kp.Certificate), kp.Leaf.Subject.CommonName)
	}
	other, _ := NewKey()
	if err := WriteKeyPair(path, [][]byte{der}, other); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyPair(path); err == nil || !strings.Contains(err.Error(), "not the certificate's") {
		t.Errorf("a pair with another key: %v", err)
	}
	os.Chmod(path, 0o640)
	if _, err := LoadKeyPair(path); err == nil || !strings.Contains(err.Error(), "accessible to others") {
		t.Errorf("a 0640 pair: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(m) > 0 {
		t.Errorf("temporary files left: %v", m)
	}
}

// pair is a TLS certificate (leaf, then the CA) for a test endpoint.
func pair(t *testing.T, ca *CA, der []byte, key *ecdsa.PrivateKey) *Holder {
	t.Helper()
	leaf, _ := x509.ParseCertificate(der)
	h := &Holder{}
	h.Set(&tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf})
	return h
}

func controllerPair(t *testing.T, ca *CA, hosts ...string) *Holder {
	key, _ := NewKey()
	der, err := ca.IssueController(key.Public(), hosts, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return pair(t, ca, der, key)
}

func nodePair(t *testing.T, ca *CA, name string) *Holder {
	key, _ := NewKey()
	csrPEM, _ := CreateCSR(key, name)
	csr, _ := ParseCSR(csrPEM)
	der, err := ca.IssueNode(csr, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return pair(t, ca, der, key)
}

// handshake runs a TLS handshake between client and server configs over
// loopback TCP and returns the client's error and the server's state.
func handshake(t *testing.T, client, server *tls.Config) (error, tls.ConnectionState) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan tls.ConnectionState, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- tls.ConnectionState{}
			return
		}
		sc := tls.Server(c, server)
		_ = sc.SetDeadline(time.Now().Add(10 * time.Second))
		if sc.Handshake() == nil {
			// TLS 1.3: the client's certificate is checked after the
			// client's handshake ends; its read surfaces the verdict.
			_, _ = sc.Write([]byte("x"))
		}
		done <- sc.ConnectionState()
		sc.Close()
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc := tls.Client(raw, client)
	_ = cc.SetDeadline(time.Now().Add(10 * time.Second))
	err = cc.Handshake()
	if err == nil {
		var one [1]byte
		_, err = cc.Read(one[:])
	}
	cc.Close()
	return err, <-done
}

func TestTLSConfigs(t *testing.T) {
	ca := newTestCA(t)
	other := newTestCA(t)
	ctl := controllerPair(t, ca, "localhost", "127.0.0.1")
	gpu01 := nodePair(t, ca, "gpu01")
	foreignCtl := controllerPair(t, other, "localhost")
	tests := []struct {
		name           string
		client, server *tls.Config
		want           string // "" = handshake succeeds
	}{
		{name: "controller, by name", client: ControllerClient(ca.Pool(), "localhost", nil), server: ServerConfig(ctl, nil)},
		{name: "controller, by IP", client: ControllerClient(ca.Pool(), "127.0.0.1", nil), server: ServerConfig(ctl, nil)},
		{name: "controller, a name it lacks", client: ControllerClient(ca.Pool(), "ctl.example", nil), server: ServerConfig(ctl, nil), want: "ctl.example"},
		{name: "a node posing as the controller", client: ControllerClient(ca.Pool(), "gpu01", nil), server: ServerConfig(gpu01, nil), want: "not the controller's"},
		{name: "another CA's controller", client: ControllerClient(ca.Pool(), "localhost", nil), server: ServerConfig(foreignCtl, nil), want: "unknown authority"},
		{name: "pinned", client: PinnedClient(ca.Fingerprint(), "localhost"), server: ServerConfig(ctl, nil)},
		{name: "pinned, upper-case hash", client: PinnedClient(strings.ToUpper(ca.Fingerprint()), "127.0.0.1"), server: ServerConfig(ctl, nil)},
		{name: "pinned, wrong CA hash", client: PinnedClient(other.Fingerprint(), "localhost"), server: ServerConfig(ctl, nil), want: "does not present the CA of the join token"},
		{name: "pinned, another CA's controller", client: PinnedClient(ca.Fingerprint(), "localhost"), server: ServerConfig(foreignCtl, nil), want: "does not present the CA"},
		{name: "pinned, a node posing as the controller", client: PinnedClient(ca.Fingerprint(), "gpu01"), server: ServerConfig(gpu01, nil), want: "not the controller's"},
		{name: "pinned, wrong host", client: PinnedClient(ca.Fingerprint(), "ctl.example"), server: ServerConfig(ctl, nil), want: "ctl.example"},
		{name: "step listener", client: NodeClient(ca.Pool(), "gpu01"), server: ServerConfig(gpu01, nil)},
		{name: "step listener of another node", client: NodeClient(ca.Pool(), "gpu02"), server: ServerConfig(gpu01, nil), want: "gpu02"},
		{name: "the controller as a step listener", client: NodeClient(ca.Pool(), "localhost"), server: ServerConfig(ctl, nil), want: "not a node's"},
		{name: "client certificate of the CA", client: ControllerClient(ca.Pool(), "localhost", gpu01), server: ServerConfig(ctl, ca.Pool())},
		{name: "client certificate of another CA", client: ControllerClient(ca.Pool(), "localhost", nodePair(t, other, "gpu01")), server: ServerConfig(ctl, ca.Pool()), want: "unknown certificate authority"},
		{name: "the controller's certificate as a client's", client: ControllerClient(ca.Pool(), "localhost", ctl), server: ServerConfig(ctl, ca.Pool()), want: "certificate"},
		{name: "no client certificate", client: ControllerClient(ca.Pool(), "localhost", &Holder{}), server: ServerConfig(ctl, ca.Pool())},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err, _ := handshake(t, tc.client, tc.server)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}

	t.Run("VerifiedNode", func(t *testing.T) {
		err, st := handshake(t, ControllerClient(ca.Pool(), "localhost", gpu01), ServerConfig(ctl, ca.Pool()))
		if err != nil {
			t.Fatal(err)
		}
		if _, name, err := VerifiedNode(&st); err != nil || name != "gpu01" {
			t.Fatalf("VerifiedNode = %q, %v", name, err)
		}
		err, st = handshake(t, ControllerClient(ca.Pool(), "localhost", nil), ServerConfig(ctl, ca.Pool()))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := VerifiedNode(&st); err == nil || !strings.Contains(err.Error(), "no client certificate") {
			t.Fatalf("VerifiedNode without a certificate: %v", err)
		}
		if _, _, err := VerifiedNode(nil); err == nil {
			t.Fatal("VerifiedNode of a plain connection")
		}
	})
}
