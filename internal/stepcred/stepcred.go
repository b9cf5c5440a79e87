// Package stepcred signs and verifies step credentials: an Ed25519
// signature over the controller's step grant, made with a private key
// that only the controller holds (issue 21). The controller signs
// (Signer.Sign); node daemons verify (Verify) with the controller's
// public key, which they pin. Holding the cluster key is not enough to
// make a grant. srun only reads a grant (stepio.Decode) and never links
// the crypto packages, whose initialisation every CLI command would
// otherwise pay for.
//
// The package also reads and writes the keys' files (PEM: PKCS #8 for
// the private key, PKIX for a public one, as openssl writes them) and
// the wire form of a public key (its 32 bytes in standard base64).
package stepcred

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepio"
)

// Credential errors, for errors.Is.
var (
	// ErrBadCredential: the grant was not signed with the controller's
	// step key, or was changed after signing.
	ErrBadCredential = errors.New("invalid step credential")
	// ErrExpired: the grant is past its expiry.
	ErrExpired = errors.New("step credential expired")
	// ErrWrongNode: the grant does not name this node.
	ErrWrongNode = errors.New("step credential is for other nodes")
)

// signContext separates step grants from anything else the key might
// ever sign (Ed25519ctx, RFC 8032): a signature made for another
// purpose does not verify as a grant.
const signContext = "tide step grant v1"

var signOpts = &ed25519.Options{Context: signContext}

// Signer signs step grants with the controller's private key.
type Signer struct {
	key ed25519.PrivateKey
}

// NewSigner returns a Signer for key.
func NewSigner(key ed25519.PrivateKey) *Signer { return &Signer{key: key} }

// Public is the key that verifies the Signer's grants.
func (s *Signer) Public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// Sign encodes g and signs it.
func (s *Signer) Sign(g *api.StepGrant) (api.SignedGrant, error) {
	body, err := json.Marshal(g)
	if err != nil {
		return api.SignedGrant{}, fmt.Errorf("encode step grant: %w", err)
	}
	sig, err := s.key.Sign(nil, body, signOpts)
	if err != nil {
		return api.SignedGrant{}, fmt.Errorf("sign step grant: %w", err)
	}
	return api.SignedGrant{Body: body, Cred: base64.StdEncoding.EncodeToString(sig)}, nil
}

// Verify checks that sg was signed with the private key of pub, that the
// grant has not expired at now and that it gives node a part of the
// step, and returns the grant and node's index in it. It does not know
// which jobs run on the node, nor which steps started there: the node
// daemon checks those.
func Verify(pub ed25519.PublicKey, sg api.SignedGrant, node string, now time.Time) (*api.StepGrant, int, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, -1, fmt.Errorf("%w: this node has no step key from the controller", ErrBadCredential)
	}
	sig, err := base64.StdEncoding.DecodeString(sg.Cred)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, -1, fmt.Errorf("%w: the credential is not an Ed25519 signature", ErrBadCredential)
	}
	if err := ed25519.VerifyWithOptions(pub, sg.Body, sig, signOpts); err != nil {
		return nil, -1, fmt.Errorf("%w: not signed by the controller's step key %s", ErrBadCredential, Fingerprint(pub))
	}
	g, err := stepio.Decode(sg)
	if err != nil {
		return nil, -1, fmt.Errorf("%w: %v", ErrBadCredential, err)
	}
	if !now.Before(g.Expires) {
		return nil, -1, fmt.Errorf("%w: the grant of step %s was good until %s (now %s)", ErrExpired, g.ID(),
			g.Expires.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	i := g.NodeIndex(node)
	if i < 0 {
		return nil, -1, fmt.Errorf("%w: step %s does not run on %s", ErrWrongNode, g.ID(), node)
	}
	return g, i, nil
}

// Fingerprint names a public key in logs and errors, as ssh does:
// "SHA256:" and the unpadded base64 of the key's SHA-256.
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// EncodePublic is pub's wire form (api.NodeSyncResponse.StepKey).
func EncodePublic(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }

// ParsePublic reads a public key's wire form.
func ParsePublic(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("step key %q is not a base64 Ed25519 public key", s)
	}
	return ed25519.PublicKey(b), nil
}

// LoadOrCreateKey reads the private key at path, or, when there is no
// file there, generates one and writes it (mode 0600; created reports
// it). A key file that others may read or write is refused: whoever
// reads it can run any command as any user on every node.
func LoadOrCreateKey(path string) (key ed25519.PrivateKey, created bool, err error) {
	key, err = LoadKey(path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, false, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("generate step key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, false, fmt.Errorf("encode step key: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	switch err := writeNew(path, data, 0o600); {
	case errors.Is(err, os.ErrExist):
		// Another process made it first: theirs is the key.
		key, err := LoadKey(path)
		return key, false, err
	case err != nil:
		return nil, false, fmt.Errorf("step key: %w", err)
	}
	return priv, true, nil
}

// LoadKey reads the PEM (PKCS #8) Ed25519 private key at path; a file
// that others may read or write is refused. A missing file is an error
// matching os.ErrNotExist.
func LoadKey(path string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("step key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("step key %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("step key %s is accessible to others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("step key: %w", err)
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("step key %s: not a PEM \"PRIVATE KEY\" block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("step key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("step key %s: a %T, not an Ed25519 key", path, k)
	}
	return priv, nil
}

// ReadPublicFile reads a PEM (PKIX "PUBLIC KEY") Ed25519 public key, as
// WritePublicFile or `openssl pkey -pubout` write it. A missing file is
// an error matching os.ErrNotExist.
func ReadPublicFile(path string) (ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%s: not a PEM \"PUBLIC KEY\" block", path)
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s: a %T, not an Ed25519 key", path, k)
	}
	return pub, nil
}

// WritePublicFile writes pub to path (mode 0644) unless a file is there
// already (an error matching os.ErrExist).
func WritePublicFile(path string, pub ed25519.PublicKey) error {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return err
	}
	return writeNew(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
}

// writeNew writes data to path unless it exists, so that a reader never
// sees half a file: it is written and synced under a temporary name and
// linked into place (a link never replaces a file).
func writeNew(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
