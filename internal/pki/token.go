package pki

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
)

// TokenPrefix starts every join token (its format's version).
const TokenPrefix = "tide1"

// Lengths of a token's parts, in hex digits.
const (
	tokenIDLen     = 16 // 8 random bytes: names the token in logs and audit
	tokenSecretLen = 32 // 16 random bytes: the secret
	caHashLen      = 64 // SHA-256
)

// Token is a node join token, printed as
// tide1.<id>.<secret>.<ca-sha256>: the id names it (logs, audit), the
// secret proves it (the controller keeps only its SHA-256), and the CA
// hash lets the joining node authenticate the controller before it
// sends the secret, as kubeadm's discovery hash does.
type Token struct {
	ID, Secret, CAHash string
}

// NewToken makes a token with a fresh id and secret for the CA of
// fingerprint caHash.
func NewToken(caHash string) (Token, error) {
	var b [8 + 16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Token{}, fmt.Errorf("join token: %w", err)
	}
	return Token{ID: hex.EncodeToString(b[:8]), Secret: hex.EncodeToString(b[8:]), CAHash: caHash}, nil
}

// String is the token as operators pass it to `tided join`.
func (t Token) String() string {
	return TokenPrefix + "." + t.ID + "." + t.Secret + "." + t.CAHash
}

// ParseToken reads a token. Errors never repeat the secret.
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, ".")
	if len(parts) != 4 || parts[0] != TokenPrefix {
		return Token{}, fmt.Errorf("not a join token (want %s.<id>.<secret>.<ca-sha256>, as `tidectld node-token create` prints)", TokenPrefix)
	}
	t := Token{ID: parts[1], Secret: parts[2], CAHash: strings.ToLower(parts[3])}
	for _, p := range []struct {
		what, v string
		n       int
	}{{"id", t.ID, tokenIDLen}, {"secret", t.Secret, tokenSecretLen}, {"CA hash", t.CAHash, caHashLen}} {
		if len(p.v) != p.n || !isHex(p.v) {
			return Token{}, fmt.Errorf("join token: its %s is not %d hex digits", p.what, p.n)
		}
	}
	return t, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// SecretHash is the SHA-256 of the token's secret, in hex: all the
// controller stores.
func (t Token) SecretHash() string { return HashSecret(t.Secret) }

// HashSecret is the SHA-256 of a token secret, in hex.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(secret)))
	return hex.EncodeToString(sum[:])
}

// SecretMatches compares a presented secret with a stored hash in
// constant time.
func SecretMatches(secret, hash string) bool {
	return subtle.ConstantTimeCompare([]byte(HashSecret(secret)), []byte(hash)) == 1
}

// ValidTokenID reports whether id looks like a token id (16 hex
// digits).
func ValidTokenID(id string) bool { return len(id) == tokenIDLen && isHex(id) }
