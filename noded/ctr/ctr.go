// Package ctr is Tide's thin layer over the containerd client: connect
// with a health check, and manage the images that container jobs run
// (import from tarballs, list, remove, pull from and push to registries:
// pull.go). It is shared by tided (which
// runs container jobs and offers "tided image") and the CLI's "tide
// image", so that both speak to containerd the same way.
package ctr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/tide-hpc/tide/ctld/api"
)

// DefaultNamespace is the containerd namespace Tide's images and
// containers live in.
const DefaultNamespace = "tide"

// DefaultSnapshotter unpacks images for jobs.
const DefaultSnapshotter = "overlayfs"

// healthTimeout bounds the first RPC: the v2 client connects lazily, so
// a dead socket shows only there (after about 10 s by default).
const healthTimeout = 5 * time.Second

// Client is a containerd client bound to one namespace and snapshotter.
type Client struct {
	*containerd.Client
	Namespace   string
	Snapshotter string
	// ServerVersion is what the daemon answered to the health check.
	ServerVersion string
}

// Connect opens socket and checks that containerd answers: the v2 client
// itself would succeed on a missing socket and fail only at the first
// call.
func Connect(ctx context.Context, socket, namespace, snapshotter string) (*Client, error) {
	if socket == "" {
		return nil, errors.New("no containerd socket configured")
	}
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if snapshotter == "" {
		snapshotter = DefaultSnapshotter
	}
	if _, err := os.Stat(socket); err != nil {
		return nil, fmt.Errorf("containerd socket: %w", err)
	}
	c, err := containerd.New(socket, containerd.WithDefaultNamespace(namespace))
	if err != nil {
		return nil, fmt.Errorf("connect to containerd at %s: %w", socket, err)
	}
	hctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	v, err := c.Version(hctx)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("containerd at %s does not answer: %w", socket, err)
	}
	return &Client{Client: c, Namespace: namespace, Snapshotter: snapshotter, ServerVersion: v.Version}, nil
}

// Ctx returns ctx carrying the client's namespace, which every
// containerd call needs.
func (c *Client) Ctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, c.Namespace)
}

// Image is one image as "tide image ls" shows it.
type Image struct {
	Name    string    `json:"name"`
	Digest  string    `json:"digest"`
	Size    int64     `json:"size"`
	Created time.Time `json:"created"`
}

// Import reads an OCI-layout or docker-save tarball, stores its images
// and unpacks them for jobs. Names are normalised as Docker spells
// them, so that --container-image finds them under any spelling.
func (c *Client) Import(ctx context.Context, r io.Reader) ([]Image, error) {
	ctx = c.Ctx(ctx)
	imgs, err := c.Client.Import(ctx, r, containerd.WithImageRefTranslator(func(ref string) string {
		// org.opencontainers.image.ref.name is often a bare tag; only a
		// full reference names an image.
		if !strings.ContainsAny(ref, "/:") {
			return ""
		}
		n, err := api.NormalizeImage(ref)
		if err != nil {
			return ""
		}
		return n
	}))
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	if len(imgs) == 0 {
		return nil, errors.New("import: the archive names no image (an OCI layout needs the io.containerd.image.name or org.opencontainers.image.ref.name annotation)")
	}
	out := make([]Image, 0, len(imgs))
	for _, im := range imgs {
		img := containerd.NewImage(c.Client, im)
		if err := img.Unpack(ctx, c.Snapshotter); err != nil {
			return nil, fmt.Errorf("unpack %s: %w", im.Name, err)
		}
		out = append(out, c.describe(ctx, im))
	}
	return out, nil
}

func (c *Client) describe(ctx context.Context, im images.Image) Image {
	size, _ := containerd.NewImage(c.Client, im).Size(ctx)
	return Image{Name: im.Name, Digest: im.Target.Digest.String(), Size: size, Created: im.CreatedAt}
}

// Images lists the namespace's images by name.
func (c *Client) Images(ctx context.Context) ([]Image, error) {
	ctx = c.Ctx(ctx)
	list, err := c.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	out := make([]Image, 0, len(list))
	for _, im := range list {
		out = append(out, c.describe(ctx, im))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ErrImageNotFound is returned for an image the node does not have.
var ErrImageNotFound = errors.New("image not found")

// RemoveImage deletes an image by any spelling of its name; its content
// is garbage collected once no container uses it.
func (c *Client) RemoveImage(ctx context.Context, ref string) (string, error) {
	name, err := api.NormalizeImage(ref)
	if err != nil {
		return "", err
	}
	ctx = c.Ctx(ctx)
	if err := c.ImageService().Delete(ctx, name, images.SynchronousDelete()); err != nil {
		if errdefs.IsNotFound(err) {
			return name, fmt.Errorf("%s: %w", name, ErrImageNotFound)
		}
		return name, fmt.Errorf("remove %s: %w", name, err)
	}
	return name, nil
}

// JobImage returns an image for a job, unpacked for the snapshotter.
func (c *Client) JobImage(ctx context.Context, ref string) (containerd.Image, error) {
	ctx = c.Ctx(ctx)
	img, err := c.GetImage(ctx, ref)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("%s: %w", ref, ErrImageNotFound)
		}
		return nil, fmt.Errorf("look up image %s: %w", ref, err)
	}
	ok, err := img.IsUnpacked(ctx, c.Snapshotter)
	if err != nil {
		return nil, fmt.Errorf("check image %s: %w", ref, err)
	}
	if !ok {
		if err := img.Unpack(ctx, c.Snapshotter); err != nil {
			return nil, fmt.Errorf("unpack image %s: %w", ref, err)
		}
	}
	return img, nil
}
