package stepcred

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func grant(now time.Time) *api.StepGrant {
	return &api.StepGrant{JobID: 7, Restart: 1, StepID: 1, UserID: 1000, GroupID: 1000, User: "alice",
		Issued: now, Expires: now.Add(2 * time.Minute), JobEnd: now.Add(time.Hour), JobNodes: []string{"gpu01", "gpu02"}, NTasks: 2,
		Nodes: []api.StepNode{{Name: "gpu01", Addr: "127.0.0.1:1", Ranks: []int{0}, CPUs: 4}, {Name: "gpu02", Addr: "127.0.0.1:2", Ranks: []int{1}, CPUs: 4}},
		Argv:  []string{"hostname"}, Cwd: "/tmp"}
}

// tamper returns sg with old replaced by new in its body, failing t when
// the body does not hold old.
func tamper(t *testing.T, sg api.SignedGrant, old, new string) api.SignedGrant {
	t.Helper()
	if !bytes.Contains(sg.Body, []byte(old)) {
		t.Fatalf("grant body has no %s to tamper with: %s", old, sg.Body)
	}
	sg.Body = bytes.Replace(sg.Body, []byte(old), []byte(new), 1)
	return sg
}

func TestVerify(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	key := newKey(t)
	s := NewSigner(key)
	pub := s.Public()
	good, err := s.Sign(grant(now))
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewSigner(newKey(t)).Sign(grant(now))
	if err != nil {
		t.Fatal(err)
	}
	// The scheme before issue 21: an HMAC under the cluster key, which
	// every node holds.
	mac := hmac.New(sha256.New, []byte("the-cluster-key-0123456789"))
	mac.Write(good.Body)
	hmacForged := api.SignedGrant{Body: good.Body, Cred: hex.EncodeToString(mac.Sum(nil))}
	// The right key without the grant's context (plain Ed25519).
	noContext := api.SignedGrant{Body: good.Body, Cred: base64.StdEncoding.EncodeToString(ed25519.Sign(key, good.Body))}
	garbage := good
	garbage.Cred = "!!" + good.Cred[2:]
	short := good
	short.Cred = base64.StdEncoding.EncodeToString([]byte("short"))

	tests := []struct {
		name     string
		sg       api.SignedGrant
		pub      ed25519.PublicKey
		node     string
		now      time.Time
		wantErr  error
		wantNode int
	}{
		{name: "valid first node", sg: good, pub: pub, node: "gpu01", now: now, wantNode: 0},
		{name: "valid second node", sg: good, pub: pub, node: "gpu02", now: now.Add(time.Minute), wantNode: 1},
		{name: "uid changed", sg: tamper(t, good, `"user_id":1000`, `"user_id":0`), pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "gid changed", sg: tamper(t, good, `"group_id":1000`, `"group_id":0`), pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "job changed", sg: tamper(t, good, `"job_id":7`, `"job_id":8`), pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "restart changed", sg: tamper(t, good, `"restart":1`, `"restart":2`), pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "step changed", sg: tamper(t, good, `"step_id":1`, `"step_id":2`), pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "expiry moved", sg: tamper(t, good, `"expires":"2026-01-02T03:06:05Z"`, `"expires":"2027-01-02T03:06:05Z"`), pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "node renamed", sg: tamper(t, good, `"name":"gpu02"`, `"name":"gpu03"`), pub: pub, node: "gpu03", now: now, wantErr: ErrBadCredential},
		{name: "node's share grown", sg: tamper(t, good, `"cpus":4`, `"cpus":64`), pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "command changed", sg: tamper(t, good, `"hostname"`, `"reboot"`), pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "signed with another key", sg: other, pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "verified with another key", sg: good, pub: NewSigner(newKey(t)).Public(), node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "HMAC with the cluster key", sg: hmacForged, pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "Ed25519 without the grant context", sg: noContext, pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "credential not base64", sg: garbage, pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "credential too short", sg: short, pub: pub, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "no key pinned yet", sg: good, pub: nil, node: "gpu01", now: now, wantErr: ErrBadCredential},
		{name: "expired", sg: good, pub: pub, node: "gpu01", now: now.Add(2 * time.Minute), wantErr: ErrExpired},
		{name: "other node", sg: good, pub: pub, node: "gpu03", now: now, wantErr: ErrWrongNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, i, err := Verify(tt.pub, tt.sg, tt.node, tt.now)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if g != nil || i != -1 {
					t.Fatalf("refused grant returned %+v, node %d", g, i)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if i != tt.wantNode || g.JobID != 7 || g.Restart != 1 || g.User != "alice" {
				t.Fatalf("got node %d grant %+v", i, g)
			}
		})
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "step_key.pem")
	k1, created, err := LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatalf("first start: created %v, %v", created, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	k2, created, err := LoadOrCreateKey(path)
	if err != nil || created || !k1.Equal(k2) {
		t.Fatalf("restart: created %v, same key %v, %v", created, k1.Equal(k2), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}

	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	tests := []struct {
		name    string
		data    []byte
		mode    os.FileMode
		wantErr string
	}{
		{name: "readable by the group", data: good, mode: 0o640, wantErr: "accessible to others (mode -rw-r-----): chmod 600"},
		{name: "readable by all", data: good, mode: 0o604, wantErr: "accessible to others"},
		{name: "not PEM", data: []byte("hello\n"), mode: 0o600, wantErr: `not a PEM "PRIVATE KEY" block`},
		{name: "public key instead", data: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1}}), mode: 0o600, wantErr: `not a PEM "PRIVATE KEY" block`},
		{name: "ECDSA key", data: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}), mode: 0o600, wantErr: "not an Ed25519 key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "step_key.pem")
			if err := os.WriteFile(p, tt.data, tt.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, tt.mode)
			_, created, err := LoadOrCreateKey(p)
			if err == nil || created || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("created %v, err %v; want an error containing %q", created, err, tt.wantErr)
			}
			if after, _ := os.ReadFile(p); !bytes.Equal(after, tt.data) {
				t.Fatal("a refused key file was changed")
			}
		})
	}
	t.Run("directory in the way", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "step_key.pem")
		os.Mkdir(p, 0o700)
		if _, _, err := LoadOrCreateKey(p); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("err %v", err)
		}
	})
}

func TestPublicKeyForms(t *testing.T) {
	pub := NewSigner(newKey(t)).Public()
	got, err := ParsePublic(EncodePublic(pub))
	if err != nil || !got.Equal(pub) {
		t.Fatalf("wire round trip: %v", err)
	}
	for _, bad := range []string{"", "not base64!", base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := ParsePublic(bad); err == nil {
			t.Errorf("ParsePublic(%q) accepted", bad)
		}
	}
	path := filepath.Join(t.TempDir(), "controller_step_key.pem")
	if _, err := ReadPublicFile(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if err := WritePublicFile(path, pub); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadPublicFile(path); err != nil || !got.Equal(pub) {
		t.Fatalf("file round trip: %v", err)
	}
	if err := WritePublicFile(path, NewSigner(newKey(t)).Public()); !errors.Is(err, os.ErrExist) {
		t.Fatalf("overwrite of a pinned key: %v, want os.ErrExist", err)
	}
	if got, _ := ReadPublicFile(path); !got.Equal(pub) {
		t.Fatal("the pinned key was replaced")
	}
	if !strings.HasPrefix(Fingerprint(pub), "SHA256:") || Fingerprint(pub) == Fingerprint(NewSigner(newKey(t)).Public()) {
		t.Fatalf("fingerprint %q", Fingerprint(pub))
	}
}
