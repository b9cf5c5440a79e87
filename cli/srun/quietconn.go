package srun

import (
	"errors"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// quietConn is a TCP connection to a node daemon whose writes never
// raise SIGPIPE. srun catches SIGPIPE to learn that its own output is
// gone and kills the step then (signals.go), and Go writes to sockets
// with write(2), which raises SIGPIPE on a connection the peer has
// reset: a node daemon that went away would look like srun's output
// closing, and its stdin or a forwarded signal would kill the step on
// every other node. Slurm's srun sends with MSG_NOSIGNAL for the same
// reason; so does this.
// It embeds net.Conn, not *net.TCPConn, so that no ReadFrom of the
// TCP connection (splice, sendfile) writes past Write.
type quietConn struct {
	net.Conn
	raw syscall.RawConn
}

// quietWrites wraps c, a TCP connection, as a quietConn.
func quietWrites(c net.Conn) (net.Conn, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		c.Close()
		return nil, err
	}
	return &quietConn{Conn: tc, raw: raw}, nil
}

// Write sends p with MSG_NOSIGNAL, waiting (under the write deadline)
// while the socket's buffer is full.
func (c *quietConn) Write(p []byte) (int, error) {
	n := 0
	var serr error
	err := c.raw.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, err := unix.SendmsgN(int(fd), p[n:], nil, nil, unix.MSG_NOSIGNAL)
			switch {
			case errors.Is(err, unix.EINTR):
				continue
			case errors.Is(err, unix.EAGAIN):
				return false // wait until the socket takes more
			case err != nil:
				serr = os.NewSyscallError("sendmsg", err)
				return true
			}
			n += m
		}
		return true
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return n, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	return n, nil
}
