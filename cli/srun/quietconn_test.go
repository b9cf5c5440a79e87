package srun

import (
	"bufio"
	"errors"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// resetConn is a client connection whose peer reset it, the reset
// already read: every write now fails with EPIPE.
func resetConn(t *testing.T) *net.TCPConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	_ = s.(*net.TCPConn).SetLinger(0) // close with a reset
	s.Close()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after the peer's reset: %v, want ECONNRESET", err)
	}
	return c.(*net.TCPConn)
}

// sigpipeRaised runs write on a thread of its own with SIGPIPE blocked
// and reports whether the kernel raised SIGPIPE for it (the signal then
// waits in the thread's pending set), with write's error.
func sigpipeRaised(t *testing.T, write func() error) (bool, error) {
	t.Helper()
	type result struct {
		raised    bool
		werr, err error
	}
	ch := make(chan result, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, its mask
		// and pending signal with it.
		runtime.LockOSThread()
		var set unix.Sigset_t
		set.Val[0] = 1 << (uint(syscall.SIGPIPE) - 1)
		if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
			ch <- result{err: err}
			return
		}
		werr := write()
		pending, err := threadPending()
		ch <- result{raised: pending&(1<<(uint(syscall.SIGPIPE)-1)) != 0, werr: werr, err: err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.raised, r.werr
}

// threadPending is the calling thread's set of pending signals.
func threadPending() (uint64, error) {
	f, err := os.Open("/proc/thread-self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "SigPnd:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no SigPnd in /proc/thread-self/status")
}

// TestQuietConnRaisesNoSIGPIPE: srun takes SIGPIPE for the loss of its
// own output and kills the step; a write to a node connection the node
// reset must fail without raising it, as a plain TCP connection's does.
func TestQuietConnRaisesNoSIGPIPE(t *testing.T) {
	plain := resetConn(t)
	raised, err := sigpipeRaised(t, func() error { _, err := plain.Write([]byte("x")); return err })
	if !raised || !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("plain connection: SIGPIPE %v, error %v; want SIGPIPE and EPIPE (else this test cannot tell)", raised, err)
	}
	c, err := quietWrites(resetConn(t))
	if err != nil {
		t.Fatal(err)
	}
	raised, err = sigpipeRaised(t, func() error { _, err := c.Write([]byte("x")); return err })
	if raised || !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("quietConn: SIGPIPE %v, error %v; want no SIGPIPE and EPIPE", raised, err)
	}
}

// TestQuietConnWrites: a quietConn carries what is written, in order,
// a write larger than the socket's buffer included.
func TestQuietConnWrites(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := quietWrites(raw)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, 0, len(want))
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			b = append(b, buf[:n]...)
			if err != nil {
				got <- b
				return
			}
		}
	}()
	if n, err := c.Write(want); n != len(want) || err != nil {
		t.Fatalf("wrote %d of %d: %v", n, len(want), err)
	}
	c.Close()
	if b := <-got; string(b) != string(want) {
		t.Fatalf("read %d bytes, not what was written", len(b))
	}
}
