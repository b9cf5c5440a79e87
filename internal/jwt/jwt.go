package jwt

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// Algorithm is the only signing algorithm this package makes and
// accepts.
const Algorithm = "HS256"

// MinKeyBytes is the shortest key Sign, Verify and ReadKey accept: an
// HMAC-SHA256 key shorter than the hash gives less than its strength
// (RFC 7518 §3.2 requires at least 256 bits).
const MinKeyBytes = 32

// MaxTokenBytes bounds the tokens Verify reads; Sign's are about 150
// bytes.
const MaxTokenBytes = 8 << 10

// Errors of Verify, for errors.Is. The errors it returns add what was
// wrong ("JWT expired at … (5m0s ago)").
var (
	// ErrMalformed: not a JWS compact serialization, not base64url, not
	// JSON, a claim of the wrong type, a duplicated member.
	ErrMalformed = errors.New("JWT malformed")
	// ErrAlgorithm: the header names an algorithm other than HS256
	// ("none" included), or carries critical extensions.
	ErrAlgorithm = errors.New("JWT algorithm not accepted")
	// ErrSignature: the signature does not match the key (the token was
	// changed, or signed with another key).
	ErrSignature = errors.New("JWT signature invalid")
	// ErrMissingClaim: sun, iat or exp is missing or empty.
	ErrMissingClaim = errors.New("JWT lacks a required claim")
	// ErrExpired: the token's exp has passed.
	ErrExpired = errors.New("JWT expired")
	// ErrIssuedInFuture: the token's iat is later than now, beyond the
	// allowed clock skew.
	ErrIssuedInFuture = errors.New("JWT issued in the future")
)

// Claims are the claims Tide's tokens carry, as Slurm's do: the user
// name (sun), when the token was issued (iat) and when it expires (exp).
// Times are whole seconds on the wire.
type Claims struct {
	User      string
	IssuedAt  time.Time
	ExpiresAt time.Time
}

// header is the only header Sign writes.
const header = `{"alg":"HS256","typ":"JWT"}`

var b64 = base64.RawURLEncoding.Strict()

// Sign returns the HS256 JWT of c signed with key. c needs a user and an
// expiry after its issue time.
func Sign(key []byte, c Claims) (string, error) {
	if len(key) < MinKeyBytes {
		return "", fmt.Errorf("sign JWT: key of %d bytes is too short (at least %d)", len(key), MinKeyBytes)
	}
	if c.User == "" {
		return "", fmt.Errorf("sign JWT: %w: sun (user name) is empty", ErrMissingClaim)
	}
	iat, exp := c.IssuedAt.Unix(), c.ExpiresAt.Unix()
	if exp <= iat {
		return "", fmt.Errorf("sign JWT: expiry %s is not after issue time %s", c.ExpiresAt, c.IssuedAt)
	}
	payload, err := json.Marshal(struct {
		Exp int64  `json:"exp"`
		Iat int64  `json:"iat"`
		Sun string `json:"sun"`
	}{exp, iat, c.User})
	if err != nil {
		return "", fmt.Errorf("sign JWT: %w", err)
	}
	var sb strings.Builder
	sb.WriteString(b64.EncodeToString([]byte(header)))
	sb.WriteByte('.')
	sb.WriteString(b64.EncodeToString(payload))
	signed := sb.String()
	return signed + "." + b64.EncodeToString(mac(key, signed)), nil
}

func mac(key []byte, signed string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// Verify checks token's form, algorithm (HS256 only), signature (in
// constant time) and claims, and returns the claims. The token must not
// be expired at now, nor issued more than skew after now. The header
// is checked before the signature, and the claims are read only once
// the signature holds.
func Verify(key []byte, token string, now time.Time, skew time.Duration) (Claims, error) {
	if len(key) < MinKeyBytes {
		return Claims{}, fmt.Errorf("verify JWT: key of %d bytes is too short (at least %d)", len(key), MinKeyBytes)
	}
	if len(token) > MaxTokenBytes {
		return Claims{}, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrMalformed, len(token), MaxTokenBytes)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Claims{}, fmt.Errorf("%w: %d dot-separated parts, want 3 (header.payload.signature)", ErrMalformed, len(parts))
	}
	if err := checkHeader(parts[0]); err != nil {
		return Claims{}, err
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return Claims{}, fmt.Errorf("%w: signature is not base64url: %v", ErrMalformed, err)
	}
	if !hmac.Equal(sig, mac(key, token[:len(parts[0])+1+len(parts[1])])) {
		return Claims{}, ErrSignature
	}
	c, err := readClaims(parts[1])
	if err != nil {
		return Claims{}, err
	}
	if c.IssuedAt.After(now.Add(skew)) {
		return Claims{}, fmt.Errorf("%w: issued at %s, %s from now", ErrIssuedInFuture,
			c.IssuedAt.UTC().Format(time.RFC3339), c.IssuedAt.Sub(now).Round(time.Second))
	}
	if !now.Before(c.ExpiresAt) {
		return Claims{}, fmt.Errorf("%w at %s (%s ago)", ErrExpired,
			c.ExpiresAt.UTC().Format(time.RFC3339), now.Sub(c.ExpiresAt).Round(time.Second))
	}
	return c, nil
}

// checkHeader accepts the header of an HS256 token: alg exactly HS256,
// typ absent or JWT, and no member that would change how the token is
// read: crit, zip, enc (JWE), or a key reference (jku, jwk, x5u, x5c:
// there is one key, the controller's). Other members (kid) are ignored.
func checkHeader(part string) error {
	raw, err := b64.DecodeString(part)
	if err != nil {
		return fmt.Errorf("%w: header is not base64url: %v", ErrMalformed, err)
	}
	h, err := object(raw)
	if err != nil {
		return fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	var alg string
	if a, ok := h["alg"]; !ok {
		return fmt.Errorf("%w: header has no alg", ErrAlgorithm)
	} else if err := json.Unmarshal(a, &alg); err != nil {
		return fmt.Errorf("%w: header alg is not a string", ErrMalformed)
	}
	if alg != Algorithm {
		if strings.EqualFold(alg, "none") {
			return fmt.Errorf("%w: alg %q (unsigned tokens are refused; only %s is accepted)", ErrAlgorithm, alg, Algorithm)
		}
		return fmt.Errorf("%w: alg %.20q (only %s is accepted)", ErrAlgorithm, alg, Algorithm)
	}
	if t, ok := h["typ"]; ok {
		var typ string
		if err := json.Unmarshal(t, &typ); err != nil || !strings.EqualFold(typ, "JWT") {
			return fmt.Errorf("%w: header typ %.20s is not JWT", ErrMalformed, t)
		}
	}
	for _, k := range []string{"crit", "jku", "jwk", "x5u", "x5c", "zip", "enc"} {
		if _, ok := h[k]; ok {
			return fmt.Errorf("%w: header member %q is not supported", ErrAlgorithm, k)
		}
	}
	return nil
}

// readClaims decodes the payload: sun a non-empty string, iat and exp
// numbers (NumericDate: seconds, possibly with a fraction), exp after
// iat. Other claims are ignored.
func readClaims(part string) (Claims, error) {
	raw, err := b64.DecodeString(part)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: payload is not base64url: %v", ErrMalformed, err)
	}
	m, err := object(raw)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	var c Claims
	s, ok := m["sun"]
	if !ok {
		return Claims{}, fmt.Errorf("%w: sun (user name)", ErrMissingClaim)
	}
	if err := json.Unmarshal(s, &c.User); err != nil {
		return Claims{}, fmt.Errorf("%w: sun is not a string", ErrMalformed)
	}
	if c.User == "" {
		return Claims{}, fmt.Errorf("%w: sun (user name) is empty", ErrMissingClaim)
	}
	for _, d := range []struct {
		name string
		dst  *time.Time
	}{{"iat", &c.IssuedAt}, {"exp", &c.ExpiresAt}} {
		v, ok := m[d.name]
		if !ok {
			return Claims{}, fmt.Errorf("%w: %s", ErrMissingClaim, d.name)
		}
		t, err := numericDate(v)
		if err != nil {
			return Claims{}, fmt.Errorf("%w: %s: %v", ErrMalformed, d.name, err)
		}
		*d.dst = t
	}
	if !c.ExpiresAt.After(c.IssuedAt) {
		return Claims{}, fmt.Errorf("%w: exp %d is not after iat %d", ErrMalformed, c.ExpiresAt.Unix(), c.IssuedAt.Unix())
	}
	return c, nil
}

// maxDate bounds NumericDates (year 9999): time.Time holds more, but
// nothing later means anything, and the bound keeps float conversion
// exact enough.
const maxDate = 253402300799

// numericDate reads a JSON number of seconds since the epoch.
func numericDate(v json.RawMessage) (time.Time, error) {
	// json.Number would also take a quoted number.
	if v = bytes.TrimSpace(v); len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return time.Time{}, fmt.Errorf("not a number")
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		return time.Time{}, fmt.Errorf("not a number")
	}
	if i, err := n.Int64(); err == nil {
		if i < 0 || i > maxDate {
			return time.Time{}, fmt.Errorf("%d is out of range", i)
		}
		return time.Unix(i, 0), nil
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || f < 0 || f > maxDate {
		return time.Time{}, fmt.Errorf("%s is not a date in range", n)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// object decodes a JSON object's members, refusing duplicates: with
// {"alg":"none","alg":"HS256"} two readers could disagree about what a
// token says.
func object(raw []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("bad JSON: %v", err)
		}
		k, ok := t.(string)
		if !ok {
			return nil, errors.New("bad JSON member name")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("bad JSON value of %q: %v", k, err)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("member %q appears twice", k)
		}
		m[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("bad JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return m, nil
}

// ReadKey reads an HS256 key file. Its bytes are the key as they are
// (Slurm's jwt_hs256.key is read the same way, so one file can serve
// both). A file that group or others may read, or one shorter than
// MinKeyBytes, is refused: whoever reads the key can sign tokens for
// any user.
func ReadKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("JWT key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("JWT key %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("JWT key %s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	if fi.Size() > 1<<20 {
		return nil, fmt.Errorf("JWT key %s is %d bytes, more than 1 MiB: not a key file", path, fi.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("JWT key: %w", err)
	}
	if len(b) < MinKeyBytes {
		return nil, fmt.Errorf("JWT key %s is too short (%d bytes, at least %d: make one with dd if=/dev/urandom of=%s bs=32 count=1)",
			path, len(b), MinKeyBytes, path)
	}
	return b, nil
}
