package token

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tide-hpc/tide/cli/clitest"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
	goldenpkg "github.com/tide-hpc/tide/internal/golden"
)

// fakeMinter is the fake controller plus the token call: it mints for
// the caller (alice), for others only when Operator is set, within
// MaxLifespan, and records every request.
type fakeMinter struct {
	*clitest.FakeAPI
	Operator    bool
	MaxLifespan time.Duration
	// Answer, when set, replaces the token minted.
	Answer   string
	Requests []api.TokenRequest
}

// fakeToken is what the fake mints: a JWT-shaped string naming the
// user and lifespan, so that goldens show what was asked.
func fakeToken(user string, life int64) string {
	return "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + user + "-" + time.Duration(life*int64(time.Second)).String() + ".c2ln"
}

func (f *fakeMinter) Token(_ context.Context, req api.TokenRequest) (api.TokenResponse, error) {
	f.Requests = append(f.Requests, req)
	if f.Err != nil {
		return api.TokenResponse{}, f.Err
	}
	user := req.User
	if user == "" {
		user = "alice"
	}
	if user != "alice" && !f.Operator {
		return api.TokenResponse{}, api.Errorf(api.ErrPermissionDenied,
			"Access/permission denied: only operators may get tokens for other users (--username)")
	}
	life := req.LifespanS
	if life == 0 {
		life = int64(api.DefaultTokenLifespan / time.Second)
	}
	if time.Duration(life)*time.Second > f.MaxLifespan {
		return api.TokenResponse{}, api.Invalid("Token creation failed: lifespan %ds is more than the %s jwt.max_lifespan allows", life, f.MaxLifespan)
	}
	tok := fakeToken(user, life)
	if f.Answer != "" {
		tok = f.Answer
	}
	return api.TokenResponse{Token: tok, User: user, Expires: f.Now.Add(time.Duration(life) * time.Second)}, nil
}

func run(t *testing.T, m *fakeMinter, args ...string) (string, string, int) {
	t.Helper()
	f, bufs := clitest.Factory(m.FakeAPI, nil)
	f.API = func() (cmdutil.API, error) { return m, nil }
	return clitest.Run(NewCmd(f), bufs, "token", args)
}

func TestToken(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		operator bool
		want     []api.TokenRequest
	}{
		{name: "default", want: []api.TokenRequest{{}}},
		{name: "lifespan", args: []string{"--lifespan=2h"}, want: []api.TokenRequest{{LifespanS: 7200}}},
		{name: "lifespan-seconds", args: []string{"--lifespan", "90"}, want: []api.TokenRequest{{LifespanS: 90}}},
		{name: "lifespan-fraction-rounds-up", args: []string{"--lifespan=1500ms"}, want: []api.TokenRequest{{LifespanS: 2}}},
		{name: "username", args: []string{"--username=bob"}, operator: true, want: []api.TokenRequest{{User: "bob"}}},
		{name: "slurm-form", args: []string{"lifespan=600", "username=bob"}, operator: true,
			want: []api.TokenRequest{{LifespanS: 600, User: "bob"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &fakeMinter{FakeAPI: clitest.SharingCluster(), Operator: tt.operator, MaxLifespan: 24 * time.Hour}
			out, errOut, code := run(t, m, tt.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("token %v: exit %d, stderr %q", tt.args, code, errOut)
			}
			goldenpkg.Check(t, tt.name, out)
			if diff := cmp.Diff(tt.want, m.Requests, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTokenErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		ctlErr  error
		answer  string
		wantErr string
		code    int
		// sent: whether the controller was asked.
		sent bool
	}{
		{name: "not an operator", args: []string{"--username=bob"}, sent: true, code: 1,
			wantErr: "token: error: get a token: Access/permission denied: only operators may get tokens for other users (--username)\n"},
		{name: "over the maximum", args: []string{"--lifespan=48h"}, sent: true, code: 1,
			wantErr: "token: error: get a token: Token creation failed: lifespan 172800s is more than the 24h0m0s jwt.max_lifespan allows\n"},
		{name: "tokens off", sent: true, code: 1,
			ctlErr:  api.Errorf(api.ErrUnavailable, "Token creation failed: JWT tokens are not enabled on this cluster (jwt.key_file is not set in tidectld's configuration)"),
			wantErr: "token: error: get a token: Token creation failed: JWT tokens are not enabled on this cluster (jwt.key_file is not set in tidectld's configuration)\n"},
		{name: "bad lifespan", args: []string{"--lifespan=soon"}, code: 2,
			wantErr: "token: error: invalid lifespan \"soon\": not a duration (90m, 2h) or a number of seconds\n"},
		{name: "zero lifespan", args: []string{"--lifespan=0"}, code: 2, wantErr: "token: error: invalid lifespan \"0\": must be at least 1s\n"},
		{name: "negative lifespan", args: []string{"--lifespan=-5m"}, code: 2, wantErr: "token: error: invalid lifespan \"-5m\": must be at least 1s\n"},
		{name: "stray argument", args: []string{"now"}, code: 2,
			wantErr: "token: error: unexpected argument \"now\" (tide token takes --lifespan and --username)\n"},
		{name: "bad flag", args: []string{"--user=bob"}, code: 2, wantErr: "token: error: unknown flag: --user\n"},
		{name: "malformed answer", answer: "a.b.c\nTIDE_JWT=forged", sent: true, code: 1,
			wantErr: "token: error: the controller answered a malformed token: TIDE_JWT is not a JWT: character '\\n' at offset 5 (a token has base64url parts and dots only)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &fakeMinter{FakeAPI: clitest.SharingCluster(), MaxLifespan: 24 * time.Hour, Answer: tt.answer}
			m.Err = tt.ctlErr
			out, errOut, code := run(t, m, tt.args...)
			if out != "" || errOut != tt.wantErr || code != tt.code {
				t.Errorf("got out %q err %q exit %d\nwant err %q exit %d", out, errOut, code, tt.wantErr, tt.code)
			}
			if got := len(m.Requests) > 0; got != tt.sent {
				t.Errorf("controller asked = %v, want %v", got, tt.sent)
			}
		})
	}
}

// TestTokenNeedsMinter checks the message of a client without the
// token call (a fake of cmdutil.API alone).
func TestTokenNeedsMinter(t *testing.T) {
	f, bufs := clitest.Factory(clitest.SharingCluster(), nil)
	_, errOut, code := clitest.Run(NewCmd(f), bufs, "token", nil)
	if code != 1 || !strings.Contains(errOut, "cannot ask for tokens") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestParseLifespan(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{in: "3600", want: time.Hour}, {in: "90m", want: 90 * time.Minute}, {in: " 2h ", want: 2 * time.Hour},
		{in: "1s", want: time.Second}, {in: "999ms", err: true}, {in: "", err: true}, {in: "1d", err: true},
		{in: "99999999999999999", err: true},
	} {
		got, err := ParseLifespan(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseLifespan(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}
