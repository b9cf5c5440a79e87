package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/pki"
)

// fakeController is one of several controllers sharing a store: a
// primary serves every request, a standby answers pings and 503 to
// everything else, as ctld/api/ha.go says.
type fakeController struct {
	name string
	srv  *httptest.Server
	// standby makes it answer 503; epoch is the lease epoch its node
	// answers and pings carry; launch, when set, is launched by its
	// node answers (to see whose commands a node gets).
	standby atomic.Bool
	epoch   atomic.Uint64
	launch  atomic.Uint64
	// calls counts the requests other than pings; paths records them.
	calls atomic.Int64
	mu    sync.Mutex
	paths []string
}

func newFakeController(t *testing.T, name string, tlsServer bool) *fakeController {
	t.Helper()
	f := &fakeController{name: name}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role := api.RolePrimary
		if f.standby.Load() {
			role = api.RoleStandby
		}
		if r.URL.Path == api.PathPing {
			json.NewEncoder(w).Encode(api.PingResponse{Name: f.name, Cluster: "c", Role: role, Epoch: f.epoch.Load()})
			return
		}
		f.calls.Add(1)
		f.mu.Lock()
		f.paths = append(f.paths, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		if role == api.RoleStandby {
			status, body := api.NewErrorBody(api.Errorf(api.ErrUnavailable, "tidectld %s is a standby; the primary is elsewhere", f.name))
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(body)
			return
		}
		switch r.URL.Path {
		case "/api/v1/cluster":
			json.NewEncoder(w).Encode(api.ClusterInfo{Name: f.name})
		case "/api/v1/node/sync", "/api/v1/node/register":
			resp := api.NodeSyncResponse{Epoch: f.epoch.Load()}
			if id := f.launch.Load(); id != 0 {
				resp.Launch = []api.LaunchSpec{{JobRef: api.JobRef{JobID: id}}}
			}
			json.NewEncoder(w).Encode(resp)
		case "/api/v1/jobs":
			json.NewEncoder(w).Encode(api.SubmitResponse{JobID: 42})
		default:
			json.NewEncoder(w).Encode(struct{}{})
		}
	})
	f.srv = httptest.NewUnstartedServer(h)
	// A refused certificate is part of the tests, not news.
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tlsServer {
		f.srv.StartTLS()
	} else {
		f.srv.Start()
	}
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeController) addr() string { return f.srv.Listener.Addr().String() }

// refusedAddr returns an address nothing listens on: connections to it
// are refused.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestFailoverMovesOn: a call goes past a controller that refuses
// connections and a standby to the primary, which later calls reach
// first; the move is told once.
func TestFailoverMovesOn(t *testing.T) {
	dead := refusedAddr(t)
	standby := newFakeController(t, "ctl2", false)
	standby.standby.Store(true)
	primary := newFakeController(t, "ctl3", false)
	c := NewTCPList([]string{dead, standby.addr(), primary.addr()}, "k")
	defer c.Close()
	var moves []string
	c.OnFailover(func(from, to string) { moves = append(moves, from+" -> "+to) })

	for i := range 3 {
		info, err := c.Cluster(context.Background())
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if info.Name != "ctl3" {
			t.Fatalf("call %d answered by %s, want the primary ctl3", i, info.Name)
		}
	}
	if n := standby.calls.Load(); n != 1 {
		t.Errorf("the standby got %d calls, want 1 (only the first call tries it)", n)
	}
	if n := primary.calls.Load(); n != 3 {
		t.Errorf("the primary got %d calls, want 3", n)
	}
	if want := []string{dead + " -> " + primary.addr()}; !slicesEqual(moves, want) {
		t.Errorf("failovers told: %q, want %q", moves, want)
	}
	if c.Current() != primary.addr() {
		t.Errorf("current endpoint %s, want %s", c.Current(), primary.addr())
	}

	// The primary steps down and the standby takes over: the next call
	// starts at the old primary and moves back.
	primary.standby.Store(true)
	standby.standby.Store(false)
	info, err := c.Cluster(context.Background())
	if err != nil || info.Name != "ctl2" {
		t.Fatalf("after the switch: %+v, %v; want ctl2", info, err)
	}
	if len(moves) != 2 || moves[1] != primary.addr()+" -> "+standby.addr() {
		t.Errorf("failovers told: %q", moves)
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFailoverAllFail: when no controller serves a call, the error
// names every address tried with its reason and is ErrUnavailable, so
// that retries go on.
func TestFailoverAllFail(t *testing.T) {
	dead := refusedAddr(t)
	standby := newFakeController(t, "ctl2", false)
	standby.standby.Store(true)
	c := NewTCPList([]string{dead, standby.addr()}, "k")
	defer c.Close()
	moved := 0
	c.OnFailover(func(string, string) { moved++ })
	_, err := c.Cluster(context.Background())
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		"no tidectld could serve the request: ",
		dead + ": dial tcp " + dead + ": connect: connection refused; ",
		standby.addr() + ": tidectld ctl2 is a standby; the primary is elsewhere",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Count(msg, "cannot reach") != 0 || strings.Contains(msg, "\n") {
		t.Errorf("error %q: want one line, each address once with its reason", msg)
	}
	if !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("error %v is not ErrUnavailable", err)
	}
	var fe *FailoverError
	if !errors.As(err, &fe) || !slicesEqual(fe.Addrs, []string{dead, standby.addr()}) {
		t.Errorf("error %#v: want a FailoverError of both addresses", err)
	}
	if moved != 0 || c.Current() != dead {
		t.Errorf("moved %d times to %s: nothing answered, calls should still start at the first", moved, c.Current())
	}
}

// TestFailoverOtherAnswersAreFinal: an error the controller answers
// (other than 503) is the call's; the controller that answered is
// remembered.
func TestFailoverOtherAnswersAreFinal(t *testing.T) {
	dead := refusedAddr(t)
	var second atomic.Int64
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body := api.NewErrorBody(api.Errorf(api.ErrNotFound, "job 7 not found"))
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	}))
	defer bad.Close()
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { second.Add(1) }))
	defer other.Close()
	c := NewTCPList([]string{dead, bad.Listener.Addr().String(), other.Listener.Addr().String()}, "k")
	defer c.Close()
	_, err := c.Job(context.Background(), 7)
	if !errors.Is(err, api.ErrNotFound) || err.Error() != "job 7 not found" {
		t.Fatalf("err = %v, want the controller's not found as it is", err)
	}
	if second.Load() != 0 {
		t.Errorf("the call went on to the third controller")
	}
	if c.Current() != bad.Listener.Addr().String() {
		t.Errorf("current %s, want the controller that answered", c.Current())
	}
}

// TestFailoverNoResendAfterSending: a request that was sent and got no
// answer is not sent to another controller by the call (it may have
// been acted on).
func TestFailoverNoResendAfterSending(t *testing.T) {
	lost := newRawServer(t, "") // reads the request, closes without an answer
	primary := newFakeController(t, "ctl2", false)
	c := NewTCPList([]string{lost.ln.Addr().String(), primary.addr()}, "k")
	defer c.Close()
	_, err := c.Cancel(context.Background(), api.CancelRequest{Signal: 15})
	if err == nil || !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("err = %v, want an unavailable error", err)
	}
	if !strings.HasPrefix(err.Error(), "cannot reach tidectld at "+lost.ln.Addr().String()+": ") {
		t.Errorf("err = %q, want the single controller's message", err)
	}
	if len(lost.reqs) != 1 || primary.calls.Load() != 0 {
		t.Errorf("%d requests to the first, %d to the second; want 1 and 0", len(lost.reqs), primary.calls.Load())
	}
}

// TestSubmitRetryFailsOver: a submission whose answer was lost with a
// controller that then died is retried (same token) and reaches the
// controller that took over.
func TestSubmitRetryFailsOver(t *testing.T) {
	lost := newRawServer(t, "")
	var tokens []string
	var mu sync.Mutex
	primary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sr api.SubmitRequest
		json.NewDecoder(r.Body).Decode(&sr)
		mu.Lock()
		tokens = append(tokens, sr.Token)
		mu.Unlock()
		json.NewEncoder(w).Encode(api.SubmitResponse{JobID: 42})
	}))
	defer primary.Close()
	c := NewTCPList([]string{lost.ln.Addr().String(), primary.Listener.Addr().String()}, "k")
	defer c.Close()
	waits := 0
	c.sleep = func(context.Context, time.Duration) error {
		waits++
		lost.ln.Close() // the controller is gone before the retry
		return nil
	}
	c.SetRetryWindow(time.Minute)
	r, err := c.Submit(context.Background(), api.SubmitRequest{Spec: api.JobSpec{Name: "x"}})
	if err != nil || r.JobID != 42 {
		t.Fatalf("Submit = %+v, %v", r, err)
	}
	var first api.SubmitRequest
	req := <-lost.reqs
	if err := json.Unmarshal([]byte(strings.TrimPrefix(req, "POST /api/v1/jobs ")), &first); err != nil {
		t.Fatal(err)
	}
	if waits != 1 || len(tokens) != 1 || first.Token == "" || tokens[0] != first.Token {
		t.Fatalf("%d waits; tokens %q then %q: want one retry with the same token", waits, first.Token, tokens)
	}
}

// TestCreateStepFailover: a step's creation, retried only when it
// surely created nothing, counts a round of controllers that all
// refused or answered 503 as nothing.
func TestCreateStepFailover(t *testing.T) {
	dead := refusedAddr(t)
	ctl := newFakeController(t, "ctl2", false)
	ctl.standby.Store(true)
	c := NewTCPList([]string{dead, ctl.addr()}, "k")
	defer c.Close()
	c.sleep = func(context.Context, time.Duration) error { ctl.standby.Store(false); return nil }
	c.SetRetryWindow(time.Minute)
	if _, err := c.CreateStep(context.Background(), 7, api.StepRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := ctl.calls.Load(); n != 2 {
		t.Errorf("%d calls, want 2 (503, then created)", n)
	}
}

// TestStaleEpoch: the client keeps the highest lease epoch of node
// answers and refuses an answer of a lower one (a controller that lost
// the lease), moving on to the next controller.
func TestStaleEpoch(t *testing.T) {
	a := newFakeController(t, "a", false)
	b := newFakeController(t, "b", false)
	d := newFakeController(t, "d", false)
	a.epoch.Store(2)
	c := NewTCPList([]string{a.addr(), b.addr(), d.addr()}, "k")
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Register(ctx, api.NodeRegistration{Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	if c.Epoch() != 2 {
		t.Fatalf("epoch %d after the first answer, want 2", c.Epoch())
	}

	// a steps down; b, an old primary that has not heard yet, still
	// answers with epoch 1 and launches a job; d took over with epoch 3.
	a.standby.Store(true)
	b.epoch.Store(1)
	b.launch.Store(99)
	d.epoch.Store(3)
	resp, err := c.Sync(ctx, api.NodeSyncRequest{Name: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Launch) != 0 || resp.Epoch != 3 {
		t.Fatalf("answer %+v: want d's (epoch 3) without the stale controller's launch", resp)
	}
	if b.calls.Load() != 1 || d.calls.Load() != 1 || c.Current() != d.addr() || c.Epoch() != 3 {
		t.Fatalf("b %d calls, d %d; current %s, epoch %d", b.calls.Load(), d.calls.Load(), c.Current(), c.Epoch())
	}

	// Only stale and standby controllers left: the error says so and is
	// ErrUnavailable (tided backs off and tries again).
	d.standby.Store(true)
	_, err = c.Sync(ctx, api.NodeSyncRequest{Name: "n1"})
	if !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), b.addr()+": stale primary: tidectld at "+b.addr()+" answered with lease epoch 1, but epoch 3 was seen") {
		t.Fatalf("err = %v", err)
	}

	// A controller without a lease (epoch 0) is accepted.
	b.epoch.Store(0)
	b.launch.Store(0)
	if _, err := c.Sync(ctx, api.NodeSyncRequest{Name: "n1"}); err != nil {
		t.Fatalf("epoch 0: %v", err)
	}
	if c.Epoch() != 3 {
		t.Errorf("epoch %d, want 3 kept", c.Epoch())
	}
}

// TestStaleEpochOneController: with one controller a stale answer is
// refused too, as an unavailable controller.
func TestStaleEpochOneController(t *testing.T) {
	a := newFakeController(t, "a", false)
	a.epoch.Store(5)
	c := NewTCP(a.addr(), "k")
	defer c.Close()
	if _, err := c.Sync(context.Background(), api.NodeSyncRequest{}); err != nil {
		t.Fatal(err)
	}
	a.epoch.Store(4)
	a.launch.Store(1)
	resp, err := c.Sync(context.Background(), api.NodeSyncRequest{})
	if !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "stale primary") || len(resp.Launch) != 0 {
		t.Fatalf("Sync = %+v, %v; want a stale primary refused", resp, err)
	}
}

// TestFailoverConcurrent: calls in flight together when the current
// controller dies all move on, and the move is told once.
func TestFailoverConcurrent(t *testing.T) {
	dead := refusedAddr(t)
	primary := newFakeController(t, "ctl2", false)
	c := NewTCPList([]string{dead, primary.addr()}, "k")
	defer c.Close()
	var moved atomic.Int64
	c.OnFailover(func(string, string) { moved.Add(1) })
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Nodes(context.Background()); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if moved.Load() != 1 {
		t.Errorf("told of %d failovers, want 1", moved.Load())
	}
}

// TestFailoverContextCancelled: a cancelled call does not go on to the
// next controller.
func TestFailoverContextCancelled(t *testing.T) {
	dead := refusedAddr(t)
	primary := newFakeController(t, "ctl2", false)
	c := NewTCPList([]string{dead, primary.addr()}, "k")
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Cluster(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if primary.calls.Load() != 0 {
		t.Errorf("the cancelled call reached the second controller")
	}
}

// TestFailoverTLS: over TLS, a controller whose certificate does not
// verify is passed over like one that cannot be reached (nothing was
// sent to it).
func TestFailoverTLS(t *testing.T) {
	badCert := newFakeController(t, "ctl1", true)
	primary := newFakeController(t, "ctl2", true)
	good := primary.srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	good.ServerName = "127.0.0.1"
	tlsFor := func(addr string) (*tls.Config, string) {
		if addr == badCert.addr() {
			return &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1"}, "check the CA"
		}
		return good, ""
	}
	c := NewTLSList([]string{badCert.addr(), primary.addr()}, tlsFor)
	defer c.Close()
	info, err := c.Cluster(context.Background())
	if err != nil || info.Name != "ctl2" {
		t.Fatalf("Cluster = %+v, %v", info, err)
	}
	// Both failing: the certificate error is named with its hint.
	primary.srv.Close()
	c2 := NewTLSList([]string{primary.addr(), badCert.addr()}, tlsFor)
	defer c2.Close()
	_, err = c2.Cluster(context.Background())
	var te *TLSError
	if err == nil || !errors.As(err, &te) || !strings.Contains(err.Error(), "(check the CA)") ||
		!strings.Contains(err.Error(), primary.addr()+": dial tcp") {
		t.Fatalf("err = %v", err)
	}
	// One controller was unreachable: the round is worth another try.
	if !errors.Is(err, api.ErrUnavailable) {
		t.Errorf("err %v: want ErrUnavailable (one controller was unreachable)", err)
	}
}

func TestPing(t *testing.T) {
	dead := refusedAddr(t)
	standby := newFakeController(t, "ctl2", false)
	standby.standby.Store(true)
	standby.epoch.Store(7)
	primary := newFakeController(t, "ctl3", false)
	primary.epoch.Store(7)
	c := NewTCPList([]string{dead, standby.addr(), primary.addr()}, "k")
	defer c.Close()
	res := c.PingAll(context.Background())
	if len(res) != 3 {
		t.Fatalf("%d results", len(res))
	}
	if res[0].Addr != dead || res[0].Err == nil || !errors.Is(res[0].Err, api.ErrUnavailable) {
		t.Errorf("dead: %+v", res[0])
	}
	if res[1].Addr != standby.addr() || res[1].Err != nil || res[1].Resp.Role != api.RoleStandby || res[1].Resp.Name != "ctl2" {
		t.Errorf("standby: %+v", res[1])
	}
	if res[2].Addr != primary.addr() || res[2].Err != nil || res[2].Resp.Role != api.RolePrimary || res[2].Resp.Epoch != 7 {
		t.Errorf("primary: %+v", res[2])
	}
	if standby.calls.Load()+primary.calls.Load() != 0 || c.Current() != dead || c.Epoch() != 0 {
		t.Errorf("pings moved the client or counted as calls")
	}
	// Ping asks the current controller only.
	if _, err := c.Ping(context.Background()); err == nil {
		t.Errorf("Ping of the dead current controller succeeded")
	}
	if _, err := c.Cluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, err := c.Ping(context.Background())
	if err != nil || p.Name != "ctl3" || p.Role != api.RolePrimary {
		t.Errorf("Ping = %+v, %v", p, err)
	}
}

func TestParseControllers(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "ctl:6820", want: []string{"ctl:6820"}},
		{in: "ctl1:6820,ctl2:6820", want: []string{"ctl1:6820", "ctl2:6820"}},
		{in: "ctl1:6820, ctl2:6820 ,[::1]:6820", want: []string{"ctl1:6820", "ctl2:6820", "[::1]:6820"}},
		{in: "ctl", wantErr: `TIDE_CONTROLLER="ctl" is not host:port (the controller's api_addr, e.g. ctl:6820)`},
		{in: "ctl1:6820,ctl2", wantErr: `TIDE_CONTROLLER="ctl1:6820,ctl2": "ctl2" is not host:port with a port number (a comma-separated list of the controllers' api_addr, e.g. ctl1:6820,ctl2:6820)`},
		{in: "ctl1:6820,ctl2:0", wantErr: `"ctl2:0" is not host:port with a port number`},
		{in: ":6820,ctl2:6820", wantErr: `":6820" is not host:port`},
		{in: "ctl1:6820,,ctl2:6820", wantErr: `TIDE_CONTROLLER="ctl1:6820,,ctl2:6820": element 2 is empty`},
		{in: "ctl1:6820,", wantErr: "element 2 is empty"},
		{in: "ctl1:6820,ctl1:6820", wantErr: `TIDE_CONTROLLER="ctl1:6820,ctl1:6820" names ctl1:6820 twice`},
	}
	for _, tt := range tests {
		got, err := ParseControllers(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseControllers(%q) = %q, %v; want error %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slicesEqual(got, tt.want) {
			t.Errorf("ParseControllers(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestFromEnvList: TIDE_CONTROLLER with several controllers gives a
// client of all of them, over TLS with the credential.
func TestFromEnvList(t *testing.T) {
	ca, err := pki.NewCA("test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(ControllerEnv, "ctl1:6820,ctl2:6820")
	t.Setenv(JWTEnv, "a.b.c")
	t.Setenv(CAEnv, caFile)
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Endpoints(); !slicesEqual(got, []string{"ctl1:6820", "ctl2:6820"}) || c.where != "ctl1:6820,ctl2:6820" {
		t.Errorf("endpoints %q (%s)", got, c.where)
	}
	if _, ok := c.creds.(Bearer); !ok {
		t.Errorf("credentials %T, want the token", c.creds)
	}
	for _, ep := range c.eps {
		if ep.tr.auth == nil || ep.tr.host != ep.where {
			t.Errorf("endpoint %s: no credential, or Host %s", ep.where, ep.tr.host)
		}
	}
	t.Setenv(ControllerEnv, "ctl1:6820,ctl2")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), `"ctl2" is not host:port`) {
		t.Errorf("bad element: %v", err)
	}
}

// TestFailoverAfterNoAnswer: a controller that accepts connections and
// never answers (paused, cut off) costs one call its deadline; that
// call is not resent, but the next starts at the next controller.
func TestFailoverAfterNoAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	primary := newFakeController(t, "ctl2", false)
	c := NewTCPList([]string{ln.Addr().String(), primary.addr()}, "k")
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = c.Sync(ctx, api.NodeSyncRequest{Name: "gpu01"})
	cancel()
	if err == nil || primary.calls.Load() != 0 {
		t.Fatalf("first sync: err %v, %d calls to the primary; want a timeout and none", err, primary.calls.Load())
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Sync(ctx, api.NodeSyncRequest{Name: "gpu01"}); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	if primary.calls.Load() != 1 || c.Current() != primary.addr() {
		t.Errorf("second sync: %d calls to the primary, current %s", primary.calls.Load(), c.Current())
	}
}

// TestFromEnvSocketList: TIDE_SOCKET may list several controllers'
// sockets on one host; calls pass over one that is gone.
func TestFromEnvSocketList(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "ctl2.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(api.ClusterInfo{Name: "ctl2"})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	t.Setenv(ControllerEnv, "")
	t.Setenv("TIDE_SOCKET", filepath.Join(dir, "ctl1.sock")+","+sock)
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Cluster(ctx)
	if err != nil || info.Name != "ctl2" || c.Current() != sock {
		t.Fatalf("cluster: %+v, %v, current %s", info, err, c.Current())
	}
}
