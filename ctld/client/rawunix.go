package client

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// rawUnixConn is a blocking unix stream socket used without Go's network
// poller. Every sbatch and squeue is a fresh process that opens one
// connection, writes one request and reads one answer: setting up the
// poller (an epoll instance, registering the socket) and parking the
// only goroutine on it cost each of them about 3 % of its CPU. Blocking
// calls do the same here. Deadlines become the socket's receive and send
// timeouts; a deadline in the past (how the transport cancels a request)
// shuts the socket down, which wakes a blocked read.
type rawUnixConn struct {
	addr *net.UnixAddr

	mu     sync.Mutex
	fd     int
	closed bool
}

// dialRawUnix connects to the unix socket at path.
func dialRawUnix(ctx context.Context, path string) (net.Conn, error) {
	addr := &net.UnixAddr{Name: path, Net: "unix"}
	fail := func(op string, err error) error {
		return &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: os.NewSyscallError(op, err)}
	}
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: err}
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fail("socket", err)
	}
	c := &rawUnixConn{addr: addr, fd: fd}
	// A connect waits while the controller's listen queue is full: bound
	// it by the context's deadline.
	if dl, ok := ctx.Deadline(); ok {
		if err := c.setTimeout(syscall.SO_SNDTIMEO, dl); err != nil {
			syscall.Close(fd)
			return nil, fail("setsockopt", err)
		}
	}
	for {
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		if err == syscall.EAGAIN {
			return nil, &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: os.ErrDeadlineExceeded}
		}
		return nil, fail("connect", err)
	}
	return c, nil
}

// fdOf returns the descriptor, or an error once the connection is closed.
func (c *rawUnixConn) fdOf() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return -1, net.ErrClosed
	}
	return c.fd, nil
}

func (c *rawUnixConn) opError(op string, err error) error {
	if err == syscall.EAGAIN {
		err = os.ErrDeadlineExceeded
	} else if errno, ok := err.(syscall.Errno); ok {
		err = os.NewSyscallError(op, errno)
	}
	return &net.OpError{Op: op, Net: "unix", Addr: c.addr, Err: err}
}

// Read reads from the socket, waiting in the kernel.
func (c *rawUnixConn) Read(p []byte) (int, error) {
	fd, err := c.fdOf()
	if err != nil {
		return 0, c.opError("read", err)
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := syscall.Read(fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, c.opError("read", err)
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// Write writes all of p (without SIGPIPE if the controller went away).
func (c *rawUnixConn) Write(p []byte) (int, error) {
	fd, err := c.fdOf()
	if err != nil {
		return 0, c.opError("write", err)
	}
	done := 0
	for done < len(p) {
		n, err := syscall.SendmsgN(fd, p[done:], nil, nil, syscall.MSG_NOSIGNAL)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return done, c.opError("write", err)
		}
		done += n
	}
	return done, nil
}

// Close shuts the socket down (waking a blocked read) and closes it.
func (c *rawUnixConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opError("close", net.ErrClosed)
	}
	c.closed = true
	syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
	if err := syscall.Close(c.fd); err != nil {
		return c.opError("close", err)
	}
	return nil
}

func (c *rawUnixConn) LocalAddr() net.Addr  { return &net.UnixAddr{Net: "unix"} }
func (c *rawUnixConn) RemoteAddr() net.Addr { return c.addr }

func (c *rawUnixConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

func (c *rawUnixConn) SetReadDeadline(t time.Time) error {
	return c.deadline(syscall.SO_RCVTIMEO, t)
}

func (c *rawUnixConn) SetWriteDeadline(t time.Time) error {
	return c.deadline(syscall.SO_SNDTIMEO, t)
}

// deadline sets a timeout for the calls to come, or shuts the socket
// down for a deadline already past (a blocked call returns at once, as
// with the poller; the connection is not used again).
func (c *rawUnixConn) deadline(opt int, t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opError("set deadline", net.ErrClosed)
	}
	if !t.IsZero() && !time.Now().Before(t) {
		syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
		return nil
	}
	if err := c.setTimeout(opt, t); err != nil {
		return c.opError("set deadline", err)
	}
	return nil
}

// timeoutSlack is added to a socket timeout. The kernel counts it in
// clock ticks, and a blocked call can return up to a tick before the
// deadline by the process's clock; the transport cancels at the deadline
// itself, through the context (a deadline in the past), so the socket
// timeout is a backstop that must not win that race and turn a request
// past its context's deadline into an I/O error.
const timeoutSlack = 20 * time.Millisecond

// setTimeout sets SO_RCVTIMEO or SO_SNDTIMEO to the time left until t,
// plus timeoutSlack (none for the zero time).
func (c *rawUnixConn) setTimeout(opt int, t time.Time) error {
	var tv syscall.Timeval
	if !t.IsZero() {
		d := max(time.Until(t), 0) + timeoutSlack
		tv = syscall.NsecToTimeval(d.Nanoseconds())
	}
	return syscall.SetsockoptTimeval(c.fd, syscall.SOL_SOCKET, opt, &tv)
}
