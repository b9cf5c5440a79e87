// Package image is "tide image" and "tided image": import container
// images from tarballs into a node's containerd, list and remove them.
// It is a node-side administration command: it talks to the containerd
// socket of the machine it runs on (root, usually), not to the
// controller, and images must be imported on every node that runs
// container jobs.
//
// It lives outside cli/ so that tided, which runs it, imports no CLI
// package (internal/layers); the CLI reaches it by handing over to
// "tided image" (cli/root/handoff.go), which keeps the containerd
// client out of every sbatch and squeue.
package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/internal/termsafe"
	"github.com/tide-hpc/tide/noded/ctr"
)

// Streams are the command's standard streams.
type Streams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// ErrIsTerminal says that ErrOut is a terminal: import then shows
	// the bytes it has read on a line of its own there. In a pipe it
	// stays quiet.
	ErrIsTerminal bool
}

// System returns the process's streams.
func System() *Streams {
	return &Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, ErrIsTerminal: isTerminal(os.Stderr)}
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Store is what the commands need from containerd; *ctr.Client
// implements it, tests use a fake.
type Store interface {
	Import(ctx context.Context, r io.Reader) ([]ctr.Image, error)
	Images(ctx context.Context) ([]ctr.Image, error)
	RemoveImage(ctx context.Context, ref string) (string, error)
	PullImage(ctx context.Context, ref string, rc ctr.RegistryConfig) (ctr.Image, error)
	PushImage(ctx context.Context, src, dst string, rc ctr.RegistryConfig) (ctr.Image, string, error)
	Close() error
}

// Target says which containerd the commands talk to, and how pull and
// push reach registries (tided fills Registry from its containerd
// configuration; the flags of pull and push add to it).
type Target struct {
	Socket, Namespace, Snapshotter string
	Registry                       ctr.RegistryConfig
}

// Connector opens the Store for a target.
type Connector func(ctx context.Context, t Target) (Store, error)

// Connect is the production Connector.
func Connect(ctx context.Context, t Target) (Store, error) {
	c, err := ctr.Connect(ctx, t.Socket, t.Namespace, t.Snapshotter)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Command builds the image command over streams. t is read when a
// subcommand runs, so that the caller may fill it from flags or, as
// tided does, from its configuration in a PersistentPreRunE.
func Command(streams *Streams, t *Target, connect Connector, now func() time.Time) *cobra.Command {
	root := &cobra.Command{
		Use:   "image <import|ls|rm|pull|push>",
		Short: "Manage the container images of this node's containerd (node-side, as root)",
		Long: `image manages the images that container jobs (sbatch --container-image) run,
in the containerd of the machine it runs on. Run it on every node that runs
container jobs, as a user who may use containerd's socket (root). No registry
is needed: import OCI-layout or docker-save tarballs. Where a registry is
reachable, pull images ahead of jobs (tided also pulls a job's missing image
itself) and push local images to it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	withStore := func(cmd *cobra.Command, fn func(context.Context, Store) error) error {
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		s, err := connect(ctx, *t)
		if err != nil {
			return err
		}
		defer s.Close()
		return fn(ctx, s)
	}
	root.AddCommand(&cobra.Command{
		Use:   "import FILE.tar...",
		Short: "Import OCI-layout or docker-save tarballs (- reads standard input)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("import needs at least one tarball")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, s Store) error {
				for _, a := range args {
					if err := importFile(ctx, s, a, streams, now); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}, &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the images",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd, func(ctx context.Context, s Store) error {
				imgs, err := s.Images(ctx)
				if err != nil {
					return err
				}
				return List(streams.Out, imgs, now())
			})
		},
	}, &cobra.Command{
		Use:     "rm IMAGE...",
		Aliases: []string{"remove"},
		Short:   "Remove images (by any spelling of their name)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("rm needs at least one image")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, s Store) error {
				var errs []error
				for _, a := range args {
					name, err := s.RemoveImage(ctx, a)
					if err != nil {
						errs = append(errs, err)
						continue
					}
					fmt.Fprintf(streams.Out, "removed %s\n", termsafe.Escape(name))
				}
				return errors.Join(errs...)
			})
		},
	})
	var insecure []string
	var authFile string
	registry := func() ctr.RegistryConfig {
		rc := t.Registry
		rc.Insecure = append(append([]string(nil), rc.Insecure...), insecure...)
		if authFile != "" {
			rc.AuthFile = authFile
		}
		return rc
	}
	pull := &cobra.Command{
		Use:   "pull IMAGE...",
		Short: "Pull images from their registries and unpack them for jobs",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("pull needs at least one image")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, s Store) error {
				var errs []error
				for _, a := range args {
					im, err := s.PullImage(ctx, a, registry())
					if err != nil {
						errs = append(errs, err)
						continue
					}
					fmt.Fprintf(streams.Out, "pulled %s (%s)\n", termsafe.Escape(im.Name), termsafe.Escape(shortDigest(im.Digest)))
				}
				return errors.Join(errs...)
			})
		},
	}
	push := &cobra.Command{
		Use:   "push IMAGE [TARGET]",
		Short: "Push a local image to its registry, or under the name TARGET",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return errors.New("push needs an image and at most one target name")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dst := ""
			if len(args) == 2 {
				dst = args[1]
			}
			return withStore(cmd, func(ctx context.Context, s Store) error {
				im, name, err := s.PushImage(ctx, args[0], dst, registry())
				if err != nil {
					return err
				}
				fmt.Fprintf(streams.Out, "pushed %s as %s (%s)\n", termsafe.Escape(im.Name), termsafe.Escape(name), termsafe.Escape(shortDigest(im.Digest)))
				return nil
			})
		},
	}
	for _, c := range []*cobra.Command{pull, push} {
		c.Flags().StringSliceVar(&insecure, "insecure-registry", nil, "registry (host:port) to reach over plain HTTP (repeatable)")
		c.Flags().StringVar(&authFile, "auth-file", "", "docker-style config.json with registry credentials")
	}
	root.AddCommand(pull, push)
	return root
}

func importFile(ctx context.Context, s Store, path string, streams *Streams, now func() time.Time) error {
	var r io.Reader = streams.In
	size := int64(-1) // unknown: standard input
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
		r = f
	}
	var bar *readProgress
	if streams.ErrIsTerminal {
		bar = &readProgress{r: r, w: streams.ErrOut, name: path, size: size, now: now, start: now()}
		r = bar
	}
	imgs, err := s.Import(ctx, r)
	if bar != nil {
		bar.end(err == nil)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, im := range imgs {
		fmt.Fprintf(streams.Out, "imported %s (%s)\n", termsafe.Escape(im.Name), termsafe.Escape(shortDigest(im.Digest)))
	}
	return nil
}

// readProgress counts the bytes read through it and shows them on one
// updating line of w, at most every progressEvery: "importing
// pytorch.tar: 1.2 GiB of 4.8 GiB (25%)".
type readProgress struct {
	r     io.Reader
	w     io.Writer
	name  string
	size  int64 // -1: unknown
	now   func() time.Time
	start time.Time
	drawn time.Time
	read  int64
	width int
}

// progressEvery is how often the import line redraws.
const progressEvery = 200 * time.Millisecond

func (p *readProgress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.read += int64(n)
	if t := p.now(); n > 0 && t.Sub(p.drawn) >= progressEvery {
		p.drawn = t
		p.draw("importing " + termsafe.Escape(p.name) + ": " + p.amount())
	}
	return n, err
}

// amount is the bytes read so far, and of how many when known.
func (p *readProgress) amount() string {
	if p.size <= 0 {
		return humanSize(p.read)
	}
	return fmt.Sprintf("%s of %s (%d%%)", humanSize(p.read), humanSize(p.size), p.read*100/p.size)
}

// draw writes line over the previous one.
func (p *readProgress) draw(line string) {
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", max(p.width-len(line), 0)))
	p.width = len(line)
}

// end closes the line: what was read and how long it took, or, when
// the import failed, just a line break so that the error starts a line
// of its own.
func (p *readProgress) end(ok bool) {
	if !ok {
		if p.width > 0 {
			fmt.Fprintln(p.w)
		}
		return
	}
	d := p.now().Sub(p.start).Round(100 * time.Millisecond)
	p.draw(fmt.Sprintf("read %s: %s in %s", termsafe.Escape(p.name), humanSize(p.read), d))
	fmt.Fprintln(p.w)
}

// List prints images as a table: name, digest, size, age.
func List(w io.Writer, imgs []ctr.Image, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tDIGEST\tSIZE\tCREATED")
	for _, im := range imgs {
		// Names come from image metadata (an imported tarball's
		// annotations): escaped, they keep the table and the terminal.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", termsafe.Escape(im.Name), termsafe.Escape(shortDigest(im.Digest)), humanSize(im.Size), age(now, im.Created))
	}
	return tw.Flush()
}

func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return d
}

func humanSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute")
	case d < 48*time.Hour:
		return plural(int(d/time.Hour), "hour")
	}
	return plural(int(d/(24*time.Hour)), "day")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit + " ago"
	}
	return fmt.Sprintf("%d %ss ago", n, unit)
}
