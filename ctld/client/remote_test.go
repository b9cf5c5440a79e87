package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/munge"
	"github.com/tide-hpc/tide/internal/munge/mungetest"
	"github.com/tide-hpc/tide/internal/pki"
)

// countingCreds hands out "Test cred-N", a fresh one per call, as MUNGE
// does; fail, when set, is returned instead.
type countingCreds struct {
	mu   sync.Mutex
	n    int
	fail error
	// value, when set, is returned as it is.
	value string
}

func (c *countingCreds) Authorization(context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		return "", c.fail
	}
	if c.value != "" {
		return c.value, nil
	}
	c.n++
	return fmt.Sprintf("Test cred-%d", c.n), nil
}

// authServer records the Authorization header of each request and
// answers each with the next of answers (status, body); past them, 200
// with a submission's answer.
type authServer struct {
	mu      sync.Mutex
	seen    []string
	answers [][2]string
}

func (s *authServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := len(s.seen)
	s.seen = append(s.seen, r.Header.Get("Authorization"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if i < len(s.answers) {
		var st int
		fmt.Sscan(s.answers[i][0], &st)
		w.WriteHeader(st)
		fmt.Fprint(w, s.answers[i][1])
		return
	}
	fmt.Fprint(w, `{"job_id":7}`)
}

func (s *authServer) headers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func TestRemoteSendsAFreshCredentialPerRequest(t *testing.T) {
	as := &authServer{answers: [][2]string{{"503", `{"error":{"code":"unavailable","message":"could not store the job"}}`}}}
	srv := httptest.NewServer(as)
	defer srv.Close()
	creds := &countingCreds{}
	c := NewRemote(strings.TrimPrefix(srv.URL, "http://"), creds)
	defer c.Close()
	c.sleep = func(context.Context, time.Duration) error { return nil }
	c.SetRetryWindow(time.Minute)
	// The first try is answered 503; the retry carries a new credential.
	r, err := c.Submit(context.Background(), api.SubmitRequest{Spec: api.JobSpec{Name: "x"}})
	if err != nil || r.JobID != 7 {
		t.Fatalf("submit: %+v, %v", r, err)
	}
	if _, err := c.Submit(context.Background(), api.SubmitRequest{Spec: api.JobSpec{Name: "y"}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"Test cred-1", "Test cred-2", "Test cred-3"}
	if got := as.headers(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Authorization headers %q, want %q", got, want)
	}
}

func TestRemoteCredentialErrors(t *testing.T) {
	as := &authServer{}
	srv := httptest.NewServer(as)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	tests := []struct {
		name  string
		creds Credentials
		want  string
	}{
		{name: "source fails", creds: &countingCreds{fail: errors.New("munged: connection refused")},
			want: "no credential for tidectld at " + addr + ": munged: connection refused"},
		{name: "line break in the credential", creds: &countingCreds{value: "Bearer a.b.c\r\nX-Forged: 1"},
			want: "credential has control characters"},
		{name: "no munged", creds: Munge{Socket: "/nonexistent/munge.socket"},
			want: "get a MUNGE credential from munged at /nonexistent/munge.socket (TIDE_MUNGE_SOCKET)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewRemote(addr, tt.creds)
			defer c.Close()
			_, err := c.Jobs(context.Background(), api.JobFilter{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want %q", err, tt.want)
			}
			if errors.Is(err, api.ErrUnavailable) {
				t.Errorf("credential failure %v is classed unavailable (callers would retry it)", err)
			}
		})
	}
	if n := len(as.headers()); n != 0 {
		t.Errorf("%d requests reached the controller without a credential", n)
	}
}

func TestRemoteUnauthenticatedAnswer(t *testing.T) {
	as := &authServer{answers: [][2]string{{"401", `{"error":{"code":"unauthenticated","message":"tidectld: authentication failed: JWT expired at 2026-11-29T13:00:00Z (5m0s ago)"}}`}}}
	srv := httptest.NewServer(as)
	defer srv.Close()
	c := NewRemote(strings.TrimPrefix(srv.URL, "http://"), Bearer("a.b.c"))
	defer c.Close()
	_, err := c.Jobs(context.Background(), api.JobFilter{})
	if !errors.Is(err, api.ErrUnauthenticated) || err.Error() != "tidectld: authentication failed: JWT expired at 2026-11-29T13:00:00Z (5m0s ago)" {
		t.Errorf("err %v", err)
	}
	if got := as.headers(); len(got) != 1 || got[0] != "Bearer a.b.c" {
		t.Errorf("headers %q", got)
	}
}

func TestParseBearer(t *testing.T) {
	for _, tt := range []struct {
		in, want, err string
	}{
		{in: "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJhIn0.c2ln", want: "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJhIn0.c2ln"},
		{in: " a-b.c_d.e\n", want: "a-b.c_d.e"},
		{in: "", err: "TIDE_JWT is empty"},
		{in: "TIDE_JWT=a.b.c", err: "TIDE_JWT holds TIDE_JWT=…: set it to the token alone"},
		{in: "a.b.c\r\nX-Forged: 1", err: `TIDE_JWT is not a JWT: character '\r' at offset 5`},
		{in: "a.b", err: "2 dot-separated parts, want 3"},
		{in: "a+b.c.d", err: "character '+'"},
	} {
		got, err := ParseBearer(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseBearer(%q) = %q, %v; want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("ParseBearer(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	ca, err := pki.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	notCA := filepath.Join(t.TempDir(), "not.crt")
	os.WriteFile(notCA, []byte("hello\n"), 0o644)
	tests := []struct {
		name      string
		env       map[string]string
		wantWhere string
		wantAuth  string // "" none, "bearer", "munge:<socket>"
		wantErr   string
	}{
		{name: "socket by default", wantWhere: DefaultSocket},
		{name: "TIDE_SOCKET", env: map[string]string{"TIDE_SOCKET": "/tmp/x.sock", JWTEnv: "a.b.c"}, wantWhere: "/tmp/x.sock"},
		{name: "TCP with a token", env: map[string]string{ControllerEnv: "ctl:6820", JWTEnv: "a.b.c", CAEnv: caFile}, wantWhere: "ctl:6820", wantAuth: "bearer"},
		{name: "TCP with MUNGE", env: map[string]string{ControllerEnv: "ctl:6820", CAEnv: caFile}, wantWhere: "ctl:6820", wantAuth: "munge:" + DefaultMungeSocket},
		{name: "TCP with another munged", env: map[string]string{ControllerEnv: "[::1]:6820", MungeSocketEnv: "/tmp/m.sock", CAEnv: caFile},
			wantWhere: "[::1]:6820", wantAuth: "munge:/tmp/m.sock"},
		{name: "TCP without the CA", env: map[string]string{ControllerEnv: "ctl:6820", JWTEnv: "a.b.c", CAEnv: "/nonexistent/ca.crt"},
			wantErr: "need the cluster CA's certificate: open /nonexistent/ca.crt"},
		{name: "TCP with a CA file that holds none", env: map[string]string{ControllerEnv: "ctl:6820", JWTEnv: "a.b.c", CAEnv: notCA},
			wantErr: "no PEM CERTIFICATE block"},
		{name: "no port", env: map[string]string{ControllerEnv: "ctl"}, wantErr: `TIDE_CONTROLLER="ctl" is not host:port`},
		{name: "bad port", env: map[string]string{ControllerEnv: "ctl:api"}, wantErr: "with a port number"},
		{name: "no host", env: map[string]string{ControllerEnv: ":6820"}, wantErr: "with a port number"},
		{name: "bad token", env: map[string]string{ControllerEnv: "ctl:6820", JWTEnv: "a.b"}, wantErr: "TIDE_JWT is not a JWT"},
		{name: "empty token", env: map[string]string{ControllerEnv: "ctl:6820", JWTEnv: ""}, wantErr: "TIDE_JWT is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"TIDE_SOCKET", ControllerEnv, JWTEnv, MungeSocketEnv, CAEnv} {
				if v, ok := tt.env[k]; ok {
					t.Setenv(k, v)
				} else {
					t.Setenv(k, "")
					if k == JWTEnv {
						unsetenv(t, k)
					}
				}
			}
			c, err := FromEnv()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromEnv = %v, want error %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			auth := ""
			switch cr := c.creds.(type) {
			case Bearer:
				auth = "bearer"
			case Munge:
				auth = "munge:" + cr.Socket
			}
			if c.where != tt.wantWhere || auth != tt.wantAuth {
				t.Errorf("client for %s with %s; want %s with %s", c.where, auth, tt.wantWhere, tt.wantAuth)
			}
		})
	}
}

// unsetenv removes k from the environment until the test ends.
func unsetenv(t *testing.T, k string) {
	t.Setenv(k, "")
	os.Unsetenv(k)
}

// TestRemoteMungeCredentials: the Munge source gets a fresh credential
// of this process for every request from the local munged.
func TestRemoteMungeCredentials(t *testing.T) {
	m := mungetest.Start(t)
	src := Munge{Socket: m.Socket}
	a, err := src.Authorization(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.Authorization(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a, "MUNGE MUNGE:") || a == b {
		t.Fatalf("credentials %q and %q: want two fresh MUNGE credentials", a, b)
	}
	c, err := munge.Decode(context.Background(), m.Socket, strings.TrimPrefix(a, "MUNGE "))
	if err != nil || c.UID != uint32(os.Getuid()) {
		t.Fatalf("decoded %+v, %v", c, err)
	}
}
