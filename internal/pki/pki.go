package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Files of the controller's TLS directory (<state_dir>/tls).
const (
	// CACertFile is the CA's certificate (PEM, mode 0644): what clients
	// pin and nodes receive when they join.
	CACertFile = "ca.crt"
	// CAKeyFile is the CA's private key (PKCS #8 PEM, mode 0600). It
	// never leaves the controller's host.
	CAKeyFile = "ca.key"
	// ServerFile holds the controller's certificate, the CA's after it,
	// and its key (mode 0600).
	ServerFile = "server.pem"
)

// ControllerURI is the URI SAN of the controller's certificate.
const ControllerURI = "tide://controller"

// nodeURIPrefix starts a node certificate's URI SAN; the node's name
// follows.
const nodeURIPrefix = "tide://node/"

// NodeURI is the URI SAN of node name's certificate.
func NodeURI(name string) string { return nodeURIPrefix + name }

// CAValidity is how long a new CA is valid: ten years, rotated by hand
// (docs/operations.md).
const CAValidity = 10 * 365 * 24 * time.Hour

// clockSkew backdates every certificate's NotBefore, so that a host
// whose clock lags the controller's by minutes accepts a certificate
// issued a moment ago.
const clockSkew = 5 * time.Minute

// ErrExists is returned by InitCA when the directory already holds a
// CA.
var ErrExists = errors.New("a CA already exists")

// CA is the cluster's certificate authority: its certificate and key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewKey returns a new ECDSA P-256 key.
func NewKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return k, nil
}

// serialNumber returns a random 127-bit serial number (RFC 5280 allows
// 20 octets; positive).
func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// NewCA makes a self-signed CA named after the cluster, valid from now
// for CAValidity.
func NewCA(cluster string, now time.Time) (*CA, error) {
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	sn, err := serialNumber()
	if err != nil {
		return nil, err
	}
	ski, err := keyID(key.Public())
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "Tide cluster CA " + cluster, Organization: []string{"Tide"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          ski,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// keyID is a certificate's subject key identifier: the SHA-256 of the
// public key, cut to 20 bytes (RFC 7093 method 1).
func keyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return sum[:20], nil
}

// Exists reports whether dir holds a CA certificate.
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, CACertFile))
	return err == nil
}

// InitCA makes a new CA and writes it into dir (created 0700): the key
// first (0600), then the certificate. It refuses, with ErrExists, to
// replace either file.
func InitCA(dir, cluster string, now time.Time) (*CA, error) {
	for _, f := range []string{CACertFile, CAKeyFile} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, f), ErrExists)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	ca, err := NewCA(cluster, now)
	if err != nil {
		return nil, err
	}
	key, err := MarshalKey(ca.Key)
	if err != nil {
		return nil, err
	}
	if err := writeNew(filepath.Join(dir, CAKeyFile), key, 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(filepath.Join(dir, CACertFile), ca.CertPEM(), 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// LoadCA reads the CA in dir. The key file must not be accessible to
// group or others, must hold the key of the certificate, and the
// certificate must be a CA's.
func LoadCA(dir string) (*CA, error) {
	certs, err := ReadCerts(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, err
	}
	cert := certs[0]
	if !cert.IsCA || !cert.BasicConstraintsValid {
		return nil, fmt.Errorf("%s is not a CA certificate", filepath.Join(dir, CACertFile))
	}
	kp := filepath.Join(dir, CAKeyFile)
	data, err := ReadPrivate(kp)
	if err != nil {
		return nil, err
	}
	key, err := ParseKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kp, err)
	}
	if !samePublic(key.Public(), cert.PublicKey) {
		return nil, fmt.Errorf("%s is not the key of %s", kp, filepath.Join(dir, CACertFile))
	}
	return &CA{Cert: cert, Key: key}, nil
}

// samePublic reports whether a and b are the same public key.
func samePublic(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// CertPEM is the CA's certificate in PEM.
func (ca *CA) CertPEM() []byte { return CertPEM(ca.Cert.Raw) }

// Fingerprint is the SHA-256 of the CA's certificate, in hex: what join
// tokens carry.
func (ca *CA) Fingerprint() string { return Fingerprint(ca.Cert.Raw) }

// Fingerprint is the SHA-256 of a certificate's DER, in lower-case hex.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// Pool is a pool holding the CA's certificate alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// issue signs tmpl for pub, valid from now for validity but never past
// the CA's own expiry.
func (ca *CA) issue(tmpl *x509.Certificate, pub crypto.PublicKey, now time.Time, validity time.Duration) ([]byte, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("certificate validity %s is not positive", validity)
	}
	sn, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = sn
	tmpl.NotBefore = now.Add(-clockSkew)
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	if !tmpl.NotAfter.After(now) {
		return nil, fmt.Errorf("the CA expired at %s: make a new one (tidectld ca init) and join every node again", ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	tmpl.AuthorityKeyId = ca.Cert.SubjectKeyId
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate: %w", err)
	}
	return der, nil
}

// IssueController issues the controller's server certificate for pub,
// naming hosts (DNS names or IP addresses) and ControllerURI.
func (ca *CA) IssueController(pub crypto.PublicKey, hosts []string, now time.Time, validity time.Duration) ([]byte, error) {
	u, _ := url.Parse(ControllerURI)
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "tidectld", Organization: []string{"Tide"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		URIs:        []*url.URL{u},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl, pub, now, validity)
}

// IssueNode issues a node's certificate for a CSR whose common name is
// the node's name (checked by the caller against the cluster's nodes
// and the join token). The certificate is good for client
// authentication (the node's requests to the controller) and server
// authentication (its step listener, which srun dials).
func (ca *CA) IssueNode(csr *x509.CertificateRequest, now time.Time, validity time.Duration) ([]byte, error) {
	name := csr.Subject.CommonName
	if err := ValidNodeName(name); err != nil {
		return nil, err
	}
	u, err := url.Parse(NodeURI(name))
	if err != nil {
		return nil, fmt.Errorf("node name %q: %w", name, err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name, Organization: []string{"Tide"}},
		DNSNames:    []string{name},
		URIs:        []*url.URL{u},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	return ca.issue(tmpl, csr.PublicKey, now, validity)
}

// ValidNodeName checks a node name for a certificate: 1 to 63
// characters of letters, digits, '-', '_' and '.', not starting with
// '-' or '.'.
func ValidNodeName(name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("node name %q must have 1 to 63 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' ||
			(c == '-' || c == '.') && i > 0
		if !ok {
			return fmt.Errorf("node name %q: character %q at offset %d (want letters, digits, '-', '_' or '.')", name, c, i)
		}
	}
	return nil
}

// NodeName is the node a certificate names: its NodeURI SAN, which
// must be its only URI and agree with its common name.
func NodeName(cert *x509.Certificate) (string, error) {
	if len(cert.URIs) != 1 || !strings.HasPrefix(cert.URIs[0].String(), nodeURIPrefix) {
		return "", fmt.Errorf("certificate %q is not a node's (no %s<name> URI)", cert.Subject.CommonName, nodeURIPrefix)
	}
	name := strings.TrimPrefix(cert.URIs[0].String(), nodeURIPrefix)
	if name != cert.Subject.CommonName || ValidNodeName(name) != nil {
		return "", fmt.Errorf("certificate %q names node %q in its URI: not a valid node certificate", cert.Subject.CommonName, name)
	}
	return name, nil
}

// IsController reports whether cert carries ControllerURI.
func IsController(cert *x509.Certificate) bool {
	return slices.ContainsFunc(cert.URIs, func(u *url.URL) bool { return u.String() == ControllerURI })
}

// CreateCSR makes a certificate request for node, signed by key, in
// PEM.
func CreateCSR(key crypto.Signer, node string) ([]byte, error) {
	if err := ValidNodeName(node); err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: node, Organization: []string{"Tide"}},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("create certificate request: %w", err)
	}
	return pemBlock("CERTIFICATE REQUEST", der), nil
}

// maxCSR bounds a PEM certificate request (a P-256 one is ~500 bytes).
const maxCSR = 8 << 10

// ParseCSR reads a PEM certificate request and checks its signature and
// key type (ECDSA P-256 or Ed25519).
func ParseCSR(data []byte) (*x509.CertificateRequest, error) {
	if len(data) > maxCSR {
		return nil, fmt.Errorf("certificate request of %d bytes (at most %d)", len(data), maxCSR)
	}
	b := decodePEM(data, "CERTIFICATE REQUEST")
	if b == nil {
		return nil, errors.New("no PEM CERTIFICATE REQUEST block")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request signature: %w", err)
	}
	switch k := csr.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("certificate request key: ECDSA on %s, want P-256", k.Curve.Params().Name)
		}
	default:
		if csr.PublicKeyAlgorithm != x509.Ed25519 {
			return nil, fmt.Errorf("certificate request key: %s, want ECDSA P-256 or Ed25519", csr.PublicKeyAlgorithm)
		}
	}
	return csr, nil
}

// Verify checks that cert was issued by the CA, is valid at now and is
// good for usage.
func (ca *CA) Verify(cert *x509.Certificate, now time.Time, usage x509.ExtKeyUsage) error {
	_, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// RenewAt is when a certificate should be renewed: after two thirds
// of its validity, counted from when it was issued (its NotBefore is
// backdated by clockSkew, which would push the renewal past the expiry
// of a certificate valid for less than ten minutes).
func RenewAt(cert *x509.Certificate) time.Time {
	issued := cert.NotBefore.Add(clockSkew)
	life := cert.NotAfter.Sub(issued)
	if life <= 0 {
		issued, life = cert.NotBefore, cert.NotAfter.Sub(cert.NotBefore)
	}
	return issued.Add(life * 2 / 3)
}

// isNotExist reports a missing file.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
