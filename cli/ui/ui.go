package ui

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/token"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
)

// DefaultLifespan is the sign-in link's default lifespan: a working
// day, since the dashboard's cookie expires with the token (the
// controller's own default, 30 minutes, would sign a browser out
// mid-morning). A controller whose jwt.max_lifespan is shorter is
// asked for its default instead.
const DefaultLifespan = 8 * time.Hour

// openGrace is how long the sign-in file written for --open stays
// after the opener returned (or, when the opener keeps running, as a
// generic xdg-open runs the browser in the foreground, after it
// started): time for a browser to read it.
const openGrace = 10 * time.Second

// Options is one run of tide ui.
type Options struct {
	IO       *cmdutil.IOStreams
	API      func() (cmdutil.API, error)
	Getenv   func(string) string
	Getwd    func() (string, error)
	Hostname func() (string, error)
	Now      func() time.Time

	Lifespan string
	Open     bool
	Port     int

	// Opener opens target (a file: URL) in the user's browser and
	// returns once the opener exits; started is closed when it runs.
	// nil: xdg-open (open on macOS).
	Opener func(target string, started chan<- struct{}) error
	// TempDir is where the --open sign-in file's folder is made ("":
	// $XDG_RUNTIME_DIR, else the system's temporary folder).
	TempDir string
	// Sleep waits out the grace before the sign-in file is removed
	// (tests: none).
	Sleep func(time.Duration)
}

// NewCmd returns `tide ui [--open] [--lifespan=DURATION] [--port=PORT]`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return newCmd(&Options{IO: f.IO, API: f.API, Getenv: f.Getenv, Getwd: f.Getwd, Hostname: f.Hostname, Now: f.Now, Sleep: time.Sleep})
}

// newCmd is NewCmd for o (tests set its opener and sleep).
func newCmd(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ui [--open] [--lifespan=DURATION] [--port=PORT]",
		Short: "Print a sign-in link to the web dashboard (or the ssh -L way to it)",
		Long: `ui prints the way to the controller's web dashboard (/ui/).

With TIDE_CONTROLLER=host:port (the controller's api_addr) it asks the
controller for a token, as tide token does, and prints a link that signs the
browser in by itself:

  https://ctl:6820/ui/login#token=<token>

The token travels in the URL's fragment, which a browser never sends to a
server; the dashboard keeps it in a cookie that expires with it. Whoever has
the link is you until it expires: keep it like a password. --lifespan sets how
long (default 8h, or the controller's default when its jwt.max_lifespan is
shorter). --open also opens the link in a browser (xdg-open), through a
private file so that the token is never on a command line other users of
the host can see.

Over the unix socket (no TIDE_CONTROLLER: on the controller's host) a browser
cannot reach the controller; ui prints the ssh command that forwards a port of
your workstation to the socket (--port, default 8080), and the address to
open. The dashboard then knows you as the SSH user.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.Usagef("unexpected argument %q (tide ui takes --open, --lifespan and --port)", args[0])
			}
			return nil
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return o.Run(ctx, cmd.Flags().Changed("lifespan"))
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&o.Open, "open", false, "also open the link in a browser (xdg-open)")
	fl.StringVar(&o.Lifespan, "lifespan", "", "how long the link signs in: a duration (90m, 2h) or seconds (default 8h)")
	fl.IntVar(&o.Port, "port", 8080, "over the socket: the workstation's port the ssh recipe forwards")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cmdutil.Usagef("%s", err) })
	return cmd
}

// Run prints the link or the recipe. lifespanSet is whether --lifespan
// was given: only the default falls back to the controller's.
func (o *Options) Run(ctx context.Context, lifespanSet bool) error {
	if o.Port < 1 || o.Port > 65535 {
		return cmdutil.Usagef("invalid --port %d: a TCP port is 1 to 65535", o.Port)
	}
	life := DefaultLifespan
	if o.Lifespan != "" {
		d, err := token.ParseLifespan(o.Lifespan)
		if err != nil {
			return cmdutil.Usagef("%v", err)
		}
		life = d
	}
	addr := o.Getenv(client.ControllerEnv)
	if addr == "" {
		return o.recipe(ctx)
	}
	a, err := o.API()
	if err != nil {
		return err
	}
	m, ok := a.(token.Minter)
	if !ok {
		return fmt.Errorf("this client cannot ask for tokens")
	}
	req := api.TokenRequest{LifespanS: int64((life + time.Second - 1) / time.Second)}
	resp, err := m.Token(ctx, req)
	if err != nil && !lifespanSet && errors.Is(err, api.ErrInvalidArgument) {
		// The controller's jwt.max_lifespan is under the default:
		// its own default fits it.
		resp, err = m.Token(ctx, api.TokenRequest{})
	}
	if err != nil {
		return fmt.Errorf("get a token for the dashboard: %w", err)
	}
	if _, err := client.ParseBearer(resp.Token); err != nil {
		return fmt.Errorf("the controller answered a malformed token: %w", err)
	}
	// With several controllers (TIDE_CONTROLLER lists them): the one
	// that answered, the primary.
	if cur, ok := a.(interface{ Current() string }); ok {
		addr = cur.Current()
	}
	link := LoginLink(addr, resp.Token)
	fmt.Fprintln(o.IO.Out, link)
	fmt.Fprintf(o.IO.ErrOut, "tide ui: the link signs a browser in as %s for %s; keep it private\n",
		resp.User, roughDuration(resp.Expires.Sub(o.Now())))
	if o.Open {
		if err := o.open(link); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "tide ui: warning: could not open a browser: %v; open the link above\n", err)
		}
	}
	return nil
}

// LoginLink is the dashboard's sign-in address on api_addr addr with
// tok in the fragment (never sent to a server). The CLI speaks only TLS
// to api_addr, so the link is https.
func LoginLink(addr, tok string) string {
	u := url.URL{Scheme: "https", Host: addr, Path: "/ui/login", Fragment: "token=" + tok}
	return u.String()
}

// recipe prints the ssh -L way to the dashboard on the socket, after
// checking that the controller answers there.
func (o *Options) recipe(ctx context.Context) error {
	a, err := o.API()
	if err != nil {
		return err
	}
	info, err := a.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("reach the controller: %w", err)
	}
	sock := o.Getenv("TIDE_SOCKET")
	if sock == "" {
		sock = client.DefaultSocket
	}
	if cur, ok := a.(interface{ Current() string }); ok && strings.Contains(sock, ",") {
		sock = cur.Current() // several controllers' sockets: the primary's
	}
	if !filepath.IsAbs(sock) {
		// ssh resolves the path on this host, not in this folder.
		wd, err := o.Getwd()
		if err != nil {
			return fmt.Errorf("make TIDE_SOCKET=%q absolute: %w", sock, err)
		}
		sock = filepath.Join(wd, sock)
	}
	host, err := o.Hostname()
	if err != nil {
		return fmt.Errorf("name this host: %w", err)
	}
	dest := host
	if info.CallerUser != "" {
		dest = info.CallerUser + "@" + host
	}
	port := strconv.Itoa(o.Port)
	w := o.IO.Out
	fmt.Fprintf(w, "The controller answers on this host's unix socket, which a browser cannot reach.\n")
	fmt.Fprintf(w, "Forward a port of your workstation to it; on the workstation run:\n\n")
	fmt.Fprintf(w, "  ssh -N -L %s:%s %s\n\n", port, shellQuote(sock), shellQuote(dest))
	fmt.Fprintf(w, "and open http://localhost:%s/ui/ (the dashboard knows you as the SSH user).\n", port)
	fmt.Fprintf(w, "With TIDE_CONTROLLER set to the controller's api_addr, tide ui prints a sign-in link instead.\n")
	if o.Open {
		fmt.Fprintf(o.IO.ErrOut, "tide ui: warning: --open: nothing to open before the ssh forward runs\n")
	}
	return nil
}

// open opens link in a browser through a private file that redirects
// to it: the link itself on the opener's command line (and the
// browser's) would show the token to every user of the host (ps).
func (o *Options) open(link string) error {
	base := o.TempDir
	if base == "" {
		base = o.Getenv("XDG_RUNTIME_DIR")
	}
	dir, err := os.MkdirTemp(base, "tide-ui-") // 0700
	if err != nil {
		return fmt.Errorf("make the sign-in file's folder: %w", err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "login.html")
	l := html.EscapeString(link)
	page := `<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">` +
		`<meta http-equiv="refresh" content="0;url=` + l + `"><title>Tide dashboard</title></head>` +
		`<body><p><a href="` + l + `">Sign in to the Tide dashboard</a></p></body></html>` + "\n"
	if err := os.WriteFile(file, []byte(page), 0o600); err != nil {
		return fmt.Errorf("write the sign-in file: %w", err)
	}
	opener := o.Opener
	if opener == nil {
		opener = systemOpener
	}
	target := (&url.URL{Scheme: "file", Path: file}).String()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- opener(target, started) }()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-started:
		// Running: it returns once the browser has the page (or, for
		// an opener that runs the browser in the foreground, never).
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-time.After(openGrace):
		}
	}
	o.Sleep(openGrace)
	return nil
}

// systemOpener runs xdg-open (open on macOS) on target.
func systemOpener(target string, started chan<- struct{}) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.Command(name, target)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", name, err)
	}
	close(started)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s %s: %w", name, target, err)
	}
	return nil
}

// roughDuration writes d to the minute: "8h", "1h30m", "30m".
func roughDuration(d time.Duration) string {
	d = d.Round(time.Minute)
	if d < time.Minute {
		return "under a minute"
	}
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case h == 0:
		return fmt.Sprintf("%dm", m)
	case m == 0:
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
