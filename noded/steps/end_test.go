package steps

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/stepio"
)

// unreadAtClose is a node's end of a step connection that records how
// many received bytes nobody had read when it was closed: a TCP socket
// closed with unread bytes is aborted with a reset, which can overtake
// the last frames on their way to srun.
type unreadAtClose struct {
	*net.TCPConn
	mu     sync.Mutex
	closed bool
	unread int
}

func (c *unreadAtClose) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.unread = inQueue(c.TCPConn)
	}
	c.mu.Unlock()
	return c.TCPConn.Close()
}

func (c *unreadAtClose) result() (closed bool, unread int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed, c.unread
}

// inQueue is how many received bytes wait in c's socket (-1 when it
// cannot say).
func inQueue(c *net.TCPConn) int {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	_ = raw.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	if err != nil {
		return -1
	}
	return n
}

// awaitQueued blocks until bytes wait unread in c's socket, without
// reading them.
func awaitQueued(t *testing.T, c *net.TCPConn) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Read(func(fd uintptr) bool {
		n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		return err != nil || n > 0
	}); err != nil {
		t.Fatal(err)
	}
}

// tcpPair connects a client to a loopback listener and returns both
// ends, the server's wrapped to record what it left unread.
func tcpPair(t *testing.T) (*unreadAtClose, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return &unreadAtClose{TCPConn: server.(*net.TCPConn)}, client.(*net.TCPConn)
}

// selfSigned is a TLS certificate for "node" and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "node"}, DNSNames: []string{"node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// stepConnPair is a step connection over loopback, plain or TLS as the
// step listener serves it: the node's end, srun's end, and the node's
// socket (under TLS) to watch.
func stepConnPair(t *testing.T, withTLS bool) (node net.Conn, srun net.Conn, sock *unreadAtClose) {
	t.Helper()
	sock, client := tcpPair(t)
	if !withTLS {
		return sock, client, sock
	}
	cert, pool := selfSigned(t)
	sc := tls.Server(sock, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	cc := tls.Client(client, &tls.Config{RootCAs: pool, ServerName: "node", MinVersion: tls.VersionTLS13})
	errc := make(chan error, 1)
	go func() { errc <- sc.Handshake() }()
	if err := cc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return sc, cc, sock
}

// TestEndConnLeavesNothingUnread reproduces the lost exits of srun steps
// under load: srun's last frame (the end of its stdin) reaches the node
// after the node's last read, and closing the socket then would reset
// the connection. endConn must end the stream after every frame it
// wrote, read what srun still sends, and close only once srun closed,
// with nothing unread.
func TestEndConnLeavesNothingUnread(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := "tcp"
		if withTLS {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			node, srun, sock := stepConnPair(t, withTLS)
			w := stepio.NewWriter(node)
			for task := range uint32(8) {
				if err := w.Write(stepio.Frame{Type: stepio.Exit, Task: task, Payload: stepio.ExitPayload(api.ExitStatus{})}); err != nil {
					t.Fatal(err)
				}
			}
			if err := stepio.WriteFrame(srun, stepio.Frame{Type: stepio.StdinEOF, Task: stepio.AllTasks}); err != nil {
				t.Fatal(err)
			}
			// The frame waits in the node's socket, unread, as the node
			// ends the connection.
			awaitQueued(t, sock.TCPConn)
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				endConn(node, nil, time.Minute)
			}()
			exits := 0
			var err error
			for {
				var f stepio.Frame
				if f, err = stepio.ReadFrame(srun); err != nil {
					break
				}
				if f.Type == stepio.Exit {
					exits++
				}
			}
			if exits != 8 || !errors.Is(err, io.EOF) {
				t.Fatalf("srun read %d exits, then %v; want 8 and the end of the stream", exits, err)
			}
			// The node keeps its end until srun closes its own.
			select {
			case <-ended:
				t.Fatal("the node closed the connection before srun did")
			default:
			}
			srun.Close()
			select {
			case <-ended:
			case <-time.After(30 * time.Second):
				t.Fatal("the node did not close after srun did")
			}
			if closed, unread := sock.result(); !closed || unread != 0 {
				t.Fatalf("node socket closed %v with %d bytes unread, want closed with none", closed, unread)
			}
		})
	}
}

// TestEndConnLinger: a srun that never closes its end holds the node's
// connection no longer than the linger.
func TestEndConnLinger(t *testing.T) {
	node, srun, sock := stepConnPair(t, false)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		endConn(node, nil, 50*time.Millisecond)
	}()
	if _, err := stepio.ReadFrame(srun); !errors.Is(err, io.EOF) {
		t.Fatalf("srun read %v, want the end of the stream", err)
	}
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("endConn outlived its linger")
	}
	if closed, _ := sock.result(); !closed {
		t.Fatal("node socket not closed")
	}
}

// TestStepEndsCleanly runs a step whose srun sends the end of its stdin
// and a signal only after the tasks ended (its stdin forwarder and
// signal handler run beside its readers): srun still reads every exit
// and then the end of the stream, the node reads those late frames
// instead of leaving them unread, and it closes only after srun.
func TestStepEndsCleanly(t *testing.T) {
	s := testStepServer(t)
	sock, srun := tcpPair(t)
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.serve(sock)
	}()
	sg := testGrant(t, s.advertised, time.Now().Add(time.Hour), "/bin/sh", "-c", "echo $SLURM_PROCID")
	hf, _ := stepio.JSON(stepio.Hello, 0, stepio.HelloMsg{Grant: sg, StdinMode: stepio.StdinAll})
	if err := stepio.WriteFrame(srun, hf); err != nil {
		t.Fatal(err)
	}
	if f, err := stepio.ReadFrame(srun); err != nil || f.Type != stepio.Ready {
		t.Fatalf("first frame %v %q, %v", f.Type, f.Payload, err)
	}
	out, exits := "", 0
	for exits < 2 {
		f, err := stepio.ReadFrame(srun)
		if err != nil {
			t.Fatalf("after %d exits: %v", exits, err)
		}
		switch f.Type {
		case stepio.Stdout:
			out += string(f.Payload)
		case stepio.Exit:
			exits++
		}
	}
	for _, f := range []stepio.Frame{{Type: stepio.StdinEOF, Task: stepio.AllTasks},
		{Type: stepio.Signal, Task: stepio.AllTasks, Payload: stepio.SignalPayload(int(unix.SIGTERM))}} {
		if err := stepio.WriteFrame(srun, f); err != nil {
			t.Fatal(err)
		}
	}
	if f, err := stepio.ReadFrame(srun); !errors.Is(err, io.EOF) {
		t.Fatalf("after the exits: frame %v %q, %v; want the end of the stream", f.Type, f.Payload, err)
	}
	if out != "0\n1\n" && out != "1\n0\n" {
		t.Errorf("output %q", out)
	}
	select {
	case <-served:
		t.Fatal("the node closed the connection before srun did")
	default:
	}
	srun.Close()
	select {
	case <-served:
	case <-time.After(30 * time.Second):
		t.Fatal("the node did not end the connection after srun closed")
	}
	if closed, unread := sock.result(); !closed || unread != 0 {
		t.Fatalf("node socket closed %v with %d bytes unread, want closed with none", closed, unread)
	}
}
