package ui

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
)

// fakeMinter is the fake controller plus the token call: it mints for
// the caller (alice) within MaxLifespan, as the controller does, and
// records every request.
type fakeMinter struct {
	*clitest.FakeAPI
	MaxLifespan time.Duration
	// Answer, when set, replaces the token minted.
	Answer   string
	Requests []api.TokenRequest
}

func (f *fakeMinter) Token(_ context.Context, req api.TokenRequest) (api.TokenResponse, error) {
	f.Requests = append(f.Requests, req)
	if f.Err != nil {
		return api.TokenResponse{}, f.Err
	}
	life := time.Duration(req.LifespanS) * time.Second
	if life == 0 {
		life = min(api.DefaultTokenLifespan, f.MaxLifespan)
	}
	if life > f.MaxLifespan {
		return api.TokenResponse{}, api.Invalid("Token creation failed: lifespan %ds is more than the %s jwt.max_lifespan allows", req.LifespanS, f.MaxLifespan)
	}
	tok := "eyJhbGciOiJIUzI1NiJ9.alice-" + strings.ReplaceAll(life.String(), ".", "") + ".c2ln"
	if f.Answer != "" {
		tok = f.Answer
	}
	return api.TokenResponse{Token: tok, User: "alice", Expires: f.Now.Add(life)}, nil
}

// opened records what --open was given: the targets, and the sign-in
// file's contents and permissions when the opener ran.
type opened struct {
	targets []string
	page    string
	mode    os.FileMode
	dirMode os.FileMode
	// file is the sign-in file's path.
	file string
}

type result struct {
	out, errOut string
	code        int
	opened      *opened
}

// run runs tide ui against m with env; openErr is what the opener
// answers.
func run(t *testing.T, m *fakeMinter, env map[string]string, openErr error, args ...string) result {
	t.Helper()
	m.Info.CallerUser = "alice"
	f, bufs := clitest.Factory(m.FakeAPI, env)
	f.API = func() (cmdutil.API, error) { return m, nil }
	rec := &opened{}
	o := &Options{IO: f.IO, API: f.API, Getenv: f.Getenv, Getwd: f.Getwd, Hostname: f.Hostname, Now: f.Now,
		TempDir: t.TempDir(), Sleep: func(time.Duration) {}}
	o.Opener = func(target string, started chan<- struct{}) error {
		close(started)
		rec.targets = append(rec.targets, target)
		if openErr != nil {
			return openErr
		}
		u, err := url.Parse(target)
		if err != nil || u.Scheme != "file" {
			t.Errorf("opened %q, want a file: URL", target)
			return nil
		}
		rec.file = u.Path
		b, err := os.ReadFile(u.Path)
		if err != nil {
			t.Errorf("read the sign-in file: %v", err)
			return nil
		}
		rec.page = string(b)
		if st, err := os.Stat(u.Path); err == nil {
			rec.mode = st.Mode().Perm()
		}
		if st, err := os.Stat(filepath.Dir(u.Path)); err == nil {
			rec.dirMode = st.Mode().Perm()
		}
		return nil
	}
	out, errOut, code := clitest.Run(newCmd(o), bufs, "tide ui", args)
	return result{out: out, errOut: errOut, code: code, opened: rec}
}

var tcp = map[string]string{"TIDE_CONTROLLER": "ctl.example:6820", "TIDE_JWT": "a.b.c"}

func TestLink(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		max     time.Duration
		want    []api.TokenRequest
		link    string
		wantErr string
	}{
		{name: "default 8h", env: tcp, max: 24 * time.Hour, want: []api.TokenRequest{{LifespanS: 8 * 3600}},
			link:    "https://ctl.example:6820/ui/login#token=eyJhbGciOiJIUzI1NiJ9.alice-8h0m0s.c2ln\n",
			wantErr: "tide ui: the link signs a browser in as alice for 8h; keep it private\n"},
		{name: "lifespan", env: tcp, args: []string{"--lifespan=90m"}, max: 24 * time.Hour,
			want:    []api.TokenRequest{{LifespanS: 5400}},
			link:    "https://ctl.example:6820/ui/login#token=eyJhbGciOiJIUzI1NiJ9.alice-1h30m0s.c2ln\n",
			wantErr: "tide ui: the link signs a browser in as alice for 1h30m; keep it private\n"},
		// The default over jwt.max_lifespan: the controller's own
		// default (here max_lifespan itself, under 30m).
		{name: "short max_lifespan", env: tcp, max: 20 * time.Minute,
			want:    []api.TokenRequest{{LifespanS: 8 * 3600}, {}},
			link:    "https://ctl.example:6820/ui/login#token=eyJhbGciOiJIUzI1NiJ9.alice-20m0s.c2ln\n",
			wantErr: "tide ui: the link signs a browser in as alice for 20m; keep it private\n"},
		{name: "IPv6 controller", env: map[string]string{"TIDE_CONTROLLER": "[fd00::1]:6820"}, max: 24 * time.Hour,
			want:    []api.TokenRequest{{LifespanS: 8 * 3600}},
			link:    "https://[fd00::1]:6820/ui/login#token=eyJhbGciOiJIUzI1NiJ9.alice-8h0m0s.c2ln\n",
			wantErr: "tide ui: the link signs a browser in as alice for 8h; keep it private\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &fakeMinter{FakeAPI: clitest.SharingCluster(), MaxLifespan: tt.max}
			r := run(t, m, tt.env, nil, tt.args...)
			if r.code != 0 || r.out != tt.link || r.errOut != tt.wantErr {
				t.Errorf("exit %d\nstdout %q\nwant   %q\nstderr %q\nwant   %q", r.code, r.out, tt.link, r.errOut, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, m.Requests, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if len(r.opened.targets) != 0 {
				t.Errorf("opened %v without --open", r.opened.targets)
			}
		})
	}
}

func TestLinkErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		ctlErr  error
		answer  string
		wantErr string
		code    int
		asks    int
	}{
		// An explicit lifespan over the maximum is not shortened.
		{name: "lifespan over the maximum", args: []string{"--lifespan=48h"}, code: 1, asks: 1,
			wantErr: "tide ui: error: get a token for the dashboard: Token creation failed: lifespan 172800s is more than the 24h0m0s jwt.max_lifespan allows\n"},
		{name: "tokens off", code: 1, asks: 1,
			ctlErr:  api.Errorf(api.ErrUnavailable, "Token creation failed: JWT tokens are not enabled on this cluster (jwt.key_file is not set in tidectld's configuration)"),
			wantErr: "tide ui: error: get a token for the dashboard: Token creation failed: JWT tokens are not enabled on this cluster (jwt.key_file is not set in tidectld's configuration)\n"},
		{name: "bad lifespan", args: []string{"--lifespan=soon"}, code: 2,
			wantErr: "tide ui: error: invalid lifespan \"soon\": not a duration (90m, 2h) or a number of seconds\n"},
		{name: "bad port", args: []string{"--port=70000"}, code: 2,
			wantErr: "tide ui: error: invalid --port 70000: a TCP port is 1 to 65535\n"},
		{name: "stray argument", args: []string{"now"}, code: 2,
			wantErr: "tide ui: error: unexpected argument \"now\" (tide ui takes --open, --lifespan and --port)\n"},
		// A token that would break out of the URL (or the sign-in
		// file's HTML) is refused, not printed.
		{name: "malformed answer", answer: `a.b.c"><script>x</script>`, code: 1, asks: 1,
			wantErr: "tide ui: error: the controller answered a malformed token: TIDE_JWT is not a JWT: character '\"' at offset 5 (a token has base64url parts and dots only)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &fakeMinter{FakeAPI: clitest.SharingCluster(), MaxLifespan: 24 * time.Hour, Answer: tt.answer}
			m.Err = tt.ctlErr
			r := run(t, m, tcp, nil, append(tt.args, "--open")...)
			if r.out != "" || r.errOut != tt.wantErr || r.code != tt.code {
				t.Errorf("got out %q err %q exit %d\nwant err %q exit %d", r.out, r.errOut, r.code, tt.wantErr, tt.code)
			}
			if len(m.Requests) != tt.asks {
				t.Errorf("controller asked %d times, want %d", len(m.Requests), tt.asks)
			}
			if len(r.opened.targets) != 0 {
				t.Errorf("opened %v after an error", r.opened.targets)
			}
		})
	}
}

// TestOpen checks that --open hands the browser a private file that
// redirects to the link, never the link itself (a command line is
// public on the host), and removes the file afterwards.
func TestOpen(t *testing.T) {
	m := &fakeMinter{FakeAPI: clitest.SharingCluster(), MaxLifespan: 24 * time.Hour}
	r := run(t, m, tcp, nil, "--open")
	link := "https://ctl.example:6820/ui/login#token=eyJhbGciOiJIUzI1NiJ9.alice-8h0m0s.c2ln"
	if r.code != 0 || r.out != link+"\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
	if len(r.opened.targets) != 1 {
		t.Fatalf("opened %v, want one target", r.opened.targets)
	}
	if tg := r.opened.targets[0]; strings.Contains(tg, "token") || strings.Contains(tg, "eyJ") {
		t.Errorf("the opener's argument %q holds the token", tg)
	}
	if !strings.Contains(r.opened.page, `content="0;url=`+link+`"`) || !strings.Contains(r.opened.page, `href="`+link+`"`) {
		t.Errorf("sign-in file does not redirect to the link:\n%s", r.opened.page)
	}
	if !strings.Contains(r.opened.page, `<meta name="referrer" content="no-referrer">`) {
		t.Errorf("sign-in file sends a referrer:\n%s", r.opened.page)
	}
	if r.opened.mode != 0o600 || r.opened.dirMode != 0o700 {
		t.Errorf("sign-in file mode %v in a folder of mode %v, want 0600 in 0700", r.opened.mode, r.opened.dirMode)
	}
	if _, err := os.Stat(filepath.Dir(r.opened.file)); !os.IsNotExist(err) {
		t.Errorf("the sign-in file's folder is left behind: %v", err)
	}
}

// TestOpenFails: a host without a browser still gets the link, and a
// warning, not an error.
func TestOpenFails(t *testing.T) {
	m := &fakeMinter{FakeAPI: clitest.SharingCluster(), MaxLifespan: 24 * time.Hour}
	r := run(t, m, tcp, errors.New(`run xdg-open: exec: "xdg-open": executable file not found in $PATH`), "--open")
	if r.code != 0 || !strings.HasPrefix(r.out, "https://ctl.example:6820/ui/login#token=") {
		t.Fatalf("exit %d, stdout %q", r.code, r.out)
	}
	want := "tide ui: warning: could not open a browser: run xdg-open: exec: \"xdg-open\": executable file not found in $PATH; open the link above\n"
	if !strings.HasSuffix(r.errOut, want) {
		t.Errorf("stderr %q, want it to end with %q", r.errOut, want)
	}
}

func TestRecipe(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
		err  string
	}{
		{name: "default socket",
			want: "  ssh -N -L 8080:/run/tide/tidectld.sock alice@login1\n\nand open http://localhost:8080/ui/ "},
		// A relative socket (the local cluster's run/env.sh) is made
		// absolute: ssh resolves it on this host.
		{name: "relative socket and port", env: map[string]string{"TIDE_SOCKET": "run/tidectld.sock"}, args: []string{"--port", "9000"},
			want: "  ssh -N -L 9000:/home/alice/exp/run/tidectld.sock alice@login1\n\nand open http://localhost:9000/ui/ "},
		{name: "socket path quoted", env: map[string]string{"TIDE_SOCKET": "/tmp/my run/ctl'd.sock"},
			want: `  ssh -N -L 8080:'/tmp/my run/ctl'\''d.sock' alice@login1` + "\n"},
		{name: "open", args: []string{"--open"}, want: "  ssh -N -L 8080:/run/tide/tidectld.sock alice@login1\n",
			err: "tide ui: warning: --open: nothing to open before the ssh forward runs\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &fakeMinter{FakeAPI: clitest.SharingCluster(), MaxLifespan: 24 * time.Hour}
			r := run(t, m, tt.env, nil, tt.args...)
			if r.code != 0 || !strings.Contains(r.out, tt.want) || r.errOut != tt.err {
				t.Errorf("exit %d, stderr %q (want %q)\nstdout:\n%s\nwant it to hold:\n%s", r.code, r.errOut, tt.err, r.out, tt.want)
			}
			if len(m.Requests) != 0 {
				t.Errorf("a token was minted for the socket: %v", m.Requests)
			}
			if len(r.opened.targets) != 0 {
				t.Errorf("opened %v over the socket", r.opened.targets)
			}
		})
	}
}

// TestRecipeControllerDown: over the socket the controller is asked
// first, so that a recipe is not printed for one that is not there.
func TestRecipeControllerDown(t *testing.T) {
	m := &fakeMinter{FakeAPI: clitest.SharingCluster(), MaxLifespan: 24 * time.Hour}
	m.Err = errors.New("cannot reach tidectld at /run/tide/tidectld.sock: connection refused")
	r := run(t, m, nil, nil)
	want := "tide ui: error: reach the controller: cannot reach tidectld at /run/tide/tidectld.sock: connection refused\n"
	if r.code != 1 || r.out != "" || r.errOut != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want %q", r.code, r.out, r.errOut, want)
	}
}

func TestRoughDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		8 * time.Hour: "8h", 90 * time.Minute: "1h30m", 30*time.Minute - 10*time.Second: "30m", 20 * time.Second: "under a minute",
	} {
		if got := roughDuration(d); got != want {
			t.Errorf("roughDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
