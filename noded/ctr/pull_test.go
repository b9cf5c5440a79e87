package ctr

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	containerd "github.com/containerd/containerd/v2/client"

	"github.com/tide-hpc/tide/ctld/api"
)

func TestLookupAuth(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	file := fmt.Sprintf(`{"auths": {
  "https://index.docker.io/v1/": {"auth": %q},
  "registry.example.com:5000": {"username": "bob", "password": "pw2"},
  "http://oauth.example.com/v2/": {"identitytoken": "tok"},
  "bad.example.com": {"auth": "!!!"},
  "nocolon.example.com": {"auth": %q}
}, "credsStore": "desktop"}`, b64("alice:pw1"), b64("justuser"))
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.json")
	os.WriteFile(broken, []byte("{not json"), 0o600)
	tests := []struct {
		name               string
		path, host         string
		wantUser, wantPass string
		wantErr            string
	}{
		{name: "docker hub by the resolver's host", path: path, host: "registry-1.docker.io", wantUser: "alice", wantPass: "pw1"},
		{name: "docker hub by its short name", path: path, host: "docker.io", wantUser: "alice", wantPass: "pw1"},
		{name: "user and password fields, host with port", path: path, host: "registry.example.com:5000", wantUser: "bob", wantPass: "pw2"},
		{name: "host names are case-insensitive", path: path, host: "Registry.Example.com:5000", wantUser: "bob", wantPass: "pw2"},
		{name: "the port is part of the host", path: path, host: "registry.example.com"},
		{name: "identity token", path: path, host: "oauth.example.com", wantPass: "tok"},
		{name: "unknown registry is anonymous", path: path, host: "quay.io"},
		{name: "auth that is not base64", path: path, host: "bad.example.com", wantErr: "not base64"},
		{name: "auth without a colon", path: path, host: "nocolon.example.com", wantErr: "not user:password"},
		{name: "missing file", path: filepath.Join(dir, "none.json"), host: "quay.io", wantErr: "registry auth file"},
		{name: "malformed file", path: broken, host: "quay.io", wantErr: "broken.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, p, err := LookupAuth(tt.path, tt.host)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u != tt.wantUser || p != tt.wantPass {
				t.Fatalf("got %q/%q, want %q/%q", u, p, tt.wantUser, tt.wantPass)
			}
		})
	}
}

// fakeRegistry answers manifest requests for one repository, asking
// for basic authentication when user is set.
func fakeRegistry(t *testing.T, user, pass string) *httptest.Server {
	const digest = "sha256:0000000000000000000000000000000000000000000000000000000000000001"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="tide-test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		switch r.URL.Path {
		case "/v2/":
			w.WriteHeader(http.StatusOK)
		case "/v2/tide-test/bb/manifests/latest":
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", digest)
			w.Header().Set("Content-Length", "2")
			if r.Method == http.MethodGet {
				w.Write([]byte("{}"))
			}
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestResolver checks the registry configuration against a registry
// that speaks plain HTTP and wants a password: it is reached only when
// listed as insecure, and only with the auth file's credentials.
func TestResolver(t *testing.T) {
	srv := fakeRegistry(t, "alice", "s3cret")
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, base64.StdEncoding.EncodeToString([]byte("alice:s3cret")))), 0o600)
	wrong := filepath.Join(dir, "wrong.json")
	os.WriteFile(wrong, []byte(fmt.Sprintf(`{"auths":{%q:{"username":"alice","password":"nope"}}}`, host)), 0o600)
	tests := []struct {
		name    string
		rc      RegistryConfig
		ref     string
		wantErr string
	}{
		{name: "insecure with credentials", rc: RegistryConfig{Insecure: []string{host}, AuthFile: good}, ref: host + "/tide-test/bb:latest"},
		{name: "missing image", rc: RegistryConfig{Insecure: []string{host}, AuthFile: good}, ref: host + "/tide-test/none:latest", wantErr: "not found"},
		{name: "no credentials", rc: RegistryConfig{Insecure: []string{host}}, ref: host + "/tide-test/bb:latest", wantErr: "no basic auth credentials"},
		{name: "wrong password", rc: RegistryConfig{Insecure: []string{host}, AuthFile: wrong}, ref: host + "/tide-test/bb:latest", wantErr: "401"},
		{name: "not insecure: HTTPS fails", rc: RegistryConfig{AuthFile: good}, ref: host + "/tide-test/bb:latest", wantErr: "http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, desc, err := tt.rc.resolver().Resolve(context.Background(), tt.ref)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(strings.ToLower(err.Error()), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if name != tt.ref || desc.Digest.Encoded()[63] != '1' {
				t.Fatalf("resolved %s to %+v", name, desc)
			}
		})
	}
}

// fakeImage is a containerd.Image that knows its name only.
type fakeImage struct {
	containerd.Image
	name string
}

func (f fakeImage) Name() string { return f.name }

// blockingPull is a PullFunc that counts its calls and returns when
// released.
type blockingPull struct {
	calls   atomic.Int32
	release chan struct{}
	fail    error
	mu      sync.Mutex
	refs    []string
}

func (b *blockingPull) pull(ctx context.Context, ref string) (containerd.Image, error) {
	b.calls.Add(1)
	b.mu.Lock()
	b.refs = append(b.refs, ref)
	b.mu.Unlock()
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if b.fail != nil {
		return nil, b.fail
	}
	return fakeImage{name: ref}, nil
}

func TestPullerSharesPulls(t *testing.T) {
	tests := []struct {
		name      string
		refs      []string
		wantCalls int32
		wantRefs  []string
	}{
		{name: "one image under two spellings is pulled once",
			refs: []string{"tide-test/bb", "docker.io/tide-test/bb:latest", "tide-test/bb:latest"}, wantCalls: 1,
			wantRefs: []string{"docker.io/tide-test/bb:latest"}},
		{name: "different images are pulled apart",
			refs: []string{"tide-test/bb", "127.0.0.1:5000/x/y:1"}, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bp := &blockingPull{release: make(chan struct{})}
			p := NewPuller(bp.pull, 0)
			var results []func() (containerd.Image, error)
			for _, r := range tt.refs {
				_, res := p.Start(r)
				results = append(results, res)
			}
			if got := p.Pulling(); got != int(tt.wantCalls) {
				t.Fatalf("%d pulls under way, want %d", got, tt.wantCalls)
			}
			close(bp.release)
			for i, res := range results {
				img, err := res()
				if err != nil {
					t.Fatalf("pull %s: %v", tt.refs[i], err)
				}
				if want, _ := api.NormalizeImage(tt.refs[i]); img.Name() != want {
					t.Fatalf("pull %s gave %s, want %s", tt.refs[i], img.Name(), want)
				}
			}
			if got := bp.calls.Load(); got != tt.wantCalls {
				t.Fatalf("%d pulls, want %d", got, tt.wantCalls)
			}
			if tt.wantRefs != nil && strings.Join(bp.refs, ",") != strings.Join(tt.wantRefs, ",") {
				t.Fatalf("pulled %v, want %v", bp.refs, tt.wantRefs)
			}
			if p.Pulling() != 0 {
				t.Fatalf("%d pulls left under way", p.Pulling())
			}
		})
	}
}

func TestPullerFailureIsNotRemembered(t *testing.T) {
	bp := &blockingPull{release: make(chan struct{}), fail: errors.New("pull docker.io/x/y:latest: connection refused")}
	close(bp.release)
	p := NewPuller(bp.pull, 0)
	for i := range 2 {
		if _, err := p.Pull(context.Background(), "x/y"); err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("try %d: err = %v", i, err)
		}
	}
	if got := bp.calls.Load(); got != 2 {
		t.Fatalf("%d pulls, want 2 (a failure is retried by the next job)", got)
	}
}

// TestPullerWaiterLeaves: a caller that stops waiting does not cancel
// the pull the others wait for.
func TestPullerWaiterLeaves(t *testing.T) {
	bp := &blockingPull{release: make(chan struct{})}
	p := NewPuller(bp.pull, 0)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := p.Pull(ctx, "tide-test/bb")
		errc <- err
	}()
	done, res := p.Start("tide-test/bb")
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	select {
	case <-done:
		t.Fatal("the pull ended when one waiter left")
	default:
	}
	close(bp.release)
	if img, err := res(); err != nil || img.Name() != "docker.io/tide-test/bb:latest" {
		t.Fatalf("remaining waiter: %v %v", img, err)
	}
	if got := bp.calls.Load(); got != 1 {
		t.Fatalf("%d pulls, want 1", got)
	}
}

func TestPullerTimeout(t *testing.T) {
	bp := &blockingPull{release: make(chan struct{})} // never released
	p := NewPuller(bp.pull, 1)                        // 1ns: the pull's deadline has passed at once
	_, err := p.Pull(context.Background(), "tide-test/bb")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "pull timeout 1ns") {
		t.Fatalf("err = %v", err)
	}
}
