package munge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/internal/munge/mungetest"
)

// The tests below run against private munged daemons (mungetest.Start)
// and skip when munged is not installed; the hostile-peer tests in
// fake_test.go need no munged.

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	d := mungetest.Start(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), MaxPayload/16)
	tests := []struct {
		name    string
		payload []byte
	}{
		{"no payload", nil},
		{"text", []byte("hello, tide")},
		{"binary with NULs", []byte{0, 1, 2, 0, 255, '\n', 0}},
		{"largest payload", big},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			before := time.Now().Truncate(time.Second)
			cred, err := Encode(ctx, d.Socket, tt.payload)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if !strings.HasPrefix(cred, "MUNGE:") || !strings.HasSuffix(cred, ":") {
				t.Errorf("credential %.40q… is not armored as MUNGE:…:", cred)
			}
			c, err := Decode(ctx, d.Socket, cred)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !bytes.Equal(c.Payload, tt.payload) {
				t.Errorf("payload: got %d bytes %.32q, want %d bytes %.32q", len(c.Payload), c.Payload, len(tt.payload), tt.payload)
			}
			if len(tt.payload) == 0 && c.Payload != nil {
				t.Errorf("empty payload decoded as %q, want nil", c.Payload)
			}
			if c.UID != uint32(os.Getuid()) || c.GID != uint32(os.Getgid()) {
				t.Errorf("uid/gid %d/%d, want the caller's %d/%d", c.UID, c.GID, os.Getuid(), os.Getgid())
			}
			if c.TTL != 300*time.Second {
				t.Errorf("TTL %v, want munged's default 5m0s", c.TTL)
			}
			after := time.Now()
			if c.Encoded.Before(before) || c.Encoded.After(after) || c.Decoded.Before(c.Encoded) || c.Decoded.After(after) {
				t.Errorf("encoded %v, decoded %v: want before %v ≤ encoded ≤ decoded ≤ after %v", c.Encoded, c.Decoded, before, after)
			}
		})
	}
}

func TestEncodeRefusesOversizePayload(t *testing.T) {
	// Refused before munged is asked: the socket does not exist.
	_, err := Encode(testCtx(t), filepath.Join(t.TempDir(), "none"), make([]byte, MaxPayload+1))
	if err == nil || !strings.Contains(err.Error(), "exceeds munged's limit") {
		t.Fatalf("Encode of %d bytes: got %v, want a payload-size error", MaxPayload+1, err)
	}
	if errors.Is(err, ErrUnreachable) {
		t.Errorf("Encode of an oversize payload contacted munged: %v", err)
	}
}

// The uid and gid come from munged's view of the socket, never from the
// request: a credential made by another user names that user.
func TestUIDGIDFromMunged(t *testing.T) {
	t.Parallel()
	munge := mungetest.Tool("munge")
	setpriv, _ := exec.LookPath("setpriv")
	if os.Geteuid() != 0 || munge == "" || setpriv == "" {
		t.Skip("needs root, the munge tool and setpriv (util-linux) to encode as another user")
	}
	d := mungetest.Start(t)
	out, err := exec.Command(setpriv, "--reuid=65534", "--regid=65533", "--clear-groups",
		munge, "-S", d.Socket, "-s", "nobody").Output()
	if err != nil {
		t.Fatalf("munge as uid 65534: %v: %s", err, exitStderr(err))
	}
	c, err := Decode(testCtx(t), d.Socket, strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if c.UID != 65534 || c.GID != 65533 || string(c.Payload) != "nobody" {
		t.Errorf("got uid %d gid %d payload %q, want 65534 65533 \"nobody\"", c.UID, c.GID, c.Payload)
	}
}

// Credentials made by MUNGE's own munge tool decode here, and ours decode
// with its unmunge tool.
func TestInteropWithMungeTools(t *testing.T) {
	t.Parallel()
	d := mungetest.Start(t)
	t.Run("munge encodes, Decode", func(t *testing.T) {
		munge := mungetest.Tool("munge")
		if munge == "" {
			t.Skip("the munge tool is not installed")
		}
		out, err := exec.Command(munge, "-S", d.Socket, "-s", "from the C tool").Output()
		if err != nil {
			t.Fatalf("munge: %v: %s", err, exitStderr(err))
		}
		c, err := Decode(testCtx(t), d.Socket, strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if string(c.Payload) != "from the C tool" || c.UID != uint32(os.Getuid()) {
			t.Errorf("got payload %q uid %d, want %q uid %d", c.Payload, c.UID, "from the C tool", os.Getuid())
		}
	})
	t.Run("Encode, unmunge decodes", func(t *testing.T) {
		unmunge := mungetest.Tool("unmunge")
		if unmunge == "" {
			t.Skip("the unmunge tool is not installed")
		}
		cred, err := Encode(testCtx(t), d.Socket, []byte("from Go\n"))
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		cmd := exec.Command(unmunge, "-S", d.Socket, "-N")
		cmd.Stdin = strings.NewReader(cred)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("unmunge: %v: %s", err, exitStderr(err))
		}
		meta, payload, _ := strings.Cut(string(out), "\n\n")
		fields := map[string]string{}
		for _, line := range strings.Split(meta, "\n") {
			k, v, _ := strings.Cut(line, ":")
			fields[k] = strings.TrimSpace(v)
		}
		want := map[string]string{"STATUS": "0", "UID": strconv.Itoa(os.Getuid()), "GID": strconv.Itoa(os.Getgid()), "LENGTH": "8"}
		for k, v := range want {
			if fields[k] != v {
				t.Errorf("unmunge %s: got %q, want %q\n%s", k, fields[k], v, out)
			}
		}
		if payload != "from Go\n" {
			t.Errorf("unmunge payload %q, want %q", payload, "from Go\n")
		}
	})
}

// Two daemons with one key are two hosts of a cluster: what one encodes
// the other decodes.
func TestSharedKeyAcrossDaemons(t *testing.T) {
	t.Parallel()
	login := mungetest.Start(t)
	ctl := mungetest.StartWithKey(t, login.Key)
	ctx := testCtx(t)
	cred, err := Encode(ctx, login.Socket, []byte("job"))
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	c, err := Decode(ctx, ctl.Socket, cred)
	if err != nil {
		t.Fatalf("Decode on the other daemon: %v", err)
	}
	if string(c.Payload) != "job" || c.UID != uint32(os.Getuid()) {
		t.Errorf("got payload %q uid %d", c.Payload, c.UID)
	}
	// Each munged remembers only what it decoded itself: a credential
	// is refused as replayed by the daemon that decoded it, and not by
	// another. Hence one decoder (the controller's munged) per service.
	_, err = Decode(ctx, ctl.Socket, cred)
	wantRefusal(t, err, ErrReplayed, CodeReplayed)
	if _, err := Decode(ctx, login.Socket, cred); err != nil {
		t.Errorf("Decode on the daemon that encoded it (and never decoded it): %v", err)
	}
}

func TestReplayRefused(t *testing.T) {
	t.Parallel()
	d := mungetest.Start(t)
	ctx := testCtx(t)
	cred, err := Encode(ctx, d.Socket, []byte("once"))
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if _, err := Decode(ctx, d.Socket, cred); err != nil {
		t.Fatalf("first Decode: %v", err)
	}
	c, err := Decode(ctx, d.Socket, cred)
	wantRefusal(t, err, ErrReplayed, CodeReplayed)
	if c.UID != 0 || c.Payload != nil {
		t.Errorf("a refused credential returned %+v, want the zero Credential", c)
	}
}

func TestExpiredRefused(t *testing.T) {
	t.Parallel()
	d := mungetest.Start(t)
	ctx := testCtx(t)
	cred, err := encode(ctx, d.Socket, nil, 1)
	if err != nil {
		t.Fatalf("encode with a TTL of 1s: %v", err)
	}
	// munged counts whole seconds: a TTL of 1 expires once its clock
	// reads the encode second + 2.
	time.Sleep(time.Until(time.Unix(time.Now().Unix()+2, 0).Add(50 * time.Millisecond)))
	_, err = Decode(ctx, d.Socket, cred)
	wantRefusal(t, err, ErrExpired, CodeExpired)
}

func TestOtherKeyRefused(t *testing.T) {
	t.Parallel()
	ours, theirs := mungetest.Start(t), mungetest.Start(t)
	ctx := testCtx(t)
	cred, err := Encode(ctx, theirs.Socket, []byte("not yours"))
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	_, err = Decode(ctx, ours.Socket, cred)
	wantRefusal(t, err, ErrInvalid, CodeInvalid)
}

func TestGarbageRefused(t *testing.T) {
	t.Parallel()
	d := mungetest.Start(t)
	ctx := testCtx(t)
	good, err := Encode(ctx, d.Socket, []byte("payload"))
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	// Flip one character in the middle of the base64 armor.
	mid := len(good) / 2
	flip := byte('A')
	if good[mid] == 'A' {
		flip = 'B'
	}
	tampered := good[:mid] + string(flip) + good[mid+1:]
	tests := []struct {
		name string
		cred string
	}{
		{"empty", ""},
		{"plain text", "let me in"},
		{"armor only", "MUNGE::"},
		{"short base64", "MUNGE:AAAA:"},
		{"tampered", tampered},
		{"truncated", good[:len(good)-10] + ":"},
		{"NUL inside", good[:10] + "\x00" + good[10:]},
		{"too long", "MUNGE:" + strings.Repeat("A", maxCredential-6) + ":"},
		// The longest credential Decode sends: munged reads and refuses
		// it rather than hanging up on an oversize request.
		{"longest sent to munged", "MUNGE:" + strings.Repeat("A", maxCredential-7) + ":"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(ctx, d.Socket, tt.cred)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode(%.30q…): got %v, want ErrInvalid", tt.cred, err)
			}
			var me *Error
			if tt.name == "longest sent to munged" && !errors.As(err, &me) {
				t.Errorf("Decode of %d bytes: got %v, want munged's refusal (a *munge.Error)", len(tt.cred), err)
			}
			for _, other := range []error{ErrReplayed, ErrExpired, ErrRewound, ErrUnreachable, ErrProtocol} {
				if errors.Is(err, other) {
					t.Errorf("Decode(%.30q…): %v also matches %v", tt.cred, err, other)
				}
			}
		})
	}
	// The good credential is still unused: garbage did not disturb munged.
	if _, err := Decode(ctx, d.Socket, good); err != nil {
		t.Errorf("Decode of the untampered credential: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "munge-unreach-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	// A socket file nobody listens on any more (munged died).
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	// A regular file where the socket should be.
	regular := filepath.Join(dir, "file")
	if err := os.WriteFile(regular, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, socket, want string
	}{
		{"no such socket", filepath.Join(dir, "missing.sock"), "is munged running?"},
		{"stale socket", stale, "is munged running?"},
		{"not a socket", regular, "(not a socket)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			_, err := Encode(ctx, tt.socket, []byte("x"))
			checkUnreachable(t, "Encode", err, tt.socket, tt.want)
			_, err = Decode(ctx, tt.socket, "MUNGE:AAAA:")
			checkUnreachable(t, "Decode", err, tt.socket, tt.want)
		})
	}

	t.Run("stopped munged", func(t *testing.T) {
		d := mungetest.Start(t)
		if err := d.Stop(); err != nil {
			t.Fatal(err)
		}
		_, err := Encode(testCtx(t), d.Socket, nil)
		if !errors.Is(err, ErrUnreachable) {
			t.Errorf("Encode to a stopped munged: got %v, want ErrUnreachable", err)
		}
	})
}

func checkUnreachable(t *testing.T, op string, err error, socket, want string) {
	t.Helper()
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("%s: got %v, want ErrUnreachable", op, err)
	}
	if msg := err.Error(); !strings.Contains(msg, socket) || !strings.Contains(msg, want) {
		t.Errorf("%s: message %q should name the socket %s and say %q", op, msg, socket, want)
	}
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrProtocol) {
		t.Errorf("%s: %v matches another class", op, err)
	}
}

// wantRefusal checks that err is munged's refusal with code, of class.
func wantRefusal(t *testing.T, err error, class error, code Code) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Fatalf("got %v, want %v", err, class)
	}
	var me *Error
	if !errors.As(err, &me) || me.Code != code {
		t.Fatalf("got %#v, want a *munge.Error with code %v", err, code)
	}
	for _, other := range []error{ErrReplayed, ErrExpired, ErrRewound, ErrInvalid, ErrUnreachable, ErrProtocol} {
		if other != class && errors.Is(err, other) {
			t.Errorf("%v also matches %v", err, other)
		}
	}
}

func exitStderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return fmt.Sprint(err)
}
