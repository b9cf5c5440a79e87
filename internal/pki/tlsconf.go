package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
)

// Holder holds a certificate that renewal replaces while connections
// are being made with it. It is safe for concurrent use; the zero
// value holds none.
type Holder struct {
	p atomic.Pointer[tls.Certificate]
}

// Set replaces the certificate.
func (h *Holder) Set(c *tls.Certificate) { h.p.Store(c) }

// Get returns the certificate (nil before Set).
func (h *Holder) Get() *tls.Certificate { return h.p.Load() }

// GetCertificate serves the certificate to TLS clients
// (tls.Config.GetCertificate).
func (h *Holder) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := h.p.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("no certificate loaded")
}

// GetClientCertificate presents the certificate to TLS servers
// (tls.Config.GetClientCertificate).
func (h *Holder) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if c := h.p.Load(); c != nil {
		return c, nil
	}
	return &tls.Certificate{}, nil // none: the server decides
}

// ServerConfig serves h's certificate over TLS 1.3 and HTTP/1.1. With
// clients non-nil, a client may present a certificate, which must then
// be issued by one of clients (tls.VerifyClientCertIfGiven): the caller
// decides which requests need one.
func ServerConfig(h *Holder, clients *x509.CertPool) *tls.Config {
	c := &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: h.GetCertificate,
		NextProtos:     []string{"http/1.1"},
	}
	if clients != nil {
		c.ClientCAs = clients
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c
}

// ControllerClient is the configuration of the controller's clients
// (tided, the CLI): the controller's certificate must chain to roots,
// name host (a DNS name or an IP address) and carry ControllerURI. A
// non-nil cert is presented as the client's certificate.
func ControllerClient(roots *x509.CertPool, host string, cert *Holder) *tls.Config {
	c := &tls.Config{
		MinVersion:       tls.VersionTLS13,
		RootCAs:          roots,
		ServerName:       host,
		NextProtos:       []string{"http/1.1"},
		VerifyConnection: requireController(host),
	}
	if cert != nil {
		c.GetClientCertificate = cert.GetClientCertificate
	}
	return c
}

// requireController checks, after the chain and host name were
// verified, that the peer is the controller and not a node (whose
// certificate the same CA issued).
func requireController(host string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 || !IsController(cs.PeerCertificates[0]) {
			return fmt.Errorf("the certificate served at %s is not the controller's (no %s URI)", host, ControllerURI)
		}
		return nil
	}
}

// PinnedClient is the configuration of `tided join`, which does not
// have the CA yet, only its SHA-256 from the join token: the server
// must send the CA's certificate with its own (the controller does),
// the CA's fingerprint must be caSHA256, and the server's certificate
// must chain to that CA, name host and carry ControllerURI. Nothing is
// trusted on first use beyond the token's hash.
func PinnedClient(caSHA256, host string) *tls.Config {
	want := strings.ToLower(caSHA256)
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ServerName: host,
		NextProtos: []string{"http/1.1"},
		// The chain is verified below, against the pinned CA.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("%s sent no certificate", host)
			}
			var ca *x509.Certificate
			var seen []string
			for _, c := range cs.PeerCertificates[1:] {
				fp := Fingerprint(c.Raw)
				if fp == want && c.IsCA {
					ca = c
					break
				}
				seen = append(seen, fp)
			}
			if ca == nil {
				return fmt.Errorf("the controller at %s does not present the CA of the join token (sha256 %s; it presents %s): the token is for another cluster, or another server answered",
					host, want, orNone(seen))
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca)
			inter := x509.NewCertPool()
			if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: host,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				return fmt.Errorf("the controller's certificate at %s: %w", host, err)
			}
			return requireController(host)(cs)
		},
	}
}

func orNone(fps []string) string {
	if len(fps) == 0 {
		return "no CA certificate"
	}
	return "sha256 " + strings.Join(fps, ", ")
}

// NodeClient is srun's configuration for a node's step listener: the
// node's certificate must chain to roots and name node (DNS SAN and
// NodeURI), whatever address the node was reached at.
func NodeClient(roots *x509.CertPool, node string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    roots,
		ServerName: node,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("node %s sent no certificate", node)
			}
			got, err := NodeName(cs.PeerCertificates[0])
			if err != nil {
				return err
			}
			if got != node {
				return fmt.Errorf("the step listener of node %s presents node %s's certificate", node, got)
			}
			return nil
		},
	}
}

// VerifiedNode is the node a verified client certificate names (the
// first of a TLS connection's verified chains), or an error saying why
// there is none.
func VerifiedNode(cs *tls.ConnectionState) (*x509.Certificate, string, error) {
	if cs == nil {
		return nil, "", errors.New("not a TLS connection")
	}
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil, "", errors.New("no client certificate")
	}
	leaf := cs.VerifiedChains[0][0]
	name, err := NodeName(leaf)
	return leaf, name, err
}
