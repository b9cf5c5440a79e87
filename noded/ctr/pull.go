package ctr

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/remotes"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/errdefs"

	"github.com/tide-hpc/tide/ctld/api"
)

// Pull policies (tided's containerd.pull): whether a job's image that
// the node lacks is pulled from its registry or fails the launch.
const (
	PullAuto  = "auto"
	PullNever = "never"
)

// DefaultPullTimeout bounds one pull, so that a registry that stops
// answering fails the jobs waiting for it instead of holding them.
const DefaultPullTimeout = 30 * time.Minute

// dialTimeout bounds a registry connection: a registry that is there
// answers at once, and one that is not should fail the job soon.
const dialTimeout = 15 * time.Second

// RegistryConfig says how Tide talks to registries when it pulls and
// pushes images.
type RegistryConfig struct {
	// Insecure lists registries (host or host:port, as in the image
	// reference) spoken to over plain HTTP, such as a local registry.
	Insecure []string
	// AuthFile is a docker-style config.json whose "auths" give the
	// credentials of registries; "" pulls anonymously. It is read at
	// each authentication, so that rotated credentials apply at once.
	AuthFile string
}

// plainHTTP reports whether host is one of the insecure registries.
func (rc RegistryConfig) plainHTTP(host string) (bool, error) {
	return slices.ContainsFunc(rc.Insecure, func(h string) bool { return strings.EqualFold(h, host) }), nil
}

// credentials is the authorizer's callback: the user and secret for
// host from the auth file (anonymous when the file names none).
func (rc RegistryConfig) credentials(host string) (string, string, error) {
	if rc.AuthFile == "" {
		return "", "", nil
	}
	return LookupAuth(rc.AuthFile, host)
}

// resolver builds the registry resolver: plain HTTP for the insecure
// registries, HTTPS otherwise, credentials from the auth file.
func (rc RegistryConfig) resolver() remotes.Resolver {
	tr := docker.DefaultHTTPTransport(nil)
	tr.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	client := &http.Client{Transport: tr}
	auth := docker.NewDockerAuthorizer(docker.WithAuthClient(client), docker.WithAuthCreds(rc.credentials))
	hosts := docker.ConfigureDefaultRegistries(docker.WithClient(client), docker.WithAuthorizer(auth),
		docker.WithPlainHTTP(rc.plainHTTP))
	return docker.NewResolver(docker.ResolverOptions{Hosts: hosts})
}

// dockerConfig is the part of Docker's config.json that holds
// credentials.
type dockerConfig struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	// Auth is base64("user:password"), what "docker login" writes.
	Auth     string `json:"auth"`
	Username string `json:"username"`
	Password string `json:"password"`
	// IdentityToken is a refresh token (OAuth registries).
	IdentityToken string `json:"identitytoken"`
}

// dockerHubHosts are the names Docker Hub goes by: the auth file keys
// it as https://index.docker.io/v1/, the resolver talks to
// registry-1.docker.io.
var dockerHubHosts = []string{"docker.io", "index.docker.io", "registry-1.docker.io"}

// authKeyHost reduces a config.json key ("https://index.docker.io/v1/",
// "registry.example.com:5000") to its host.
func authKeyHost(key string) string {
	k := strings.ToLower(strings.TrimSpace(key))
	k = strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
	k, _, _ = strings.Cut(k, "/")
	return k
}

func sameRegistry(a, b string) bool {
	if a == b {
		return true
	}
	return slices.Contains(dockerHubHosts, a) && slices.Contains(dockerHubHosts, b)
}

// LookupAuth returns the credentials that the docker-style config file
// at path holds for host: a user and password, or an empty user and an
// identity token. A host the file does not name gets empty credentials
// (anonymous access); an unreadable or malformed file is an error, since
// a pull would otherwise fail later with a misleading "unauthorized".
func LookupAuth(path, host string) (user, secret string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("registry auth file: %w", err)
	}
	var cfg dockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", "", fmt.Errorf("registry auth file %s: %w", path, err)
	}
	host = strings.ToLower(host)
	keys := make([]string, 0, len(cfg.Auths))
	for k := range cfg.Auths {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same file gives the same answer
	for _, k := range keys {
		if !sameRegistry(authKeyHost(k), host) {
			continue
		}
		a := cfg.Auths[k]
		if a.IdentityToken != "" {
			return "", a.IdentityToken, nil
		}
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(a.Auth))
			if err != nil {
				return "", "", fmt.Errorf("registry auth file %s: auth of %s is not base64: %w", path, k, err)
			}
			u, p, ok := strings.Cut(string(raw), ":")
			if !ok {
				return "", "", fmt.Errorf("registry auth file %s: auth of %s is not user:password", path, k)
			}
			return u, p, nil
		}
		return a.Username, a.Password, nil
	}
	return "", "", nil
}

// PullJobImage pulls ref from its registry and unpacks it for the
// client's snapshotter, under the normalised name that jobs look it up
// by.
func (c *Client) PullJobImage(ctx context.Context, ref string, rc RegistryConfig) (containerd.Image, error) {
	name, err := api.NormalizeImage(ref)
	if err != nil {
		return nil, err
	}
	img, err := c.Client.Pull(c.Ctx(ctx), name, containerd.WithResolver(rc.resolver()),
		containerd.WithPullUnpack, containerd.WithPullSnapshotter(c.Snapshotter))
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", name, err)
	}
	return img, nil
}

// PullImage pulls an image as "tide image pull" does and describes it.
func (c *Client) PullImage(ctx context.Context, ref string, rc RegistryConfig) (Image, error) {
	img, err := c.PullJobImage(ctx, ref, rc)
	if err != nil {
		return Image{}, err
	}
	return c.describe(c.Ctx(ctx), img.Metadata()), nil
}

// PushImage uploads the local image src to a registry, under dst when
// it is not empty (a new name, possibly on another registry) and under
// src's own name otherwise. It returns the image and the name pushed.
func (c *Client) PushImage(ctx context.Context, src, dst string, rc RegistryConfig) (Image, string, error) {
	name, err := api.NormalizeImage(src)
	if err != nil {
		return Image{}, "", err
	}
	target := name
	if dst != "" {
		if target, err = api.NormalizeImage(dst); err != nil {
			return Image{}, "", err
		}
	}
	ctx = c.Ctx(ctx)
	im, err := c.ImageService().Get(ctx, name)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return Image{}, target, fmt.Errorf("%s: %w", name, ErrImageNotFound)
		}
		return Image{}, target, fmt.Errorf("look up image %s: %w", name, err)
	}
	if err := c.Client.Push(ctx, target, im.Target, containerd.WithResolver(rc.resolver())); err != nil {
		return Image{}, target, fmt.Errorf("push %s: %w", target, err)
	}
	return c.describe(ctx, im), target, nil
}

// PullFunc pulls one image (Client.PullJobImage bound to a registry
// configuration, or a fake in tests).
type PullFunc func(ctx context.Context, ref string) (containerd.Image, error)

// Puller shares pulls between jobs: while an image is being pulled,
// every job that wants it waits for that one pull instead of starting
// its own. Each pull runs under its own deadline, apart from the
// callers': a job that stops waiting (cancelled) leaves the pull to the
// others and to the jobs after it. A failed pull is not remembered: the
// next job tries again.
type Puller struct {
	pull    PullFunc
	timeout time.Duration

	mu       sync.Mutex
	inflight map[string]*flight
}

type flight struct {
	done chan struct{}
	img  containerd.Image
	err  error
}

// NewPuller shares the pulls made by pull, each bounded by timeout
// (DefaultPullTimeout when not positive).
func NewPuller(pull PullFunc, timeout time.Duration) *Puller {
	if timeout <= 0 {
		timeout = DefaultPullTimeout
	}
	return &Puller{pull: pull, timeout: timeout, inflight: map[string]*flight{}}
}

// Start begins the pull of ref, or joins the one under way, and
// returns a channel closed when it ends and a function that reads its
// outcome once it has.
func (p *Puller) Start(ref string) (<-chan struct{}, func() (containerd.Image, error)) {
	key := ref
	if n, err := api.NormalizeImage(ref); err == nil {
		key = n
	}
	p.mu.Lock()
	f := p.inflight[key]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		p.inflight[key] = f
		go p.run(key, f)
	}
	p.mu.Unlock()
	return f.done, func() (containerd.Image, error) { <-f.done; return f.img, f.err }
}

func (p *Puller) run(key string, f *flight) {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	img, err := p.pull(ctx, key)
	if err == nil && img == nil {
		err = errors.New("pull returned no image")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (pull timeout %s)", err, p.timeout)
	}
	p.mu.Lock()
	delete(p.inflight, key)
	p.mu.Unlock()
	f.img, f.err = img, err
	close(f.done)
}

// Pull pulls ref, sharing the pull with other callers, and waits for
// it until ctx ends.
func (p *Puller) Pull(ctx context.Context, ref string) (containerd.Image, error) {
	done, result := p.Start(ref)
	select {
	case <-done:
		return result()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Pulling reports how many distinct images are being pulled now.
func (p *Puller) Pulling() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.inflight)
}
