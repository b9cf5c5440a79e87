package jwt

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	key      = []byte("0123456789abcdef0123456789abcdef")
	otherKey = []byte("fedcba9876543210fedcba9876543210")
	now      = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

const skew = time.Minute

func enc(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// forge signs header.payload (given as JSON) with k, as an attacker
// holding k, or a library with other habits, would.
func forge(k []byte, header, payload string) string {
	signed := enc(header) + "." + enc(payload)
	m := hmac.New(sha256.New, k)
	m.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func mustSign(t *testing.T, c Claims) string {
	t.Helper()
	tok, err := Sign(key, c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestSignVerifyRoundTrip(t *testing.T) {
	c := Claims{User: "alice", IssuedAt: now, ExpiresAt: now.Add(time.Hour)}
	tok := mustSign(t, c)
	got, err := Verify(key, tok, now.Add(time.Minute), skew)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if diff := cmp.Diff(c, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	// The wire form is Slurm's: HS256 header, sun/iat/exp claims.
	parts := strings.Split(tok, ".")
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	p, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if string(h) != `{"alg":"HS256","typ":"JWT"}` {
		t.Errorf("header %s", h)
	}
	if want := `{"exp":1795957200,"iat":1795953600,"sun":"alice"}`; string(p) != want {
		t.Errorf("payload %s, want %s", p, want)
	}
}

func TestVerifyRefuses(t *testing.T) {
	valid := mustSign(t, Claims{User: "alice", IssuedAt: now, ExpiresAt: now.Add(time.Hour)})
	parts := strings.Split(valid, ".")
	payload := `{"exp":1795957200,"iat":1795953600,"sun":"alice"}`
	hs256 := `{"alg":"HS256","typ":"JWT"}`
	tests := []struct {
		name  string
		token string
		at    time.Time
		want  error
		msg   string // in the error's text
	}{
		{name: "expired", token: valid, at: now.Add(time.Hour + 5*time.Minute), want: ErrExpired,
			msg: "JWT expired at 2026-11-29T13:00:00Z (5m0s ago)"},
		{name: "expired at exactly exp", token: valid, at: now.Add(time.Hour), want: ErrExpired},
		{name: "issued in the future beyond the skew", token: valid, at: now.Add(-2 * time.Minute), want: ErrIssuedInFuture,
			msg: "2m0s from now"},
		{name: "tampered payload", token: parts[0] + "." + enc(strings.Replace(payload, "alice", "root", 1)) + "." + parts[2],
			want: ErrSignature},
		{name: "tampered signature", token: parts[0] + "." + parts[1] + "." + flip(parts[2]), want: ErrSignature},
		{name: "signature dropped", token: parts[0] + "." + parts[1] + ".", want: ErrSignature},
		{name: "wrong key", token: forge(otherKey, hs256, payload), want: ErrSignature},
		{name: "alg none, unsigned", token: enc(`{"alg":"none","typ":"JWT"}`) + "." + enc(payload) + ".", want: ErrAlgorithm,
			msg: `alg "none" (unsigned tokens are refused`},
		{name: "alg None, signed with the key", token: forge(key, `{"alg":"None"}`, payload), want: ErrAlgorithm},
		{name: "alg HS512", token: forge(key, `{"alg":"HS512","typ":"JWT"}`, payload), want: ErrAlgorithm,
			msg: `alg "HS512" (only HS256 is accepted)`},
		{name: "alg hs256 in lower case", token: forge(key, `{"alg":"hs256"}`, payload), want: ErrAlgorithm},
		{name: "no alg", token: forge(key, `{"typ":"JWT"}`, payload), want: ErrAlgorithm},
		{name: "duplicate alg", token: forge(key, `{"alg":"none","alg":"HS256"}`, payload), want: ErrMalformed,
			msg: `member "alg" appears twice`},
		{name: "critical extension", token: forge(key, `{"alg":"HS256","crit":["b64"],"b64":false}`, payload), want: ErrAlgorithm},
		{name: "embedded key", token: forge(key, `{"alg":"HS256","jwk":{"kty":"oct","k":"AA"}}`, payload), want: ErrAlgorithm},
		{name: "other typ", token: forge(key, `{"alg":"HS256","typ":"JOSE+JSON"}`, payload), want: ErrMalformed},
		{name: "missing sun", token: forge(key, hs256, `{"exp":1795957200,"iat":1795953600}`), want: ErrMissingClaim, msg: "sun"},
		{name: "empty sun", token: forge(key, hs256, `{"exp":1795957200,"iat":1795953600,"sun":""}`), want: ErrMissingClaim},
		{name: "missing exp", token: forge(key, hs256, `{"iat":1795953600,"sun":"alice"}`), want: ErrMissingClaim, msg: "exp"},
		{name: "missing iat", token: forge(key, hs256, `{"exp":1795957200,"sun":"alice"}`), want: ErrMissingClaim, msg: "iat"},
		{name: "duplicate sun", token: forge(key, hs256, `{"exp":1795957200,"iat":1795953600,"sun":"alice","sun":"root"}`), want: ErrMalformed},
		{name: "sun not a string", token: forge(key, hs256, `{"exp":1795957200,"iat":1795953600,"sun":0}`), want: ErrMalformed},
		{name: "exp a string", token: forge(key, hs256, `{"exp":"1795957200","iat":1795953600,"sun":"alice"}`), want: ErrMalformed},
		{name: "exp negative", token: forge(key, hs256, `{"exp":-1,"iat":1795953600,"sun":"alice"}`), want: ErrMalformed},
		{name: "exp huge", token: forge(key, hs256, `{"exp":1e300,"iat":1795953600,"sun":"alice"}`), want: ErrMalformed},
		{name: "exp before iat", token: forge(key, hs256, `{"exp":1795953500,"iat":1795953600,"sun":"alice"}`), want: ErrMalformed},
		{name: "payload not an object", token: forge(key, hs256, `["alice"]`), want: ErrMalformed},
		{name: "two parts", token: parts[0] + "." + parts[1], want: ErrMalformed, msg: "2 dot-separated parts"},
		{name: "five parts (JWE)", token: valid + ".a.b", want: ErrMalformed},
		{name: "padded base64", token: parts[0] + "=." + parts[1] + "." + parts[2], want: ErrMalformed},
		{name: "standard base64 alphabet", token: strings.NewReplacer("-", "+", "_", "/").Replace(parts[0]) + "+." + parts[1] + "." + parts[2], want: ErrMalformed},
		{name: "too long", token: valid + strings.Repeat("A", MaxTokenBytes), want: ErrMalformed},
		{name: "empty", token: "", want: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := tt.at
			if at.IsZero() {
				at = now
			}
			c, err := Verify(key, tt.token, at, skew)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %+v, %v; want %v", c, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
		})
	}
}

// flip changes the signature's first character to another valid one.
func flip(sig string) string {
	if sig[0] == 'A' {
		return "B" + sig[1:]
	}
	return "A" + sig[1:]
}

func TestVerifyAcceptsOtherIssuers(t *testing.T) {
	// A token from another HS256 implementation with the same key:
	// no typ, a kid, fractional times, an extra claim.
	tok := forge(key, `{"kid":"k1","alg":"HS256"}`, `{"sun":"bob","iat":1795953600.5,"exp":1795957200,"aud":"x"}`)
	c, err := Verify(key, tok, now.Add(30*time.Second), skew)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if c.User != "bob" || !c.IssuedAt.Equal(now.Add(500*time.Millisecond)) {
		t.Errorf("claims %+v", c)
	}
	// Issued slightly in the future (a clock a little ahead): within
	// the skew.
	if _, err := Verify(key, tok, now.Add(-30*time.Second), skew); err != nil {
		t.Errorf("token issued 30s ahead with a 1m skew: %v", err)
	}
}

func TestSignRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		key  []byte
		c    Claims
	}{
		{"short key", key[:31], Claims{User: "a", IssuedAt: now, ExpiresAt: now.Add(time.Hour)}},
		{"no user", key, Claims{IssuedAt: now, ExpiresAt: now.Add(time.Hour)}},
		{"expiry not after issue", key, Claims{User: "a", IssuedAt: now, ExpiresAt: now}},
	} {
		if tok, err := Sign(tt.key, tt.c); err == nil {
			t.Errorf("%s: signed %s", tt.name, tok)
		}
	}
	if _, err := Verify(key[:31], "a.b.c", now, skew); err == nil {
		t.Error("Verify with a short key succeeded")
	}
}

func TestReadKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", append(key, '\n'), 0o600)
	got, err := ReadKey(good)
	if err != nil || string(got) != string(key)+"\n" {
		t.Errorf("ReadKey(0600 file) = %q, %v; want the bytes as they are", got, err)
	}
	for _, tt := range []struct {
		name, path, msg string
	}{
		{"group readable", write("g", key, 0o640), "readable by others (mode -rw-r-----): chmod 600 it"},
		{"world readable", write("w", key, 0o644), "readable by others"},
		{"too short", write("s", key[:20], 0o600), "too short (20 bytes, at least 32"},
		{"missing", filepath.Join(dir, "none"), "no such file"},
		{"a directory", dir, "not a regular file"},
	} {
		if _, err := ReadKey(tt.path); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: ReadKey error %v, want %q", tt.name, err, tt.msg)
		}
	}
}
