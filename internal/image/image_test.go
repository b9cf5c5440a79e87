package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
	"github.com/tide-hpc/tide/noded/ctr"
)

var now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// baseRegistry is the registry configuration tided would give.
var baseRegistry = ctr.RegistryConfig{Insecure: []string{"reg.local:5000"}, AuthFile: "/etc/tide/auth.json"}

// fakeStore keeps images in memory and records the target it was
// opened for.
type fakeStore struct {
	target  Target
	images  map[string]ctr.Image
	imports []string
	closed  bool
	// registry is what the last pull or push was told.
	registry ctr.RegistryConfig
}

func (f *fakeStore) Import(_ context.Context, r io.Reader) ([]ctr.Image, error) {
	b, _ := io.ReadAll(r)
	if strings.HasPrefix(string(b), "bad") {
		return nil, errors.New("import: not a tar archive")
	}
	name := strings.TrimSpace(string(b))
	im := ctr.Image{Name: name, Digest: "sha256:0123456789abcdef0123", Size: 1 << 20, Created: now}
	f.images[name] = im
	f.imports = append(f.imports, name)
	return []ctr.Image{im}, nil
}

func (f *fakeStore) Images(context.Context) ([]ctr.Image, error) {
	var out []ctr.Image
	for _, n := range []string{"docker.io/library/alpine:latest", "docker.io/tide-test/bb:latest"} {
		if im, ok := f.images[n]; ok {
			out = append(out, im)
		}
	}
	return out, nil
}

func (f *fakeStore) RemoveImage(_ context.Context, ref string) (string, error) {
	name := "docker.io/" + ref + ":latest"
	if _, ok := f.images[name]; !ok {
		return name, fmt.Errorf("%s: %w", name, ctr.ErrImageNotFound)
	}
	delete(f.images, name)
	return name, nil
}

func (f *fakeStore) PullImage(_ context.Context, ref string, rc ctr.RegistryConfig) (ctr.Image, error) {
	f.registry = rc
	name, err := api.NormalizeImage(ref)
	if err != nil {
		return ctr.Image{}, err
	}
	if strings.Contains(name, "none") {
		return ctr.Image{}, fmt.Errorf("pull %s: %s: not found", name, name)
	}
	im := ctr.Image{Name: name, Digest: "sha256:fedcba9876543210", Size: 1 << 20, Created: now}
	f.images[name] = im
	return im, nil
}

func (f *fakeStore) PushImage(_ context.Context, src, dst string, rc ctr.RegistryConfig) (ctr.Image, string, error) {
	f.registry = rc
	name, _ := api.NormalizeImage(src)
	target := name
	if dst != "" {
		target, _ = api.NormalizeImage(dst)
	}
	im, ok := f.images[name]
	if !ok {
		return ctr.Image{}, target, fmt.Errorf("%s: %w", name, ctr.ErrImageNotFound)
	}
	return im, target, nil
}

func (f *fakeStore) Close() error { f.closed = true; return nil }

func TestImageCommands(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "bb.tar")
	os.WriteFile(good, []byte("docker.io/tide-test/bb:latest\n"), 0o644)
	bad := filepath.Join(dir, "bad.tar")
	os.WriteFile(bad, []byte("bad"), 0o644)
	tests := []struct {
		name    string
		args    []string
		stdin   string
		want    string
		wantErr string
		target  Target
		// registry, when set, is what pull or push must be given.
		registry *ctr.RegistryConfig
	}{
		{name: "import", args: []string{"import", good}, want: "imported docker.io/tide-test/bb:latest (0123456789ab)\n"},
		{name: "import from stdin", args: []string{"import", "-"}, stdin: "docker.io/library/alpine:latest",
			want: "imported docker.io/library/alpine:latest (0123456789ab)\n"},
		{name: "import error names the file", args: []string{"import", bad}, wantErr: bad + ": import: not a tar archive"},
		{name: "import needs a file", args: []string{"import"}, wantErr: "import needs at least one tarball"},
		{name: "rm", args: []string{"rm", "library/alpine"}, want: "removed docker.io/library/alpine:latest\n"},
		{name: "rm missing", args: []string{"rm", "tide-test/none"}, wantErr: "docker.io/tide-test/none:latest: image not found"},
		{name: "flags pick the target", args: []string{"--containerd-socket", "/s", "--namespace", "ns2", "ls"},
			want: "IMAGE", target: Target{Socket: "/s", Namespace: "ns2", Snapshotter: "overlayfs", Registry: baseRegistry}},
		{name: "pull", args: []string{"pull", "tide-test/bb"}, want: "pulled docker.io/tide-test/bb:latest (fedcba987654)\n",
			registry: &baseRegistry},
		{name: "pull flags add to the configuration", args: []string{"pull", "--insecure-registry", "127.0.0.1:5000", "--auth-file", "/a.json", "127.0.0.1:5000/x"},
			want:     "pulled 127.0.0.1:5000/x:latest (fedcba987654)\n",
			registry: &ctr.RegistryConfig{Insecure: []string{"reg.local:5000", "127.0.0.1:5000"}, AuthFile: "/a.json"}},
		{name: "pull failure", args: []string{"pull", "tide-test/bb", "tide-test/none"},
			wantErr: "pull docker.io/tide-test/none:latest: docker.io/tide-test/none:latest: not found"},
		{name: "pull needs an image", args: []string{"pull"}, wantErr: "pull needs at least one image"},
		{name: "push under its own name", args: []string{"push", "library/alpine"},
			want: "pushed docker.io/library/alpine:latest as docker.io/library/alpine:latest (0123456789ab)\n", registry: &baseRegistry},
		{name: "push under another name", args: []string{"push", "--insecure-registry=127.0.0.1:5000", "library/alpine", "127.0.0.1:5000/alpine:3"},
			want:     "pushed docker.io/library/alpine:latest as 127.0.0.1:5000/alpine:3 (0123456789ab)\n",
			registry: &ctr.RegistryConfig{Insecure: []string{"reg.local:5000", "127.0.0.1:5000"}, AuthFile: "/etc/tide/auth.json"}},
		{name: "push missing", args: []string{"push", "tide-test/none"}, wantErr: "docker.io/tide-test/none:latest: image not found"},
		{name: "push needs an image", args: []string{"push"}, wantErr: "push needs an image and at most one target name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &fakeStore{images: map[string]ctr.Image{"docker.io/library/alpine:latest": {
				Name: "docker.io/library/alpine:latest", Digest: "sha256:0123456789abcdef0123"}}}
			var out, errb strings.Builder
			io := &Streams{In: strings.NewReader(tt.stdin), Out: &out, ErrOut: &errb}
			def := Target{Socket: "/run/containerd/containerd.sock", Namespace: "tide", Snapshotter: "overlayfs", Registry: baseRegistry}
			tg := def
			cmd := Command(io, &tg, func(_ context.Context, t Target) (Store, error) { store.target = t; return store, nil }, func() time.Time { return now })
			pf := cmd.PersistentFlags()
			pf.StringVar(&tg.Socket, "containerd-socket", def.Socket, "")
			pf.StringVar(&tg.Namespace, "namespace", def.Namespace, "")
			pf.StringVar(&tg.Snapshotter, "snapshotter", def.Snapshotter, "")
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v (stderr %q)", err, errb.String())
			}
			if !strings.HasPrefix(out.String(), tt.want) {
				t.Fatalf("out = %q, want prefix %q", out.String(), tt.want)
			}
			if tt.target.Socket != "" {
				if diff := cmp.Diff(tt.target, store.target); diff != "" {
					t.Fatalf("target (-want +got):\n%s", diff)
				}
			}
			if tt.registry != nil {
				if diff := cmp.Diff(*tt.registry, store.registry); diff != "" {
					t.Fatalf("registry configuration (-want +got):\n%s", diff)
				}
			}
			if !store.closed {
				t.Fatal("store not closed")
			}
		})
	}
}

func TestList(t *testing.T) {
	imgs := []ctr.Image{
		{Name: "docker.io/library/ubuntu:22.04", Digest: "sha256:aaaaaaaaaaaaaaaaaaaa", Size: 29 << 20, Created: now.Add(-72 * time.Hour)},
		{Name: "docker.io/tide-test/bb:latest", Digest: "sha256:4aa1a1faaed388e4", Size: 1032192, Created: now.Add(-90 * time.Minute)},
		{Name: "reg.local:5000/x:1", Digest: "sha256:b0", Size: 900, Created: now.Add(-10 * time.Second)},
		{Name: "unknown-time/x:1", Digest: "sha256:c1", Size: 5 << 30},
	}
	var b strings.Builder
	if err := List(&b, imgs, now); err != nil {
		t.Fatal(err)
	}
	goldenpkg.Check(t, "image-ls", b.String())
}

// TestListEscapesNames checks that an image name from a tarball's
// annotations cannot drive the terminal or break the table.
func TestListEscapesNames(t *testing.T) {
	imgs := []ctr.Image{{Name: "evil/x:1\x1b]0;pwned\a\n\tFAKE", Digest: "sha256:d1", Size: 900, Created: now.Add(-10 * time.Second)}}
	var b strings.Builder
	if err := List(&b, imgs, now); err != nil {
		t.Fatal(err)
	}
	want := "IMAGE                             DIGEST  SIZE   CREATED\n" +
		`evil/x:1\x1b]0;pwned\x07\n\tFAKE` + "  d1      900 B  just now\n"
	if b.String() != want {
		t.Errorf("List =\n%q\nwant\n%q", b.String(), want)
	}
}

// TestImportProgress: on a terminal, import shows the bytes it has read
// of the tarball's size (of standard input: the bytes alone) and ends
// the line with the total; a failed import ends the line so that the
// error starts its own; in a pipe it shows nothing.
func TestImportProgress(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "bb.tar")
	// The fake store takes the trimmed content as the image's name.
	os.WriteFile(good, []byte("docker.io/tide-test/bb:latest\n"+strings.Repeat(" ", 5000)), 0o644)
	bad := filepath.Join(dir, "bad.tar")
	os.WriteFile(bad, []byte("bad"+strings.Repeat(" ", 3000)), 0o644)
	tests := []struct {
		name     string
		args     []string
		stdin    string
		terminal bool
		want     []*regexp.Regexp // on stderr, in order
		wantErr  bool
	}{
		{name: "file on a terminal", args: []string{"import", good}, terminal: true, want: []*regexp.Regexp{
			regexp.MustCompile(`^\rimporting ` + regexp.QuoteMeta(good) + `: [0-9.]+ (B|KiB) of 4\.9 KiB \([0-9]+%\)`),
			regexp.MustCompile(`\rread ` + regexp.QuoteMeta(good) + `: 4\.9 KiB in [0-9.]+m?s *\n$`)}},
		{name: "stdin on a terminal", args: []string{"import", "-"}, stdin: "docker.io/library/alpine:latest", terminal: true, want: []*regexp.Regexp{
			regexp.MustCompile(`^\rimporting -: 31 B *\rread -: 31 B in [0-9.]+m?s *\n$`)}},
		{name: "failure ends the line", args: []string{"import", bad}, terminal: true, wantErr: true, want: []*regexp.Regexp{
			regexp.MustCompile(`^\rimporting ` + regexp.QuoteMeta(bad) + `: .*\n$`)}},
		{name: "pipe", args: []string{"import", good}, want: []*regexp.Regexp{regexp.MustCompile(`^$`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &fakeStore{images: map[string]ctr.Image{}}
			var out, errb strings.Builder
			streams := &Streams{In: strings.NewReader(tt.stdin), Out: &out, ErrOut: &errb, ErrIsTerminal: tt.terminal}
			clock := now
			tick := func() time.Time { clock = clock.Add(150 * time.Millisecond); return clock }
			cmd := Command(streams, &Target{}, func(context.Context, Target) (Store, error) { return store, nil }, tick)
			cmd.SetArgs(tt.args)
			if err := cmd.Execute(); (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tt.wantErr)
			}
			if !tt.wantErr && !strings.HasPrefix(out.String(), "imported ") {
				t.Errorf("stdout %q: want the imported line alone there", out.String())
			}
			rest := errb.String()
			for _, re := range tt.want {
				loc := re.FindStringIndex(rest)
				if loc == nil {
					t.Fatalf("stderr %q does not match %s", errb.String(), re)
				}
				rest = rest[loc[1]:]
			}
		})
	}
}
