package ctld

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/jwt"
)

// testJWTKey is the api tests' HS256 key.
var testJWTKey = []byte("api-test-jwt-key-0123456789abcdef")

// apiServed is a controller serving api_addr with JWTs on.
type apiServed struct {
	*served
	api string // api_addr
}

// serveAPI runs a controller (Server.Run) with api_addr on a free
// loopback port, jwt.key_file set to testJWTKey, daemon as an operator,
// and extra YAML.
func serveAPI(t *testing.T, extra string) *apiServed {
	t.Helper()
	for _, name := range []string{"nobody", "daemon"} {
		if _, err := user.Lookup(name); err != nil {
			t.Skipf("needs user %s: %v", name, err)
		}
	}
	keyFile := filepath.Join(t.TempDir(), "jwt.key")
	if err := os.WriteFile(keyFile, testJWTKey, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	sv := serve(t, "api_addr: "+addr+"\njwt: {key_file: "+keyFile+", max_lifespan: 2h}\noperators: [daemon]\n"+extra)
	return &apiServed{served: sv, api: addr}
}

// freeAddr is a free loopback TCP address.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// token signs a token for name, issued now by the controller's clock.
func (a *apiServed) token(t *testing.T, name string, life time.Duration) string {
	t.Helper()
	now := a.h.s.now()
	tok, err := jwt.Sign(testJWTKey, jwt.Claims{User: name, IssuedAt: now, ExpiresAt: now.Add(life)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// as returns a client of api_addr with name's token.
func (a *apiServed) as(t *testing.T, name string) *client.Client {
	t.Helper()
	c := client.NewRemote(a.api, client.Bearer(a.token(t, name, time.Hour)))
	t.Cleanup(c.Close)
	return c
}

// local is a root client of the socket.
func (a *apiServed) local(t *testing.T) *client.Client {
	t.Helper()
	c := client.NewUnix(a.socket)
	t.Cleanup(c.Close)
	return c
}

func submitSpec() api.SubmitRequest {
	return api.SubmitRequest{Spec: api.JobSpec{Name: "tcp", Script: "#!/bin/sh\ntrue\n", WorkDir: "/tmp"}}
}

func tctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestAPIOverTCPWithJWT(t *testing.T) {
	a := serveAPI(t, "")
	nobody, daemon := a.as(t, "nobody"), a.as(t, "daemon")

	// The identity is the token's: this test runs as root, and the
	// controller sees nobody.
	info, err := nobody.Cluster(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.CallerUser != "nobody" || info.CallerUID != 65534 || info.CallerAdmin {
		t.Errorf("caller over TCP: %s uid %d admin %v; want nobody 65534, not an operator", info.CallerUser, info.CallerUID, info.CallerAdmin)
	}
	if info.Config["AuthAltTypes"] != "auth/jwt" || info.Config["TideAPIAddr"] != a.api {
		t.Errorf("show config: AuthAltTypes=%s TideAPIAddr=%s; want auth/jwt, %s", info.Config["AuthAltTypes"], info.Config["TideAPIAddr"], a.api)
	}
	mine, err := nobody.Submit(tctx(t), submitSpec())
	if err != nil {
		t.Fatalf("submit as nobody: %v", err)
	}
	j, err := a.local(t).Job(tctx(t), mine.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if j.User != "nobody" || j.UserID != 65534 || j.GroupID != 65534 {
		t.Errorf("job %d belongs to %s (%d:%d), want nobody (65534:65534)", j.ID, j.User, j.UserID, j.GroupID)
	}
	theirs, err := daemon.Submit(tctx(t), submitSpec())
	if err != nil {
		t.Fatalf("submit as daemon: %v", err)
	}

	// An ordinary user cannot act on another's job over TCP...
	resp, err := nobody.Cancel(tctx(t), api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{theirs.JobID}}})
	if err == nil && (len(resp.Results) != 1 || resp.Results[0].Error == "") {
		t.Errorf("nobody cancelled daemon's job %d: %+v", theirs.JobID, resp)
	}
	if j, _ := a.local(t).Job(tctx(t), theirs.JobID); j.State != api.StatePending {
		t.Errorf("daemon's job is %s after nobody's cancel, want PENDING", j.State)
	}
	// ...nor ask to submit as another.
	req := submitSpec()
	req.User = "daemon"
	if _, err := nobody.Submit(tctx(t), req); !errors.Is(err, api.ErrPermissionDenied) {
		t.Errorf("nobody --uid=daemon over TCP: %v, want permission denied", err)
	}
	// An operator (daemon is one) can.
	resp, err = daemon.Cancel(tctx(t), api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{mine.JobID}}})
	if err != nil || len(resp.Results) != 1 || resp.Results[0].Error != "" {
		t.Fatalf("operator cancel over TCP: %+v, %v", resp, err)
	}
	if j, _ := a.local(t).Job(tctx(t), mine.JobID); j.State != api.StateCancelled {
		t.Errorf("nobody's job is %s after the operator's cancel, want CANCELLED", j.State)
	}

	// The trail and the audit log say how the caller came in.
	ev, err := a.local(t).Events(tctx(t), mine.JobID)
	if err != nil || len(ev) == 0 || !strings.HasPrefix(ev[0].Message, "submitted by nobody (jwt, 127.0.0.1) from ") {
		t.Errorf("trail of job %d: %+v, %v", mine.JobID, ev, err)
	}
	recs, err := a.local(t).Audit(tctx(t), 10)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range recs {
		if r.Action == "cancel" && r.User == "daemon" {
			found = true
			if !strings.HasSuffix(r.Detail, " auth=jwt addr=127.0.0.1") {
				t.Errorf("audit detail %q does not name jwt and the address", r.Detail)
			}
		}
	}
	if !found {
		t.Errorf("no audit record of daemon's cancel: %+v", recs)
	}

	// The connections showed credentials: they left the
	// unauthenticated pool.
	if auth, unauth := a.listener(t, "api").counts(); auth == 0 || unauth != 0 {
		t.Errorf("api_addr connections: %d authenticated, %d not; want some and none", auth, unauth)
	}
}

// rawAPI sends one request to api_addr with the given Authorization
// headers and returns status, the error body and the headers.
func rawAPI(t *testing.T, addr, method, path, body string, auth ...string) (int, api.ErrorBody, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range auth {
		req.Header.Add("Authorization", a)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var eb api.ErrorBody
	if resp.StatusCode != 200 {
		if err := json.Unmarshal(data, &eb); err != nil {
			t.Errorf("%s %s: %d answer is not an error body: %q", method, path, resp.StatusCode, data)
		}
	}
	return resp.StatusCode, eb, resp.Header
}

// forgeJWT signs header.payload with k.
func forgeJWT(k []byte, header, payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	signed := enc([]byte(header)) + "." + enc([]byte(payload))
	m := hmac.New(sha256.New, k)
	m.Write([]byte(signed))
	return signed + "." + enc(m.Sum(nil))
}

// unsigned is an unsigned token (alg none): an empty signature.
func unsigned(header, payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(header)) + "." + enc([]byte(payload)) + "."
}

func TestAPIRefusesBadCredentials(t *testing.T) {
	a := serveAPI(t, "")
	good := a.token(t, "nobody", time.Hour)
	parts := strings.Split(good, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	asRoot := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"nobody"`, `"root"`, 1)))
	now := a.h.s.now().Unix()
	claims := func(iat, exp int64, sun string) string {
		b, _ := json.Marshal(map[string]any{"iat": iat, "exp": exp, "sun": sun})
		return string(b)
	}
	tests := []struct {
		name string
		auth []string
		msg  string
	}{
		{name: "no credential", msg: "tidectld: authentication failed: no credential"},
		{name: "empty bearer", auth: []string{"Bearer "}, msg: "carries no credential"},
		{name: "basic auth", auth: []string{"Basic cm9vdDpyb290"}, msg: `unknown authorization scheme "Basic"`},
		{name: "cluster key as bearer", auth: []string{"Bearer k"}, msg: "JWT malformed"},
		{name: "tampered payload", auth: []string{"Bearer " + parts[0] + "." + asRoot + "." + parts[2]}, msg: "JWT signature invalid"},
		{name: "tampered signature", auth: []string{"Bearer " + parts[0] + "." + parts[1] + "." + strings.ToUpper(parts[2][:4]) + parts[2][4:]},
			msg: "JWT signature invalid"},
		{name: "other key", auth: []string{"Bearer " + forgeJWT([]byte("another-key-another-key-another!!"), `{"alg":"HS256"}`, claims(now, now+60, "root"))},
			msg: "JWT signature invalid"},
		{name: "alg none", auth: []string{"Bearer " + unsigned(`{"alg":"none"}`, claims(now, now+60, "root"))},
			msg: "JWT algorithm not accepted"},
		{name: "HS512", auth: []string{"Bearer " + forgeJWT(testJWTKey, `{"alg":"HS512"}`, claims(now, now+60, "root"))},
			msg: "JWT algorithm not accepted"},
		{name: "expired", auth: []string{"Bearer " + forgeJWT(testJWTKey, `{"alg":"HS256"}`, claims(now-3600, now-60, "nobody"))},
			msg: "JWT expired at "},
		{name: "issued in the future", auth: []string{"Bearer " + forgeJWT(testJWTKey, `{"alg":"HS256"}`, claims(now+600, now+3600, "nobody"))},
			msg: "JWT issued in the future"},
		{name: "no user", auth: []string{"Bearer " + forgeJWT(testJWTKey, `{"alg":"HS256"}`, `{"iat":1,"exp":99999999999}`)},
			msg: "JWT lacks a required claim: sun"},
		{name: "unknown user", auth: []string{"Bearer " + forgeJWT(testJWTKey, `{"alg":"HS256"}`, claims(now, now+60, "no-such-user-x"))},
			msg: `JWT names user "no-such-user-x", who is unknown to the controller`},
		{name: "two credentials", auth: []string{"Bearer " + good, "Bearer " + good}, msg: "2 Authorization headers, want one"},
	}
	before, err := a.local(t).Jobs(tctx(t), api.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, rt := range []struct{ method, path, body string }{
				{"POST", "/api/v1/jobs", `{"spec":{"script":"#!/bin/sh\ntrue\n","work_dir":"/tmp"}}`},
				{"POST", "/api/v1/jobs/cancel", `{"filter":{}}`},
				{"GET", "/api/v1/jobs", ""},
				{"POST", api.PathTokens, `{"username":"root"}`},
			} {
				code, eb, hdr := rawAPI(t, a.api, rt.method, rt.path, rt.body, tt.auth...)
				if code != 401 || eb.Error.Code != "unauthenticated" || !strings.Contains(eb.Error.Message, tt.msg) {
					t.Errorf("%s %s: %d %+v; want 401 unauthenticated saying %q", rt.method, rt.path, code, eb.Error, tt.msg)
				}
				if code == 401 && hdr.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s: 401 without WWW-Authenticate", rt.method, rt.path)
				}
			}
		})
	}
	// Nothing changed.
	after, err := a.local(t).Jobs(tctx(t), api.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Jobs) != len(before.Jobs) {
		t.Errorf("%d jobs after the refused requests, %d before", len(after.Jobs), len(before.Jobs))
	}
	// The good token still works, on the same routes.
	if code, eb, _ := rawAPI(t, a.api, "GET", "/api/v1/jobs", "", "Bearer "+good); code != 200 {
		t.Errorf("good token: %d %+v", code, eb)
	}
}

func TestAPIServesNoProfiles(t *testing.T) {
	a := serveAPI(t, "")
	root := "Bearer " + a.token(t, "root", time.Hour)
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/heap", "/debug/pprof"} {
		if code, eb, _ := rawAPI(t, a.api, "GET", p, "", root); code != 404 || !strings.Contains(eb.Error.Message, "profiles are served on the local socket only") {
			t.Errorf("GET %s as root over TCP: %d %+v, want 404", p, code, eb.Error)
		}
	}
	if code, _, _ := rawAPI(t, a.api, "GET", "/metrics", "", root); code != 200 {
		t.Errorf("GET /metrics with a token: %d", code)
	}
}

func TestTokenMinting(t *testing.T) {
	a := serveAPI(t, "")
	root := a.local(t)
	now := a.h.s.now()

	// Root over the socket: a token for itself, 30 minutes by default.
	r, err := root.Token(tctx(t), api.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r.User != "root" || !r.Expires.Equal(now.Add(30*time.Minute)) {
		t.Errorf("default token: %s until %v, want root until %v", r.User, r.Expires, now.Add(30*time.Minute))
	}
	c, err := jwt.Verify(testJWTKey, r.Token, now, time.Minute)
	if err != nil || c.User != "root" {
		t.Errorf("minted token: %+v, %v", c, err)
	}
	// For another user, and that token works over TCP as that user.
	r, err = root.Token(tctx(t), api.TokenRequest{User: "nobody", LifespanS: 600})
	if err != nil || r.User != "nobody" || !r.Expires.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("token for nobody: %+v, %v", r, err)
	}
	nobody := client.NewRemote(a.api, client.Bearer(r.Token))
	defer nobody.Close()
	if info, err := nobody.Cluster(tctx(t)); err != nil || info.CallerUser != "nobody" {
		t.Errorf("minted token over TCP: %+v, %v", info.CallerUser, err)
	}
	// Over TCP with a token: no longer than that token.
	r2, err := nobody.Token(tctx(t), api.TokenRequest{LifespanS: 3600})
	if err != nil || r2.User != "nobody" || !r2.Expires.Equal(r.Expires) {
		t.Errorf("token asked with a token expiring %v: %+v, %v; want the same expiry", r.Expires, r2, err)
	}
	tests := []struct {
		name string
		c    *client.Client
		req  api.TokenRequest
		want error
		msg  string
	}{
		{name: "ordinary user for another", c: nobody, req: api.TokenRequest{User: "daemon"}, want: api.ErrPermissionDenied,
			msg: "only operators may get tokens for other users"},
		{name: "operator for root", c: a.as(t, "daemon"), req: api.TokenRequest{User: "root"}, want: api.ErrPermissionDenied,
			msg: "only root may get tokens for root"},
		{name: "unknown user", c: root, req: api.TokenRequest{User: "no-such-user-x"}, want: api.ErrInvalidArgument, msg: "Invalid user: no-such-user-x"},
		{name: "over the maximum", c: root, req: api.TokenRequest{LifespanS: 2*3600 + 1}, want: api.ErrInvalidArgument,
			msg: "lifespan 7201s is more than the 2h0m0s jwt.max_lifespan allows"},
		{name: "negative", c: root, req: api.TokenRequest{LifespanS: -1}, want: api.ErrInvalidArgument, msg: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.c.Token(tctx(t), tt.req)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Token(%+v) = %v; want %v saying %q", tt.req, err, tt.want, tt.msg)
			}
		})
	}
	// An operator gets tokens for other users; every mint is audited,
	// never with the token.
	if r, err := a.as(t, "daemon").Token(tctx(t), api.TokenRequest{User: "nobody"}); err != nil || r.User != "nobody" {
		t.Errorf("operator's token for nobody: %+v, %v", r, err)
	}
	recs, err := root.Audit(tctx(t), 20)
	if err != nil {
		t.Fatal(err)
	}
	var mints []string
	for _, rec := range recs {
		if rec.Action == "token" {
			mints = append(mints, rec.User+" "+rec.Target+" "+rec.Detail)
			if strings.Contains(rec.Detail, "eyJ") {
				t.Errorf("audit record carries a token: %+v", rec)
			}
		}
	}
	want := []string{
		"daemon user nobody lifespan=30m0s expires=2026-11-29T12:30:00Z auth=jwt addr=127.0.0.1",
		"nobody user nobody lifespan=10m0s expires=2026-11-29T12:10:00Z auth=jwt addr=127.0.0.1",
		"root user nobody lifespan=10m0s expires=2026-11-29T12:10:00Z",
		"root user root lifespan=30m0s expires=2026-11-29T12:30:00Z",
	}
	if strings.Join(mints, "\n") != strings.Join(want, "\n") {
		t.Errorf("token audit records:\n%s\nwant:\n%s", strings.Join(mints, "\n"), strings.Join(want, "\n"))
	}
	// An ordinary user on the socket gets a token for itself.
	var got api.TokenResponse
	dialAs(t, 65534, func() {
		c := client.NewUnix(a.socket)
		defer c.Close()
		got, err = c.Token(context.Background(), api.TokenRequest{LifespanS: 60})
	})
	if err != nil || got.User != "nobody" {
		t.Errorf("nobody on the socket: %+v, %v", got, err)
	}
}

func TestTokensOff(t *testing.T) {
	addr := freeAddr(t)
	sv := serve(t, "api_addr: "+addr+"\n")
	c := client.NewUnix(sv.socket)
	defer c.Close()
	if info, err := c.Cluster(tctx(t)); err != nil || info.Config["AuthAltTypes"] != "(null)" {
		t.Errorf("show config without a JWT key: AuthAltTypes=%q, %v", info.Config["AuthAltTypes"], err)
	}
	_, err := c.Token(tctx(t), api.TokenRequest{})
	if !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "JWT tokens are not enabled on this cluster (jwt.key_file is not set") {
		t.Errorf("token without jwt.key_file: %v", err)
	}
	tok, _ := jwt.Sign(testJWTKey, jwt.Claims{User: "root", IssuedAt: sv.h.s.now(), ExpiresAt: sv.h.s.now().Add(time.Hour)})
	if code, eb, _ := rawAPI(t, addr, "GET", "/api/v1/jobs", "", "Bearer "+tok); code != 401 || !strings.Contains(eb.Error.Message, "accepts no JWTs") {
		t.Errorf("bearer token without jwt.key_file: %d %+v", code, eb.Error)
	}
}

func TestJWTKeyFileMustBePrivate(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "jwt.key")
	if err := os.WriteFile(keyFile, testJWTKey, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(keyFile, 0o644)
	cfg, err := ParseConfig(strings.NewReader(testConfig + "jwt: {key_file: " + keyFile + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	cl.StateDir = t.TempDir()
	cl.KeyFile = filepath.Join(cl.StateDir, "cluster.key")
	os.WriteFile(cl.KeyFile, []byte("cluster-key-0123456789"), 0o600)
	s, err := New(cl, slog.New(slog.DiscardHandler))
	if err == nil {
		s.Close()
		t.Fatal("controller started with a JWT key others may read")
	}
	if !strings.Contains(err.Error(), "jwt.key_file: JWT key "+keyFile+" is readable by others (mode -rw-r--r--): chmod 600 it") {
		t.Errorf("error %v", err)
	}
}

// TestAPIWithMungeCredentials checks what api_addr makes of a MUNGE
// header, with a decoder standing in for munged: the identity is the
// decoder's uid and gid, a refused credential is 401 naming munge's
// reason, and a munged that cannot be asked is 503.
func TestAPIWithMungeCredentials(t *testing.T) {
	a := serveAPI(t, "")
	a.h.s.auth.decodeMunge = func(_ context.Context, cred string) (uint32, uint32, error) {
		switch cred {
		case "MUNGE:nobody:":
			return 65534, 65534, nil
		case "MUNGE:down:":
			return 0, 0, &mungedDown{err: errors.New("munge: munged unreachable: dial unix /run/munge/munge.socket.2: connect: no such file or directory")}
		}
		return 0, 0, errors.New("munge: credential replayed")
	}
	c := client.NewRemote(a.api, staticCreds("MUNGE MUNGE:nobody:"))
	defer c.Close()
	info, err := c.Cluster(tctx(t))
	if err != nil || info.CallerUser != "nobody" || info.CallerUID != 65534 {
		t.Fatalf("MUNGE caller: %+v, %v", info, err)
	}
	r, err := c.Submit(tctx(t), submitSpec())
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := a.local(t).Events(tctx(t), r.JobID); err != nil || len(ev) == 0 || !strings.HasPrefix(ev[0].Message, "submitted by nobody (munge, 127.0.0.1) from ") {
		t.Errorf("trail: %+v, %v", ev, err)
	}
	if code, eb, _ := rawAPI(t, a.api, "GET", "/api/v1/jobs", "", "MUNGE MUNGE:old:"); code != 401 ||
		eb.Error.Message != "tidectld: authentication failed: MUNGE credential refused: munge: credential replayed" {
		t.Errorf("replayed credential: %d %+v", code, eb.Error)
	}
	if code, eb, _ := rawAPI(t, a.api, "GET", "/api/v1/jobs", "", "MUNGE MUNGE:down:"); code != 503 ||
		!strings.Contains(eb.Error.Message, "tidectld cannot check MUNGE credentials now: munge: munged unreachable") {
		t.Errorf("munged down: %d %+v", code, eb.Error)
	}
}

// staticCreds sends the same Authorization header every time.
type staticCreds string

func (s staticCreds) Authorization(context.Context) (string, error) { return string(s), nil }

// TestAPISlowBodyAfterAuthentication checks that a connection's first
// request, authenticated, may send its body for longer than an
// unauthenticated connection may idle (a large script over a slow
// link), while one without a credential is answered 401 at once.
func TestAPISlowBodyAfterAuthentication(t *testing.T) {
	a := serveAPI(t, "limits: {unauthenticated_timeout: 300ms}\n")
	body := `{"spec":{"name":"slow","script":"#!/bin/sh\ntrue\n","work_dir":"/tmp"}}`
	c, err := net.Dial("tcp", a.api)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	head := "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + a.token(t, "nobody", time.Hour) +
		"\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n"
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	// The body in four parts, a quarter second apart: a second in all,
	// past the 300ms an unauthenticated connection may idle.
	for i := 0; i < 4; i++ {
		time.Sleep(250 * time.Millisecond)
		part := body[i*len(body)/4 : (i+1)*len(body)/4]
		if _, err := io.WriteString(c, part); err != nil {
			t.Fatalf("write part %d: %v", i, err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(data), `"job_id"`) {
		t.Errorf("slow body: %d %s", resp.StatusCode, data)
	}
}
