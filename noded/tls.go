package noded

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/pki"
)

// The node's identity (issue 21): `tided join` trades a one-time join
// token for a certificate naming the node, kept in tls_dir with the
// cluster CA's certificate. A joined tided talks to the controller over
// mutual TLS with it and sends no cluster key, serves its step listener
// with it, and renews it over mutual TLS before it expires.

// DefaultTLSDir is tls_dir's default: persistent, unlike state_dir.
const DefaultTLSDir = "/var/lib/tide/tided"

// Files of tls_dir.
const (
	// NodeCertFile holds the node's certificate, the CA's after it, and
	// the node's key (mode 0600).
	NodeCertFile = "node.pem"
	// CACertFile is the cluster CA's certificate.
	CACertFile = "ca.crt"
)

// Joined reports whether tls_dir holds a node certificate.
func Joined(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, NodeCertFile))
	return err == nil
}

// nodeTLS is a joined node's certificate and CA.
type nodeTLS struct {
	dir, name string
	ca        *x509.Certificate
	pool      *x509.CertPool
	cert      pki.Holder
	// client renews the certificate (the daemon's controller client).
	client *client.Client
	log    *slog.Logger
	now    func() time.Time
}

// loadNodeTLS reads tls_dir for node name: nil without a certificate
// (the node has not joined); an error when the certificate is another
// node's, not the CA's, or expired.
func loadNodeTLS(dir, name string, now time.Time) (*nodeTLS, error) {
	kp, err := pki.LoadKeyPair(filepath.Join(dir, NodeCertFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node certificate (tls_dir): %w", err)
	}
	cas, err := pki.ReadCerts(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, fmt.Errorf("cluster CA (tls_dir): %w", err)
	}
	t := &nodeTLS{dir: dir, name: name, ca: cas[0], pool: x509.NewCertPool(), now: time.Now}
	t.pool.AddCert(t.ca)
	if err := t.check(kp.Leaf, now); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, NodeCertFile), err)
	}
	t.cert.Set(kp)
	return t, nil
}

// check verifies a node certificate: issued by the CA to this node,
// valid at now.
func (t *nodeTLS) check(leaf *x509.Certificate, now time.Time) error {
	got, err := pki.NodeName(leaf)
	if err != nil {
		return err
	}
	if got != t.name {
		return fmt.Errorf("the certificate is node %s's, but this node is %s: join it as %s (tided join)", got, t.name, t.name)
	}
	if !now.Before(leaf.NotAfter) {
		return fmt.Errorf("the node certificate expired at %s: join again (tidectld node-token create --node %s on the controller, then tided join)",
			leaf.NotAfter.UTC().Format(time.RFC3339), t.name)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: t.pool, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("the node certificate does not verify with the cluster CA in %s: %w", filepath.Join(t.dir, CACertFile), err)
	}
	return nil
}

// controllerClient is the daemon's client of the controllers at addrs
// (one, or all of the standby controllers) over mutual TLS.
func (t *nodeTLS) controllerClient(addrs []string) *client.Client {
	return client.NewTLSList(addrs, func(addr string) (*tls.Config, string) {
		host, _, _ := net.SplitHostPort(addr)
		cfg := pki.ControllerClient(t.pool, host, &t.cert)
		return cfg, fmt.Sprintf("this node joined the cluster CA in %s: the controller must serve TLS with it, and name %s in its certificate (tls.hostnames)", t.dir, host)
	})
}

// accept checks a certificate the controller issued for key (at a join
// or renewal): it must verify with ca, name this node and hold key's
// public key. It returns the certificate as tided presents it.
func acceptCert(resp api.NodeCertResponse, ca *x509.Certificate, name string, key crypto.Signer, now time.Time) (*x509.Certificate, error) {
	certs, err := pki.ParseCerts([]byte(resp.Certificate))
	if err != nil {
		return nil, fmt.Errorf("the controller's answer: %w", err)
	}
	leaf := certs[0]
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("the controller's certificate for this node does not verify with the cluster CA: %w", err)
	}
	if got, err := pki.NodeName(leaf); err != nil || got != name {
		return nil, fmt.Errorf("the controller issued a certificate for node %q, not %s (%v)", got, name, err)
	}
	type equaler interface{ Equal(crypto.PublicKey) bool }
	if e, ok := key.Public().(equaler); !ok || !e.Equal(leaf.PublicKey) {
		return nil, errors.New("the controller issued a certificate for another key")
	}
	return leaf, nil
}

// renew gets a certificate for a new key over mutual TLS with the
// current one, stores it and uses it from now on.
func (t *nodeTLS) renew(ctx context.Context) (*x509.Certificate, error) {
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	csr, err := pki.CreateCSR(key, t.name)
	if err != nil {
		return nil, err
	}
	resp, err := t.client.RenewCert(ctx, api.NodeRenewRequest{CSR: string(csr)})
	if err != nil {
		return nil, err
	}
	leaf, err := acceptCert(resp, t.ca, t.name, key, t.now())
	if err != nil {
		return nil, err
	}
	path := filepath.Join(t.dir, NodeCertFile)
	if err := pki.WriteKeyPair(path, [][]byte{leaf.Raw, t.ca.Raw}, key); err != nil {
		return nil, err
	}
	kp, err := pki.LoadKeyPair(path)
	if err != nil {
		return nil, err
	}
	t.cert.Set(kp)
	// Kept-alive connections would go on with the old certificate, even
	// past its expiry: new ones carry the new one.
	t.client.Reconnect()
	return leaf, nil
}

// renewLoop renews the certificate after two thirds of its validity,
// and after a failure again every tenth of what is left (1 s to 1 min)
// until it works or ctx ends.
func (t *nodeTLS) renewLoop(ctx context.Context) {
	for ctx.Err() == nil {
		leaf := t.cert.Get().Leaf
		if sleepCtx(ctx, pki.RenewAt(leaf).Sub(t.now())); ctx.Err() != nil {
			return
		}
		got, err := t.renew(ctx)
		if err == nil {
			t.log.Info("node certificate renewed", "serial", got.SerialNumber.Text(16),
				"expires", got.NotAfter.UTC().Format(time.RFC3339), "renew_at", pki.RenewAt(got).UTC().Format(time.RFC3339))
			continue
		}
		if ctx.Err() != nil {
			return
		}
		left := leaf.NotAfter.Sub(t.now())
		retry := min(max(left/10, time.Second), time.Minute)
		if left <= 0 {
			t.log.Error("node certificate expired: the controller refuses this node; join it again (tidectld node-token create, tided join)",
				"expired", leaf.NotAfter.UTC().Format(time.RFC3339), "err", err)
		} else {
			t.log.Warn("node certificate renewal failed", "err", err, "expires", leaf.NotAfter.UTC().Format(time.RFC3339), "retry_in", retry)
		}
		sleepCtx(ctx, retry)
	}
}
