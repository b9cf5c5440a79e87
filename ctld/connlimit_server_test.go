package ctld

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/gres"
)

// served is a controller serving its real listeners (Server.Run).
type served struct {
	h      *harness
	socket string
	addr   string // node_addr
}

// serve runs a controller with testConfig plus extra YAML on a socket
// other users can reach and a free loopback port, until the test ends.
func serve(t *testing.T, extra string) *served {
	t.Helper()
	dir, err := os.MkdirTemp("", "tide-ctld-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755) // other uids connect in some tests
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	sock := filepath.Join(dir, "ctld.sock")
	cfg := strings.Replace(strings.Replace(testConfig, "socket: /unused.sock", "socket: "+sock, 1),
		"node_addr: 127.0.0.1:0", "node_addr: "+addr, 1) + extra
	h := newHarnessWith(t, cfg)
	runUntilCleanup(t, h.s, sock)
	return &served{h: h, socket: sock, addr: addr}
}

// runUntilCleanup runs s (its listeners and loop) until the test ends
// and waits until it answers on its socket sock.
func runUntilCleanup(tb testing.TB, s *Server, sock string) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
	})
	c := client.NewUnix(sock)
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := c.Cluster(context.Background()); err == nil {
			break
		} else if time.Now().After(deadline) {
			tb.Fatalf("controller does not answer: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// listener returns the running controller's listener called name.
func (sv *served) listener(t *testing.T, name string) *limitListener {
	t.Helper()
	sv.h.s.metrics.conns.mu.Lock()
	defer sv.h.s.metrics.conns.mu.Unlock()
	for _, l := range sv.h.s.metrics.conns.listeners {
		if l.name == name {
			return l
		}
	}
	t.Fatalf("no listener %s", name)
	return nil
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func (sv *served) refused(listener, reason string) int {
	return int(counterValue(sv.h.s.metrics.connRefused.WithLabelValues(listener, reason)))
}

func (sv *served) evicted(listener string) int {
	return int(counterValue(sv.h.s.metrics.connEvicted.WithLabelValues(listener)))
}

// nodeClient registers node over TCP with the cluster key.
func (sv *served) nodeClient(t *testing.T, node string) *client.Client {
	t.Helper()
	c := client.NewTCP(sv.addr, "k")
	t.Cleanup(c.Close)
	gpus, _ := gres.Fake(node, gres.FakeConfig{Count: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Register(ctx, api.NodeRegistration{Name: node, CPUs: 8, MemoryMB: 64 * 1024, GPUs: gpus}); err != nil {
		t.Fatalf("register %s: %v", node, err)
	}
	return c
}

func TestFloodOfIdleTCPConnectionsSparesNodes(t *testing.T) {
	sv := serve(t, `
limits: {connections: 64, connections_per_peer: 8, operator_reserve: 4, unauthenticated: 16, unauthenticated_per_peer: 8, unauthenticated_timeout: 1m}
`)
	// A node holds its connection before the flood.
	n1 := sv.nodeClient(t, "gpu01")
	const flood = 300
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range flood {
		c, err := net.Dial("tcp", sv.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	node := sv.listener(t, "node")
	waitFor(t, "the flood to be accepted", func() bool { return sv.evicted("node") >= flood-8 })
	if _, unauth := node.counts(); unauth > 8 {
		t.Errorf("%d connections without the key open, want at most 8 (the per-peer cap)", unauth)
	}
	// The node's own connection still answers, and a node that
	// connects anew during the flood (from the flood's address) gets in.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n1.Sync(ctx, api.NodeSyncRequest{Name: "gpu01", WaitMS: 200}); err != nil {
		t.Fatalf("sync of a node connected before the flood: %v", err)
	}
	n2 := sv.nodeClient(t, "gpu02")
	if _, err := n2.Sync(ctx, api.NodeSyncRequest{Name: "gpu02"}); err != nil {
		t.Fatalf("sync of a node connected during the flood: %v", err)
	}
	if auth, _ := node.counts(); auth != 2 {
		t.Errorf("%d connections with the key, want 2 (one per node)", auth)
	}
	// Local clients never noticed.
	nl, err := client.NewUnix(sv.socket).Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nl.Nodes {
		if n.State != api.NodeIdle {
			t.Errorf("node %s is %s, want IDLE", n.Name, n.State)
		}
	}
}

// dialAs runs f on a thread whose credentials are uid's: connections it
// makes to a unix socket carry them (SO_PEERCRED is the connecting
// thread's). The thread is dropped afterwards (it stays locked), so the
// test process keeps its own credentials.
func dialAs(t *testing.T, uid uint32, f func()) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to connect as other users")
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			errc <- fmt.Errorf("setresgid: %w", e)
			return
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			errc <- fmt.Errorf("setresuid: %w", e)
			return
		}
		f()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// rawUnixDial connects to path from the calling thread.
func rawUnixDial(path string) (net.Conn, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "ctld.sock")
	defer f.Close()
	return net.FileConn(f)
}

// floodAs opens n idle socket connections as uid.
func (sv *served) floodAs(t *testing.T, uid uint32, n int) {
	t.Helper()
	var conns []net.Conn
	var err error
	dialAs(t, uid, func() {
		for range n {
			var c net.Conn
			if c, err = rawUnixDial(sv.socket); err != nil {
				return
			}
			conns = append(conns, c)
		}
	})
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	if err != nil {
		t.Fatalf("connect as uid %d: %v", uid, err)
	}
}

func TestSocketCapsPerUserWithOperatorReserve(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to connect as other users")
	}
	sv := serve(t, `
limits: {connections: 24, connections_per_peer: 8, operator_reserve: 4, unauthenticated: 8, unauthenticated_per_peer: 8}
`)
	sock := sv.listener(t, "socket")
	open := func() int { n, _ := sock.counts(); return n }
	// One user floods: 8 connections stay, the rest are refused.
	sv.floodAs(t, 65534, 300)
	waitFor(t, "the flood to be refused", func() bool { return sv.refused("socket", "peer_limit") == 300-8 })
	// That user is told why, through the real client.
	var err error
	dialAs(t, 65534, func() {
		c := client.NewUnix(sv.socket)
		defer c.Close()
		_, err = c.Cluster(context.Background())
	})
	if !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "too many connections from uid 65534 (8 open, at most 8 per user)") {
		t.Errorf("client over its cap: %v", err)
	}
	// Another user still gets answers.
	dialAs(t, 65533, func() {
		c := client.NewUnix(sv.socket)
		defer c.Close()
		_, err = c.Nodes(context.Background())
	})
	if err != nil {
		t.Errorf("another user during the flood: %v", err)
	}
	// Two more users fill the ordinary share (20 of 24), once the
	// clients above are gone...
	waitFor(t, "the flood's 8 connections alone", func() bool { return open() == 8 })
	sv.floodAs(t, 65533, 8)
	sv.floodAs(t, 65532, 4)
	waitFor(t, "20 connections", func() bool { return open() == 20 })
	// ...then a fifth user is refused, and root still gets in.
	dialAs(t, 65531, func() {
		c := client.NewUnix(sv.socket)
		defer c.Close()
		_, err = c.Nodes(context.Background())
	})
	if !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "reserved for operators") {
		t.Errorf("ordinary user at the reserve: %v", err)
	}
	root := client.NewUnix(sv.socket)
	defer root.Close()
	if _, err := root.Nodes(context.Background()); err != nil {
		t.Errorf("root at the reserve: %v", err)
	}
}

func TestLongPollAndProfileOutlastWriteTimeout(t *testing.T) {
	sv := serve(t, `
limits: {write_timeout: 200ms, unauthenticated_timeout: 300ms}
`)
	n := sv.nodeClient(t, "gpu01")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Nothing to say: the controller holds the poll its full second,
	// longer than the write timeout and the unauthenticated idle time.
	if _, err := n.Sync(ctx, api.NodeSyncRequest{Name: "gpu01", WaitMS: 1000}); err != nil {
		t.Fatalf("long poll: %v", err)
	}
	if held := counterValue(sv.h.s.metrics.syncs.WithLabelValues("held")); held != 1 {
		t.Errorf("%v syncs answered after being held, want 1 (the poll was cut short)", held)
	}
	// A CPU profile of a second, as root over the socket.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sv.socket)
	}}}
	defer hc.CloseIdleConnections()
	if os.Getuid() == 0 || uint32(os.Getuid()) == sv.h.s.self {
		resp, err := hc.Get("http://tidectld/debug/pprof/profile?seconds=1")
		if err != nil {
			t.Fatalf("profile: %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(body) == 0 {
			t.Errorf("profile: %d, %d bytes, %v: %.200s", resp.StatusCode, len(body), err, body)
		}
	}
	// A TCP connection that never shows the key is closed after its
	// idle time.
	c, err := net.Dial("tcp", sv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection without the key: read %v, want EOF (closed by the controller)", err)
	}
}

func TestSubmitBodyOverLimitOverSocket(t *testing.T) {
	sv := serve(t, "allow_root_jobs: true\n")
	limit, err := sv.h.s.cl.SubmitBodyLimit()
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewUnix(sv.socket)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big := "#!/bin/sh\n" + strings.Repeat("# padding\n", 10<<20) // 100 MiB
	_, err = c.Submit(ctx, api.SubmitRequest{Spec: api.JobSpec{Script: big, WorkDir: "/tmp"}})
	want := fmt.Sprintf("more than the %d allowed", limit)
	if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "Batch job submission failed: request body is 1") || !strings.Contains(err.Error(), want) {
		t.Fatalf("100 MiB submission: %v; want invalid argument naming its size and %q", err, want)
	}
	// The same client submits an ordinary job (the fast path reads it).
	resp, err := c.Submit(ctx, api.SubmitRequest{Spec: api.JobSpec{Script: "#!/bin/sh\ntrue\n", WorkDir: "/tmp"}})
	if err != nil || resp.JobID == 0 {
		t.Fatalf("ordinary submission after the refusal: %+v, %v", resp, err)
	}
}

func TestBodyLimitWithoutLength(t *testing.T) {
	h := newHarness(t)
	// A chunked body (no Content-Length) is cut at the limit and
	// answered 413 when the handler reads past it.
	body := strings.NewReader(`{"job_ids": [` + strings.Repeat("1,", smallBody) + `1]}`)
	r := httptest.NewRequest("POST", "/api/v1/jobs/cancel", io.NopCloser(body))
	r.ContentLength = -1
	w := httptest.NewRecorder()
	h.s.localHandler().ServeHTTP(w, r)
	want := fmt.Sprintf(`Job cancellation failed: request body is more than the %d bytes allowed`, smallBody)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), want) || !strings.Contains(w.Body.String(), `"invalid_argument"`) {
		t.Errorf("chunked body over the limit: %d %s; want 413 with %q", w.Code, w.Body.String(), want)
	}
	// A declared length over the limit is refused before reading.
	r = httptest.NewRequest("POST", "/api/v1/node/sync", strings.NewReader("{}"))
	r.ContentLength = nodeBody + 1
	r.Header.Set(client.KeyHeader, "k")
	w = httptest.NewRecorder()
	h.s.nodeHandler().ServeHTTP(w, r)
	want = fmt.Sprintf("Node sync failed: request body is %d bytes, more than the %d allowed", nodeBody+1, nodeBody)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), want) || w.Header().Get("Connection") != "close" {
		t.Errorf("declared length over the limit: %d %v %s; want 413, Connection: close, %q", w.Code, w.Header(), w.Body.String(), want)
	}
}

func TestBodyLimitOfEndpointsWithoutOne(t *testing.T) {
	h := newHarness(t)
	// An endpoint that takes no body refuses a large one unread.
	r := httptest.NewRequest("GET", "/api/v1/jobs", strings.NewReader("{}"))
	r.ContentLength = 1 << 40
	w := httptest.NewRecorder()
	h.s.localHandler().ServeHTTP(w, r)
	want := fmt.Sprintf("Request failed: request body is %d bytes, more than the %d allowed", int64(1<<40), smallBody)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), want) {
		t.Errorf("huge body on a GET: %d %s; want 413 %q", w.Code, w.Body.String(), want)
	}
	// Within limits, requests pass.
	w = httptest.NewRecorder()
	h.s.localHandler().ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/jobs", nil))
	if w.Code != 200 {
		t.Errorf("listing: %d %s", w.Code, w.Body.String())
	}
}

func TestConcurrentScrapesCollectOnce(t *testing.T) {
	h := newHarness(t)
	h.s.metrics.cache.now = h.clock.now
	h.s.metrics.scrapes.now = h.clock.now
	handler := h.s.localHandler()
	scrape := func() string {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		if w.Code != 200 {
			t.Errorf("scrape: %d %s", w.Code, w.Body.String())
		}
		return w.Body.String()
	}
	var wg sync.WaitGroup
	bodies := make([]string, 16)
	for i := range bodies {
		wg.Go(func() { bodies[i] = scrape() })
	}
	wg.Wait()
	for i, b := range bodies {
		if !strings.Contains(b, `tide_nodes{state=`) {
			t.Errorf("scrape %d lacks the state gauges:\n%.300s", i, b)
		}
	}
	if n := h.s.metrics.cache.gathered; n != 1 {
		t.Errorf("16 concurrent scrapes gathered %d times, want 1", n)
	}
	h.clock.add(999 * time.Millisecond)
	scrape()
	h.clock.add(time.Millisecond)
	scrape()
	if n := h.s.metrics.cache.gathered; n != 2 {
		t.Errorf("gathered %d times after a second, want 2", n)
	}
}

// TestRefusedConnectionAnswerIsReadable checks the client side of an
// early answer: the controller wrote a 503 and closed before reading
// the request.
func TestRefusedConnectionAnswerIsReadable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write(busyAnswer("too many connections from uid 7 (1 open, at most 1 per user); retry later"))
			c.Close()
		}
	}()
	// Requests with a large body make the client's write fail once the
	// controller is gone; small ones may be written first. Both read the
	// answer.
	for _, size := range []int{0, 8 << 20} {
		c := client.NewUnix(path)
		_, err := c.Submit(context.Background(), api.SubmitRequest{Spec: api.JobSpec{Script: strings.Repeat("x", size)}})
		if !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "tidectld: too many connections from uid 7") {
			t.Errorf("body of %d bytes: %v", size, err)
		}
		c.Close()
	}
}

func TestMetricsAddr(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := l.Addr().String()
	l.Close()
	sv := serve(t, "metrics_addr: "+maddr+"\n")
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + maddr + "/metrics"); code != 200 || !strings.Contains(body, `tide_connections{auth="yes",listener="socket"}`) {
		t.Errorf("metrics_addr /metrics: %d %.300s", code, body)
	}
	// node_addr then serves key holders only.
	if code, body := get("http://" + sv.addr + "/metrics"); code != 401 || !strings.Contains(body, "cluster key required") {
		t.Errorf("node_addr /metrics with metrics_addr set: %d %s", code, body)
	}
}
