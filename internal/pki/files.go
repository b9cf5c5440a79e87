package pki

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// pemBlock encodes one PEM block.
func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// decodePEM returns the first block of type typ in data, or nil.
func decodePEM(data []byte, typ string) *pem.Block {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil
		}
		if b.Type == typ {
			return b
		}
	}
}

// CertPEM encodes a certificate's DER in PEM.
func CertPEM(der []byte) []byte { return pemBlock("CERTIFICATE", der) }

// ParseCerts reads every CERTIFICATE block of PEM data, at least one.
func ParseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return certs, nil
}

// ReadCerts reads the certificates of a PEM file.
func ReadCerts(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	certs, err := ParseCerts(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return certs, nil
}

// ReadPool reads a PEM file of CA certificates into a pool.
func ReadPool(path string) (*x509.CertPool, error) {
	certs, err := ReadCerts(path)
	if err != nil {
		return nil, err
	}
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p, nil
}

// MarshalKey encodes a private key as PKCS #8 PEM.
func MarshalKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}

// ParseKey reads the first PKCS #8 PRIVATE KEY block of PEM data.
func ParseKey(data []byte) (crypto.Signer, error) {
	b := decodePEM(data, "PRIVATE KEY")
	if b == nil {
		return nil, errors.New("no PEM PRIVATE KEY block")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T cannot sign", k)
	}
	return s, nil
}

// maxKeyFile bounds a file holding a key (and its certificates).
const maxKeyFile = 1 << 20

// ReadPrivate reads a file that holds a private key, refusing one that
// group or others may access.
func ReadPrivate(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s holds a private key and is accessible to others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a key file", path, maxKeyFile)
	}
	return data, nil
}

// WriteKeyPair writes a certificate chain (leaf first) and its key into
// one PEM file, mode 0600, atomically: a reader sees the old pair or
// the new one, never a certificate with another's key.
func WriteKeyPair(path string, chain [][]byte, key crypto.Signer) error {
	var data []byte
	for _, der := range chain {
		data = append(data, CertPEM(der)...)
	}
	k, err := MarshalKey(key)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, append(data, k...), 0o600)
}

// LoadKeyPair reads a file WriteKeyPair wrote (refusing one others may
// access) as a TLS certificate whose Leaf is parsed.
func LoadKeyPair(path string) (*tls.Certificate, error) {
	data, err := ReadPrivate(path)
	if err != nil {
		return nil, err
	}
	certs, err := ParseCerts(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	key, err := ParseKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !samePublic(key.Public(), certs[0].PublicKey) {
		return nil, fmt.Errorf("%s: the key is not the certificate's", path)
	}
	tc := &tls.Certificate{PrivateKey: key, Leaf: certs[0]}
	for _, c := range certs {
		tc.Certificate = append(tc.Certificate, c.Raw)
	}
	return tc, nil
}

// WriteFileAtomic replaces path with data: written to a temporary file
// in the same directory with mode perm, synced, renamed over path, and
// the directory synced, so that a crash leaves the old file or the new
// one whole.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// writeNew writes a file that must not exist yet (O_EXCL), synced.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
