package ctld

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Connection hygiene. Every listener of the controller hands its
// connections out through a limitListener, which caps them in all and
// per peer before the HTTP server spends a goroutine on them: 20,000
// idle connections used to exhaust the controller's file descriptors,
// and then no squeue got through on any listener.
//
// A peer is the connecting uid on the unix socket (the kernel's
// SO_PEERCRED, known at accept) and the remote IP address on TCP (one
// /64 for IPv6, which a single host usually owns whole). On TCP the
// peer proves nothing: on a development cluster every node and any
// local flood come from 127.0.0.1. So a TCP connection starts
// unauthenticated, in a pool of its own with small caps and a short
// idle time (sshd's MaxStartups), and leaves it with its first request
// that carries the cluster key. When that pool is full, the connection
// idle in it the longest is closed for the new one: a flood of idle
// connections can delay a node's reconnect by no more than the moment
// its request takes to arrive, and cannot touch the connections nodes
// already hold.

// connLimits are one listener's caps (config.LimitsConfig, after the
// controller fitted them to its file descriptor limit).
type connLimits struct {
	// total caps the listener's open connections; perPeer those of one
	// peer (on TCP: among connections that showed the key).
	total, perPeer int
	// reserve slots of total are kept for privileged peers (root, the
	// controller's user, operators) on the unix socket.
	reserve int
	// unauth > 0 makes connections start unauthenticated (TCP): at most
	// unauth of them, unauthPerPeer per peer, each idle at most
	// unauthIdle.
	unauth, unauthPerPeer int
	unauthIdle            time.Duration
}

// connPeer is who is at the other end of a connection.
type connPeer struct {
	// key names the peer in the per-peer counts and in logs: "uid
	// 1000", "10.1.2.3" or "2001:db8::/64".
	key string
	// cred is the socket peer's credentials (hasCred false on TCP, or
	// when the kernel would not tell).
	cred    syscall.Ucred
	hasCred bool
}

// refusal is why a connection was not admitted (or promoted).
type refusal struct {
	// reason is the metric label: peer_limit, limit, reserve,
	// unauthenticated_peer_limit, unauthenticated_limit.
	reason string
	// msg is what the peer (on the socket) and the log are told.
	msg string
}

// connCounters receive the listener's refusals and evictions
// (Prometheus counters in the controller, fakes in tests).
type connCounters interface {
	refused(listener, reason string)
	evicted(listener string)
}

// limitListener admits connections within connLimits and tracks them
// until they close. It is safe for concurrent use.
type limitListener struct {
	net.Listener
	// name is the listener in metrics and logs: socket, node, metrics.
	name string
	lim  connLimits
	// identify tells a new connection's peer.
	identify func(net.Conn) connPeer
	// privileged reports whether a socket peer may use the operator
	// reserve; it may look up user names, so it is called only once
	// the reserve is reached, and never under mu.
	privileged func(connPeer) bool
	// answer makes a refused connection read a 503 naming the limit
	// before it is closed (the socket: users should see why their
	// squeue failed); else it is only closed (TCP: an attacker gets no
	// bytes, nodes retry).
	answer bool
	// proof names what promotes a TCP connection, in refusals and logs:
	// "the cluster key" (node_addr) or "credentials" (api_addr).
	proof   string
	now     func() time.Time
	counter connCounters
	log     *refusalLog

	mu     sync.Mutex
	open   int
	peers  map[string]int // admitted (socket) or authenticated (TCP)
	unauth map[string]int // TCP: not yet authenticated, per peer
	// waiting holds the unauthenticated connections, the one idle the
	// longest first.
	waiting list.List
}

// newLimitListener wraps l. identify and privileged must be set for
// the socket; on TCP identify defaults to the remote IP address.
func newLimitListener(l net.Listener, name string, lim connLimits, counter connCounters, log *refusalLog) *limitListener {
	return &limitListener{Listener: l, name: name, lim: lim, identify: ipPeer, privileged: func(connPeer) bool { return false },
		proof: "the cluster key", now: time.Now, counter: counter, log: log, peers: map[string]int{}, unauth: map[string]int{}}
}

// Accept returns the next connection within the limits. Connections
// over them are refused here, one cheap close (and, on the socket, one
// short write) each, without reaching the HTTP server.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		p := l.identify(c)
		tc, ref := l.admit(c, p)
		if tc != nil {
			return tc, nil
		}
		l.refuse(c, p.key, ref)
	}
}

// admit decides about a new connection of peer p: a tracked
// connection, or nil and why not.
func (l *limitListener) admit(c net.Conn, p connPeer) (*trackedConn, refusal) {
	if l.lim.unauth > 0 {
		return l.admitUnauth(c, p)
	}
	priv := false
	for try := 0; ; try++ {
		l.mu.Lock()
		n, open := l.peers[p.key], l.open
		switch {
		case n >= l.lim.perPeer:
			l.mu.Unlock()
			return nil, refusal{"peer_limit", fmt.Sprintf("too many connections from %s (%d open, at most %d per user); retry later", p.key, n, l.lim.perPeer)}
		case open >= l.lim.total:
			l.mu.Unlock()
			return nil, refusal{"limit", fmt.Sprintf("the controller has %d connections open on its socket, its limit; retry later", open)}
		case open >= l.lim.total-l.lim.reserve && !priv:
			l.mu.Unlock()
			if try == 0 {
				if priv = l.privileged(p); priv {
					continue // counted again: others may have come meanwhile
				}
			}
			return nil, refusal{"reserve", fmt.Sprintf("the controller has %d connections open on its socket; the last %d are reserved for operators; retry later", open, l.lim.reserve)}
		}
		l.open++
		l.peers[p.key]++
		l.mu.Unlock()
		return &trackedConn{Conn: c, l: l, peer: p}, refusal{}
	}
}

// admitUnauth admits a TCP connection into the unauthenticated pool.
// When a cap is reached the connection there idle the longest (of the
// same peer for the per-peer cap) is closed to make room; the new one
// is refused only when every one of them is serving a request.
func (l *limitListener) admitUnauth(c net.Conn, p connPeer) (*trackedConn, refusal) {
	var victims []*trackedConn
	defer func() { // after mu is released: closing takes time
		for _, v := range victims {
			_ = v.Conn.Close()
			l.counter.evicted(l.name)
			l.log.note(l.now(), l.name, v.peer.key, "evicted", "closed the connection idle the longest without "+l.proof+", for a new one")
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	for step := 0; step < 3; step++ {
		var peer string // whose connection may go: "" = anyone's
		var ref refusal
		switch n := l.unauth[p.key]; {
		case step == 0 && n >= l.lim.unauthPerPeer:
			peer = p.key
			ref = refusal{"unauthenticated_peer_limit", fmt.Sprintf("%d connections from %s have not shown %s, the limit per peer, and none is idle", n, p.key, l.proof)}
		case step == 1 && l.waiting.Len() >= l.lim.unauth:
			ref = refusal{"unauthenticated_limit", fmt.Sprintf("%d connections have not shown %s, the limit, and none is idle", l.waiting.Len(), l.proof)}
		case step == 2 && l.open >= l.lim.total:
			ref = refusal{"limit", fmt.Sprintf("%d connections are open, the limit, and none without %s is idle", l.open, l.proof)}
		default:
			continue
		}
		v := l.oldestIdle(peer)
		if v == nil {
			return nil, ref
		}
		l.releaseLocked(v)
		victims = append(victims, v)
	}
	tc := &trackedConn{Conn: c, l: l, peer: p}
	tc.unauth.Store(true)
	l.open++
	l.unauth[p.key]++
	tc.elem = l.waiting.PushBack(tc)
	_ = c.SetReadDeadline(l.now().Add(l.lim.unauthIdle))
	return tc, refusal{}
}

// oldestIdle is the unauthenticated connection (of peer, or of anyone
// for "") idle the longest, or nil when all of them are serving a
// request. Called with mu held.
func (l *limitListener) oldestIdle(peer string) *trackedConn {
	for e := l.waiting.Front(); e != nil; e = e.Next() {
		tc := e.Value.(*trackedConn)
		if !tc.busy && (peer == "" || tc.peer.key == peer) {
			return tc
		}
	}
	return nil
}

// refuse turns a connection away: counted, logged (rate-limited), and
// on the socket told why.
func (l *limitListener) refuse(c net.Conn, peer string, ref refusal) {
	l.counter.refused(l.name, ref.reason)
	l.log.note(l.now(), l.name, peer, ref.reason, ref.msg)
	if l.answer {
		// A fresh socket's send buffer is empty: this write does not
		// wait (the deadline is a backstop).
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.Write(busyAnswer(ref.msg))
	}
	_ = c.Close()
}

// busyAnswer is a complete 503 answer carrying msg as an API error, for
// a connection refused before any request was read.
func busyAnswer(msg string) []byte {
	_, eb := api.NewErrorBody(api.Errorf(api.ErrUnavailable, "tidectld: %s", msg))
	body, _ := json.Marshal(eb)
	body = append(body, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		len(body), body)
}

// promote moves an unauthenticated connection that made a request with
// the cluster key to the authenticated connections of its peer, within
// the per-peer cap. It is a no-op for connections that are not
// unauthenticated.
func (l *limitListener) promote(tc *trackedConn) error {
	if !tc.unauth.Load() {
		return nil
	}
	l.mu.Lock()
	if tc.released || !tc.unauth.Load() {
		l.mu.Unlock()
		return nil
	}
	if n := l.peers[tc.peer.key]; n >= l.lim.perPeer {
		l.mu.Unlock()
		ref := refusal{"peer_limit", fmt.Sprintf("too many connections from %s (%d open with %s, at most %d per peer); retry later", tc.peer.key, n, l.proof, l.lim.perPeer)}
		l.counter.refused(l.name, ref.reason)
		l.log.note(l.now(), l.name, tc.peer.key, ref.reason, ref.msg)
		return api.Errorf(api.ErrUnavailable, "tidectld: %s", ref.msg)
	}
	l.dropUnauthLocked(tc)
	tc.unauth.Store(false)
	l.peers[tc.peer.key]++
	l.mu.Unlock()
	return nil
}

// dropUnauthLocked takes tc out of the unauthenticated pool. Called
// with mu held.
func (l *limitListener) dropUnauthLocked(tc *trackedConn) {
	l.waiting.Remove(tc.elem)
	tc.elem = nil
	if l.unauth[tc.peer.key]--; l.unauth[tc.peer.key] <= 0 {
		delete(l.unauth, tc.peer.key)
	}
}

// release forgets a closed connection (once).
func (l *limitListener) release(tc *trackedConn) {
	l.mu.Lock()
	l.releaseLocked(tc)
	l.mu.Unlock()
}

func (l *limitListener) releaseLocked(tc *trackedConn) {
	if tc.released {
		return
	}
	tc.released = true
	l.open--
	if tc.unauth.Load() {
		l.dropUnauthLocked(tc)
		return
	}
	if l.peers[tc.peer.key]--; l.peers[tc.peer.key] <= 0 {
		delete(l.peers, tc.peer.key)
	}
}

// connState is the http.Server's ConnState hook: it tells which
// connections serve a request (never evicted) and which idle.
func (l *limitListener) connState(c net.Conn, st http.ConnState) {
	tc, ok := unwrapTLS(c).(*trackedConn)
	if !ok {
		return
	}
	switch st {
	case http.StateActive, http.StateIdle:
		l.mu.Lock()
		tc.busy = st == http.StateActive
		if !tc.busy && tc.elem != nil {
			l.waiting.MoveToBack(tc.elem) // idle from now on
		}
		l.mu.Unlock()
	case http.StateClosed, http.StateHijacked:
		l.release(tc)
	}
}

// counts reports the open connections: authenticated (all of them on
// the socket) and not.
func (l *limitListener) counts() (authenticated, unauthenticated int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open - l.waiting.Len(), l.waiting.Len()
}

// trackedConn is a connection a limitListener admitted.
type trackedConn struct {
	net.Conn
	l    *limitListener
	peer connPeer
	// unauth: no request with the cluster key yet; read deadlines are
	// then cut to the listener's unauthIdle.
	unauth atomic.Bool
	// Under l.mu: elem is tc's place in l.waiting while unauthenticated,
	// busy whether it serves a request, released whether it is no
	// longer counted.
	elem     *list.Element
	busy     bool
	released bool
}

// Close closes the connection and stops counting it.
func (c *trackedConn) Close() error {
	c.l.release(c)
	return c.Conn.Close()
}

// SetReadDeadline sets the read deadline, no later than the
// listener's unauthenticated idle time from now while the connection
// has not shown the key: the HTTP server's header, idle and body
// deadlines all pass here.
func (c *trackedConn) SetReadDeadline(t time.Time) error {
	if c.unauth.Load() {
		if lim := c.l.now().Add(c.l.lim.unauthIdle); t.IsZero() || t.After(lim) {
			t = lim
		}
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines, the read one as SetReadDeadline does.
func (c *trackedConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// CloseWrite half-closes the connection where the inner one can: the
// HTTP server does so before closing one whose request body it left
// unread (a 413), so that the client reads the answer rather than a
// reset.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

type connKey struct{}

// connContext puts the connection (and, on the socket, the peer's
// credentials) in every request's context.
func connContext(ctx context.Context, c net.Conn) context.Context {
	tc, ok := unwrapTLS(c).(*trackedConn)
	if !ok {
		return ctx
	}
	ctx = context.WithValue(ctx, connKey{}, tc)
	if tc.peer.hasCred {
		ctx = context.WithValue(ctx, credKey{}, tc.peer.cred)
	}
	return ctx
}

// connOf returns the request's tracked connection, or nil.
func connOf(r *http.Request) *trackedConn {
	tc, _ := r.Context().Value(connKey{}).(*trackedConn)
	return tc
}

// ipPeer names a TCP connection's peer by its IP address; IPv6 peers
// by their /64.
func ipPeer(c net.Conn) connPeer {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return connPeer{key: c.RemoteAddr().String()}
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return connPeer{key: p.String()}
		}
	}
	return connPeer{key: a.String()}
}

// uidPeer names a unix socket connection's peer by its uid.
func uidPeer(c net.Conn) connPeer {
	cred, ok := peerCred(c)
	if !ok {
		return connPeer{key: "unknown uid"}
	}
	return connPeer{key: "uid " + strconv.FormatUint(uint64(cred.Uid), 10), cred: cred, hasCred: true}
}

// refusalLog logs refusals at most once per peer per interval, with the
// number refused since its last line: a flood must not flood the log.
type refusalLog struct {
	log   *slog.Logger
	every time.Duration
	// title is the log message ("refused connections").
	title string

	mu    sync.Mutex
	peers map[string]*refusalEntry
}

type refusalEntry struct {
	last time.Time
	n    int
}

// maxRefusalPeers bounds the peers refusalLog remembers; past it, new
// peers share one line.
const maxRefusalPeers = 1024

func newRefusalLog(log *slog.Logger, every time.Duration, title string) *refusalLog {
	return &refusalLog{log: log, every: every, title: title, peers: map[string]*refusalEntry{}}
}

// note records one refusal of peer and logs it if the peer's interval
// has passed.
func (r *refusalLog) note(now time.Time, listener, peer, reason, msg string) {
	r.mu.Lock()
	e := r.peers[peer]
	if e == nil {
		if len(r.peers) >= maxRefusalPeers {
			for k, old := range r.peers {
				if now.Sub(old.last) >= r.every {
					delete(r.peers, k)
				}
			}
		}
		if len(r.peers) >= maxRefusalPeers {
			peer = "(other peers)"
			e = r.peers[peer]
		}
		if e == nil {
			e = &refusalEntry{}
			r.peers[peer] = e
		}
	}
	e.n++
	if !e.last.IsZero() && now.Sub(e.last) < r.every {
		r.mu.Unlock()
		return
	}
	n := e.n
	e.n, e.last = 0, now
	r.mu.Unlock()
	r.log.Warn(r.title, "listener", listener, "peer", peer, "reason", reason, "count", n,
		"detail", msg, "next_log_in", r.every.String())
}
