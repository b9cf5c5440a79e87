package ctld

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tide-hpc/tide/ctld/api"
)

// fakeConn is a connection from a named peer that records what the
// listener does to it.
type fakeConn struct {
	peer string
	uid  uint32

	mu       sync.Mutex
	closed   bool
	written  bytes.Buffer
	deadline time.Time // the last read deadline
}

func (c *fakeConn) Read([]byte) (int, error) { return 0, io.EOF }
func (c *fakeConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written.Write(p)
}
func (c *fakeConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}
func (c *fakeConn) isClosed() bool                   { c.mu.Lock(); defer c.mu.Unlock(); return c.closed }
func (c *fakeConn) readDeadline() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.deadline }
func (c *fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }
func (c *fakeConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return nil
}

// fakeCounters counts refusals and evictions as "listener/reason".
type fakeCounters struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *fakeCounters) refused(listener, reason string) { f.add(listener + "/" + reason) }
func (f *fakeCounters) evicted(listener string)         { f.add(listener + "/evicted") }
func (f *fakeCounters) add(k string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[k]++
}
func (f *fakeCounters) get() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.n)
}

var testT0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// newFakeListener is a limitListener that tests feed fakeConns through
// acceptFake; operators are the uids privileged on a socket.
func newFakeListener(name string, lim connLimits, operators ...uint32) (*limitListener, *fakeCounters) {
	fc := &fakeCounters{}
	l := newLimitListener(nil, name, lim, fc, newRefusalLog(slog.New(slog.DiscardHandler), time.Minute, "refused connections"))
	l.now = func() time.Time { return testT0 }
	l.identify = func(c net.Conn) connPeer {
		f := c.(*fakeConn)
		return connPeer{key: f.peer, cred: syscall.Ucred{Uid: f.uid}, hasCred: true}
	}
	l.privileged = func(p connPeer) bool {
		for _, op := range operators {
			if p.cred.Uid == op {
				return true
			}
		}
		return false
	}
	return l, fc
}

// acceptFake runs c through the listener as Accept does.
func (l *limitListener) acceptFake(c *fakeConn) (*trackedConn, refusal) {
	p := l.identify(c)
	tc, ref := l.admit(c, p)
	if tc == nil {
		l.refuse(c, p.key, ref)
	}
	return tc, ref
}

// mustAdmit admits a connection of peer (uid for the socket).
func mustAdmit(t *testing.T, l *limitListener, peer string, uid uint32) *trackedConn {
	t.Helper()
	tc, ref := l.acceptFake(&fakeConn{peer: peer, uid: uid})
	if tc == nil {
		t.Fatalf("connection from %s refused: %s", peer, ref.msg)
	}
	return tc
}

// mustRefuse checks that a connection of peer is refused for reason and
// closed, and returns it.
func mustRefuse(t *testing.T, l *limitListener, peer string, uid uint32, reason string) *fakeConn {
	t.Helper()
	c := &fakeConn{peer: peer, uid: uid}
	if tc, ref := l.acceptFake(c); tc != nil || ref.reason != reason {
		t.Fatalf("connection from %s: admitted %v, reason %q; want refused for %s", peer, tc != nil, ref.reason, reason)
	}
	if !c.isClosed() {
		t.Fatalf("refused connection from %s stays open", peer)
	}
	return c
}

func closed(tc *trackedConn) bool { return tc.Conn.(*fakeConn).isClosed() }

func TestLimitListenerSocket(t *testing.T) {
	// 10 connections, 4 per user, the last 3 for operators (uid 0).
	l, fc := newFakeListener("socket", connLimits{total: 10, perPeer: 4, reserve: 3}, 0)
	l.answer = true
	uid := func(n uint32) (string, uint32) { return fmt.Sprintf("uid %d", n), n }
	var alice []*trackedConn
	for range 4 {
		alice = append(alice, mustAdmit(t, l, "uid 1", 1))
	}
	// Alice's fifth is over her cap, and the answer says so.
	refused := mustRefuse(t, l, "uid 1", 1, "peer_limit")
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(refused.written.Bytes())), nil)
	if err != nil {
		t.Fatalf("refused connection got no HTTP answer: %v (%q)", err, refused.written.String())
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(body), `"code":"unavailable"`) ||
		!strings.Contains(string(body), "too many connections from uid 1 (4 open, at most 4 per user)") {
		t.Errorf("refusal answer: %d Retry-After=%q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// Bob takes the last ordinary slots (7 of 10); then Carol is refused
	// for the operators' reserve, and root is not.
	for range 3 {
		mustAdmit(t, l, "uid 2", 2)
	}
	mustRefuse(t, l, "uid 3", 3, "reserve")
	var roots []*trackedConn
	for range 3 {
		p, u := uid(0)
		roots = append(roots, mustAdmit(t, l, p, u))
	}
	mustRefuse(t, l, "uid 0", 0, "limit")
	// Closing frees a slot, once however often it is closed.
	alice[0].Close()
	alice[0].Close()
	l.connState(alice[0], http.StateClosed)
	mustRefuse(t, l, "uid 3", 3, "reserve") // 9 open: still in the reserve
	for _, r := range roots {
		r.Close()
	}
	mustAdmit(t, l, "uid 1", 1) // 6 open: below the reserve
	if auth, unauth := l.counts(); auth != 7 || unauth != 0 {
		t.Errorf("counts = %d, %d; want 7, 0", auth, unauth)
	}
	want := map[string]int{"socket/peer_limit": 1, "socket/reserve": 2, "socket/limit": 1}
	if diff := cmp.Diff(want, fc.get()); diff != "" {
		t.Errorf("refusal counters (-want +got):\n%s", diff)
	}
}

func TestLimitListenerUnauthenticatedPerPeer(t *testing.T) {
	l, fc := newFakeListener("node", connLimits{total: 10, perPeer: 2, unauth: 6, unauthPerPeer: 3, unauthIdle: time.Second})
	a := mustAdmit(t, l, "127.0.0.1", 0)
	b := mustAdmit(t, l, "127.0.0.1", 0)
	c := mustAdmit(t, l, "127.0.0.1", 0)
	// Over the peer's share: its connection idle the longest goes.
	d := mustAdmit(t, l, "127.0.0.1", 0)
	if !closed(a) || closed(b) || closed(c) || closed(d) {
		t.Fatalf("closed = %v %v %v %v, want the oldest only", closed(a), closed(b), closed(c), closed(d))
	}
	// Connections serving a request are never closed: with all three
	// busy, the next one is refused.
	for _, tc := range []*trackedConn{b, c, d} {
		l.connState(tc, http.StateActive)
	}
	mustRefuse(t, l, "127.0.0.1", 0, "unauthenticated_peer_limit")
	l.connState(c, http.StateIdle)
	mustAdmit(t, l, "127.0.0.1", 0)
	if !closed(c) || closed(b) || closed(d) {
		t.Errorf("with c idle: closed = %v %v %v, want c only", closed(b), closed(c), closed(d))
	}
	// Other peers have their own share.
	mustAdmit(t, l, "10.0.0.2", 0)
	if auth, unauth := l.counts(); auth != 0 || unauth != 4 {
		t.Errorf("counts = %d, %d; want 0, 4", auth, unauth)
	}
	want := map[string]int{"node/evicted": 2, "node/unauthenticated_peer_limit": 1}
	if diff := cmp.Diff(want, fc.get()); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
}

func TestLimitListenerUnauthenticatedPool(t *testing.T) {
	l, fc := newFakeListener("node", connLimits{total: 10, perPeer: 4, unauth: 4, unauthPerPeer: 4, unauthIdle: time.Second})
	p := []*trackedConn{mustAdmit(t, l, "A", 0), mustAdmit(t, l, "B", 0), mustAdmit(t, l, "C", 0), mustAdmit(t, l, "D", 0)}
	// B served a request and idles again: it is now the newest idle.
	l.connState(p[1], http.StateActive)
	l.connState(p[1], http.StateIdle)
	mustAdmit(t, l, "E", 0) // the pool is full: A, idle the longest, goes
	mustAdmit(t, l, "F", 0) // then C (B idles since later)
	got := []bool{closed(p[0]), closed(p[1]), closed(p[2]), closed(p[3])}
	if diff := cmp.Diff([]bool{true, false, true, false}, got); diff != "" {
		t.Errorf("closed A..D (-want +got):\n%s", diff)
	}
	for _, tc := range l.waitingConns() {
		l.connState(tc, http.StateActive)
	}
	mustRefuse(t, l, "G", 0, "unauthenticated_limit")
	want := map[string]int{"node/evicted": 2, "node/unauthenticated_limit": 1}
	if diff := cmp.Diff(want, fc.get()); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
}

func TestLimitListenerPromotion(t *testing.T) {
	lim := connLimits{total: 5, perPeer: 2, unauth: 3, unauthPerPeer: 3, unauthIdle: 5 * time.Second}
	l, fc := newFakeListener("node", lim)
	n1, n2, n3 := mustAdmit(t, l, "lo", 0), mustAdmit(t, l, "lo", 0), mustAdmit(t, l, "lo", 0)
	// Until it shows the key a connection's read deadlines are cut to
	// the idle time; after, they are its own.
	for _, d := range []time.Time{{}, testT0.Add(time.Hour)} {
		_ = n1.SetReadDeadline(d)
		if got := n1.Conn.(*fakeConn).readDeadline(); !got.Equal(testT0.Add(5 * time.Second)) {
			t.Errorf("unauthenticated: SetReadDeadline(%v) set %v, want %v", d, got, testT0.Add(5*time.Second))
		}
	}
	for _, tc := range []*trackedConn{n1, n2} {
		if err := l.promote(tc); err != nil {
			t.Fatal(err)
		}
	}
	_ = n1.SetReadDeadline(time.Time{})
	if got := n1.Conn.(*fakeConn).readDeadline(); !got.IsZero() {
		t.Errorf("authenticated: read deadline %v, want none", got)
	}
	// A third keyed connection from the same address is over the cap.
	if err := l.promote(n3); !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "too many connections from lo (2 open with the cluster key") {
		t.Fatalf("promote over the cap: %v", err)
	}
	if auth, unauth := l.counts(); auth != 2 || unauth != 1 {
		t.Fatalf("counts = %d, %d; want 2, 1", auth, unauth)
	}
	// A flood from the same address takes the pool, never the nodes'
	// connections; at the total (5) idle pool connections make room.
	for range 4 {
		mustAdmit(t, l, "lo", 0)
	}
	mustAdmit(t, l, "x", 0)
	if closed(n1) || closed(n2) || !closed(n3) {
		t.Errorf("closed n1 n2 n3 = %v %v %v, want n3 only", closed(n1), closed(n2), closed(n3))
	}
	if auth, unauth := l.counts(); auth != 2 || unauth != 3 {
		t.Fatalf("counts = %d, %d; want 2, 3", auth, unauth)
	}
	for _, tc := range l.waitingConns() {
		l.connState(tc, http.StateActive)
	}
	mustRefuse(t, l, "y", 0, "unauthenticated_limit")
	n1.Close()
	if auth, _ := l.counts(); auth != 1 {
		t.Errorf("after a node's close: %d authenticated, want 1", auth)
	}
	want := map[string]int{"node/peer_limit": 1, "node/evicted": 3, "node/unauthenticated_limit": 1}
	if diff := cmp.Diff(want, fc.get()); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
}

func TestLimitListenerTotal(t *testing.T) {
	// Room for 4: the pool (3) is not full, but the listener is.
	l, fc := newFakeListener("node", connLimits{total: 4, perPeer: 4, unauth: 3, unauthPerPeer: 3, unauthIdle: time.Second})
	a, b := mustAdmit(t, l, "lo", 0), mustAdmit(t, l, "lo", 0)
	mustAdmit(t, l, "lo", 0)
	for _, tc := range []*trackedConn{a, b} {
		if err := l.promote(tc); err != nil {
			t.Fatal(err)
		}
	}
	mustAdmit(t, l, "lo", 0) // 4 open, 2 in the pool
	mustAdmit(t, l, "lo", 0) // the total: the oldest idle pool connection goes
	for _, tc := range l.waitingConns() {
		l.connState(tc, http.StateActive)
	}
	mustRefuse(t, l, "lo", 0, "limit")
	want := map[string]int{"node/evicted": 1, "node/limit": 1}
	if diff := cmp.Diff(want, fc.get()); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
}

// waitingConns lists the unauthenticated pool, idle the longest first.
func (l *limitListener) waitingConns() []*trackedConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*trackedConn
	for e := l.waiting.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*trackedConn))
	}
	return out
}

// chanListener hands out the connections sent on it.
type chanListener struct{ c chan net.Conn }

func (l chanListener) Accept() (net.Conn, error) {
	c, ok := <-l.c
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (l chanListener) Close() error   { return nil }
func (l chanListener) Addr() net.Addr { return &net.TCPAddr{} }

func TestLimitListenerAccept(t *testing.T) {
	in := chanListener{c: make(chan net.Conn, 4)}
	fl, fc := newFakeListener("socket", connLimits{total: 10, perPeer: 1})
	l := newLimitListener(in, "socket", fl.lim, fc, fl.log)
	l.identify = fl.identify
	conns := []*fakeConn{{peer: "uid 1"}, {peer: "uid 1"}, {peer: "uid 1"}, {peer: "uid 2"}}
	for _, c := range conns {
		in.c <- c
	}
	close(in.c)
	var got []net.Conn
	for {
		c, err := l.Accept()
		if err != nil {
			break
		}
		got = append(got, c.(*trackedConn).Conn)
	}
	if len(got) != 2 || got[0] != conns[0] || got[1] != conns[3] {
		t.Fatalf("accepted %v, want the first of uid 1 and uid 2's", got)
	}
	if conns[0].isClosed() || !conns[1].isClosed() || !conns[2].isClosed() || conns[3].isClosed() {
		t.Errorf("closed: %v %v %v %v, want the second and third", conns[0].isClosed(), conns[1].isClosed(), conns[2].isClosed(), conns[3].isClosed())
	}
	if conns[1].written.Len() != 0 {
		t.Errorf("a listener that does not answer wrote %q", conns[1].written.String())
	}
	if got := fc.get()["socket/peer_limit"]; got != 2 {
		t.Errorf("peer_limit refusals = %d, want 2", got)
	}
}

func TestRefusalLogRateLimit(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	r := newRefusalLog(log, 10*time.Second, "refused connections")
	for i := range 5 { // one line, then silence within the interval
		r.note(testT0.Add(time.Duration(i)*time.Second), "node", "127.0.0.1", "unauthenticated_peer_limit", "full")
	}
	r.note(testT0.Add(time.Second), "node", "10.0.0.2", "limit", "full") // another peer: its own line
	r.note(testT0.Add(10*time.Second), "node", "127.0.0.1", "unauthenticated_peer_limit", "full")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=WARN msg="refused connections" listener=node peer=127.0.0.1 reason=unauthenticated_peer_limit count=1 detail=full next_log_in=10s`,
		`level=WARN msg="refused connections" listener=node peer=10.0.0.2 reason=limit count=1 detail=full next_log_in=10s`,
		`level=WARN msg="refused connections" listener=node peer=127.0.0.1 reason=unauthenticated_peer_limit count=5 detail=full next_log_in=10s`,
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	// Beyond maxRefusalPeers peers within an interval, new ones share a line.
	buf.Reset()
	r = newRefusalLog(log, 10*time.Second, "refused connections")
	for i := range maxRefusalPeers + 3 {
		r.note(testT0, "node", fmt.Sprintf("10.1.%d.%d", i/256, i%256), "limit", "full")
	}
	if n := strings.Count(buf.String(), "\n"); n != maxRefusalPeers+1 {
		t.Errorf("%d lines for %d peers, want %d", n, maxRefusalPeers+3, maxRefusalPeers+1)
	}
	if !strings.Contains(buf.String(), `peer="(other peers)"`) {
		t.Error("no shared line for the peers past the bound")
	}
}

func TestFitConnLimits(t *testing.T) {
	sock := connLimits{total: 4096, perPeer: 256, reserve: 64}
	node := connLimits{total: 4096, perPeer: 256, unauth: 256, unauthPerPeer: 64, unauthIdle: time.Second}
	tests := []struct {
		name       string
		nofile     uint64
		wantLower  bool
		wantTotals []int
	}{
		{name: "room", nofile: 20000, wantTotals: []int{4096, 4096}},
		{name: "unknown", nofile: 0, wantTotals: []int{4096, 4096}},
		{name: "1024", nofile: 1024, wantLower: true, wantTotals: []int{384, 384}},
		{name: "tiny", nofile: 80, wantLower: true, wantTotals: []int{8, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, n := sock, node
			if got := fitConnLimits([]*connLimits{&s, &n}, tt.nofile); got != tt.wantLower {
				t.Errorf("lowered = %v, want %v", got, tt.wantLower)
			}
			if diff := cmp.Diff(tt.wantTotals, []int{s.total, n.total}); diff != "" {
				t.Errorf("totals (-want +got):\n%s", diff)
			}
			if tt.nofile > 0 && uint64(s.total+n.total) > tt.nofile*3/4 {
				t.Errorf("totals %d+%d exceed 3/4 of %d", s.total, n.total, tt.nofile)
			}
			for _, l := range []connLimits{s, n} {
				if l.perPeer < 1 || l.perPeer > l.total || l.reserve >= l.total ||
					l.unauth > 0 && (l.unauth >= l.total && l.total > 1 || l.unauthPerPeer < 1 || l.unauthPerPeer > l.unauth) {
					t.Errorf("inconsistent limits %+v", l)
				}
			}
		})
	}
}

// addrConn is a connection from a given remote address.
type addrConn struct {
	fakeConn
	remote net.Addr
}

func (c *addrConn) RemoteAddr() net.Addr { return c.remote }

func TestIPPeer(t *testing.T) {
	tests := []struct {
		name   string
		remote net.Addr
		want   string
	}{
		{name: "ipv4", remote: &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 40000}, want: "10.1.2.3"},
		{name: "ipv4 in ipv6", remote: &net.TCPAddr{IP: net.ParseIP("::ffff:10.1.2.3"), Port: 40000}, want: "10.1.2.3"},
		{name: "ipv6 by /64", remote: &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa::1"), Port: 40000}, want: "2001:db8:1:2::/64"},
		{name: "same /64", remote: &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:bbbb::9"), Port: 1}, want: "2001:db8:1:2::/64"},
		{name: "loopback", remote: &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 1}, want: "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ipPeer(&addrConn{remote: tt.remote}).key; got != tt.want {
				t.Errorf("ipPeer(%v) = %q, want %q", tt.remote, got, tt.want)
			}
		})
	}
}
