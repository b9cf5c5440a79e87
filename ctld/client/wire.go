package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// transport is the small HTTP/1.1 client under Client. net/http would do,
// but every sbatch and squeue is a fresh process and net/http (with the
// TLS and HTTP/2 stacks it pulls in) adds about half a millisecond of
// start-up and a goroutine pair per connection to each of them. The
// controller speaks plain HTTP/1.1 on a unix socket or loopback TCP, so
// requests with a Content-Length and answers with a Content-Length or
// chunked body are all that is needed.
//
// tided, long-running, uses it too, on measure: on its exchanges (a
// sync with reports, answered with a launch, two per job) net/http's
// client took more than twice the CPU (about 240 against 105 µs per
// exchange, plain or over TLS, BenchmarkNodeSyncTransport), against
// tided's 0.75 ms per job.
type transport struct {
	dial func(ctx context.Context) (net.Conn, error)
	host string // Host header
	// auth, when set, gives each request sent its Authorization header
	// (a fresh one per try: see Credentials).
	auth func(ctx context.Context) (string, error)

	mu   sync.Mutex
	idle []*wireConn // kept-alive connections, newest last
	// gen counts retire calls; a connection dialed before the last one
	// is closed instead of kept alive.
	gen uint64
}

// maxIdle bounds the kept-alive connections (tided uses two at most: a
// long-poll and a registration).
const maxIdle = 4

// maxHeaderBytes bounds an answer's status line and headers.
const maxHeaderBytes = 1 << 20

// dialError is a connection that could not be made (TCP, the unix
// socket, or a TLS handshake): nothing was sent, so the request may go
// to another controller or be tried again.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }

// Unwrap returns the dialer's error.
func (e *dialError) Unwrap() error { return e.err }

// errStale marks a kept-alive connection the controller closed before it
// answered: the request can be sent again on a new one.
var errStale = errors.New("connection closed before the answer")

type wireConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
	// gen is the transport's gen when the connection was dialed.
	gen uint64
}

// wireResponse is an answer whose body must be read to the end or closed.
type wireResponse struct {
	status int
	header map[string]string // lower-case names; the last value wins
	body   io.Reader
	conn   *wireConn
	reuse  bool // the connection may carry another request after the body
	t      *transport
	stop   func() bool // detaches the context watcher
}

// Header returns the value of header name (any case).
func (r *wireResponse) Header(name string) string { return r.header[strings.ToLower(name)] }

// Read reads the body.
func (r *wireResponse) Read(p []byte) (int, error) { return r.body.Read(p) }

// Close drains what is left of a small body and gives the connection
// back for the next request, or closes it.
func (r *wireResponse) Close() error {
	if r.conn == nil {
		return nil
	}
	c := r.conn
	r.conn = nil
	ok := r.stop()
	if ok && r.reuse {
		if discard(r.body, 64<<10) && r.drained() {
			r.t.putIdle(c)
			return nil
		}
	}
	return c.c.Close()
}

// discard reads up to limit bytes of body and reports whether it met no
// error. (io.Copy would look for WriterTo and ReaderFrom, interface
// assertions whose itabs a short-lived CLI process builds at run time.)
func discard(body io.Reader, limit int) bool {
	var buf [4096]byte
	for limit > 0 {
		n, err := body.Read(buf[:min(limit, len(buf))])
		limit -= n
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
	return true
}

// newWireConn wraps nc in its buffers. A raw unix connection (every CLI
// command's) is wrapped by its concrete type: converting a net.Conn to
// io.Reader and io.Writer builds their itabs at run time.
func newWireConn(nc net.Conn) *wireConn {
	if rc, ok := nc.(*rawUnixConn); ok {
		return &wireConn{c: nc, br: bufio.NewReaderSize(rc, 16<<10), bw: bufio.NewWriterSize(rc, 4<<10)}
	}
	return &wireConn{c: nc, br: bufio.NewReaderSize(nc, 16<<10), bw: bufio.NewWriterSize(nc, 4<<10)}
}

// drained reports whether the body was read to its end.
func (r *wireResponse) drained() bool {
	var one [1]byte
	n, err := r.body.Read(one[:])
	return n == 0 && err == io.EOF
}

func (t *transport) getIdle() *wireConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.idle); n > 0 {
		c := t.idle[n-1]
		t.idle = t.idle[:n-1]
		return c
	}
	return nil
}

func (t *transport) putIdle(c *wireConn) {
	t.mu.Lock()
	if len(t.idle) < maxIdle && c.gen == t.gen {
		t.idle = append(t.idle, c)
		c = nil
	}
	t.mu.Unlock()
	if c != nil {
		c.c.Close()
	}
}

// retire closes the kept-alive connections and makes those in use
// close when their request ends: a renewed client certificate is used
// from the next connection on.
func (t *transport) retire() {
	t.mu.Lock()
	t.gen++
	t.mu.Unlock()
	t.closeIdle()
}

// closeIdle closes the kept-alive connections.
func (t *transport) closeIdle() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, c := range idle {
		c.c.Close()
	}
}

// roundTrip sends one request and reads the answer's head. retry allows
// sending the request again when a kept-alive connection turns out to be
// closed (only for requests that are safe to repeat).
func (t *transport) roundTrip(ctx context.Context, method, target string, hdr [][2]string, body []byte, retry bool) (*wireResponse, error) {
	for attempt := 0; ; attempt++ {
		h := hdr
		if t.auth != nil {
			a, err := t.auth(ctx)
			if err == nil && !validHeaderValue(a) {
				err = errors.New("credential has control characters")
			}
			if err != nil {
				return nil, &credentialError{err: err}
			}
			h = append(hdr[:len(hdr):len(hdr)], [2]string{"Authorization", a})
		}
		c := t.getIdle()
		reused := c != nil
		if c == nil {
			nc, err := t.dial(ctx)
			if err != nil {
				return nil, &dialError{err: err}
			}
			c = newWireConn(nc)
			t.mu.Lock()
			c.gen = t.gen
			t.mu.Unlock()
		}
		resp, err := t.exchange(ctx, c, method, target, h, body)
		if err == nil {
			return resp, nil
		}
		c.c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// A request written to a socket may have been read by the
		// controller even if no answer came, so only requests that are
		// safe to repeat are sent again.
		if reused && retry && errors.Is(err, errStale) && attempt < 2 {
			continue
		}
		return nil, err
	}
}

func (t *transport) exchange(ctx context.Context, c *wireConn, method, target string, hdr [][2]string, body []byte) (*wireResponse, error) {
	// The watcher turns a cancelled context into an I/O error on the
	// connection; stop() tells whether it fired (the connection is then
	// unusable).
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*wireResponse, error) {
		stop()
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.c.SetDeadline(dl)
	} else {
		_ = c.c.SetDeadline(time.Time{})
	}
	w := c.bw
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(target)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(t.host)
	w.WriteString("\r\nUser-Agent: tide\r\n")
	for _, h := range hdr {
		w.WriteString(h[0])
		w.WriteString(": ")
		w.WriteString(h[1])
		w.WriteString("\r\n")
	}
	if body != nil || method == "POST" || method == "PUT" {
		w.WriteString("Content-Length: ")
		w.WriteString(strconv.Itoa(len(body)))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	w.Write(body)
	if err := w.Flush(); err != nil {
		// The controller may answer before it has read the whole
		// request and close the connection: 413 for a body over its
		// limit, 503 for a connection over its cap. Its answer can
		// still be read after the write failed (a broken pipe or a
		// reset only say that the peer closed), and it says more than
		// the write error. No answer: the send failed.
		if isReset(err) {
			if r, rerr := readAnswer(c.br, method); rerr == nil {
				r.reuse = false
				r.conn, r.t, r.stop = c, t, stop
				return r, nil
			}
		}
		return fail(fmt.Errorf("send request: %w", staleIf(err)))
	}
	r, err := readAnswer(c.br, method)
	if err != nil {
		return fail(err)
	}
	r.conn, r.t, r.stop = c, t, stop
	return r, nil
}

// readAnswer reads an answer's head, past informational ones, and
// frames its body.
func readAnswer(br *bufio.Reader, method string) (*wireResponse, error) {
	for {
		r, err := readHead(br)
		if err != nil {
			return nil, err
		}
		if r.status >= 100 && r.status < 200 { // informational: the real answer follows
			continue
		}
		if err := r.setBody(br, method); err != nil {
			return nil, err
		}
		return r, nil
	}
}

// staleIf marks errors that mean the peer had closed the connection.
func staleIf(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err) {
		return fmt.Errorf("%w: %w", errStale, err)
	}
	return err
}

func isReset(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection reset") || strings.Contains(s, "broken pipe")
}

// readHead reads a status line and the headers.
func readHead(br *bufio.Reader) (*wireResponse, error) {
	budget := maxHeaderBytes
	line, err := readLine(br, &budget)
	if err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("read answer: %w", staleIf(err))
		}
		return nil, fmt.Errorf("read answer: %w", err)
	}
	// "HTTP/1.1 200 OK"
	proto, rest, ok := strings.Cut(line, " ")
	if !ok || !strings.HasPrefix(proto, "HTTP/1.") {
		return nil, fmt.Errorf("malformed answer status line %q", line)
	}
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if err != nil || len(code) != 3 {
		return nil, fmt.Errorf("malformed answer status line %q", line)
	}
	r := &wireResponse{status: status, header: make(map[string]string, 8), reuse: proto == "HTTP/1.1"}
	for {
		line, err := readLine(br, &budget)
		if err != nil {
			return nil, fmt.Errorf("read answer headers: %w", err)
		}
		if line == "" {
			return r, nil
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("malformed answer header %q", line)
		}
		r.header[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
}

// readLine reads one CRLF (or LF) terminated line within budget bytes.
func readLine(br *bufio.Reader, budget *int) (string, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		*budget -= len(frag)
		if *budget < 0 {
			return "", errors.New("answer headers too large")
		}
		buf = append(buf, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(buf) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
		return string(bytes.TrimRight(buf, "\r\n")), nil
	}
}

// setBody frames the body by Transfer-Encoding or Content-Length.
func (r *wireResponse) setBody(br *bufio.Reader, method string) error {
	if strings.EqualFold(r.header["connection"], "close") {
		r.reuse = false
	}
	switch {
	case method == "HEAD" || r.status == 204 || r.status == 304:
		r.body = bytes.NewReader(nil)
	case r.header["transfer-encoding"] != "":
		if !strings.EqualFold(r.header["transfer-encoding"], "chunked") {
			return fmt.Errorf("unsupported Transfer-Encoding %q in answer", r.header["transfer-encoding"])
		}
		r.body = &chunkedReader{br: br}
	case r.header["content-length"] != "":
		n, err := strconv.ParseInt(r.header["content-length"], 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("malformed Content-Length %q in answer", r.header["content-length"])
		}
		r.body = &lengthReader{br: br, n: n}
	default:
		r.reuse = false
		r.body = br // until the controller closes the connection
	}
	return nil
}

// lengthReader reads exactly n bytes and reports a short body.
type lengthReader struct {
	br *bufio.Reader
	n  int64
}

func (l *lengthReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.br.Read(p)
	l.n -= int64(n)
	if err == io.EOF && l.n > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// chunkedReader decodes a chunked body (RFC 9112 §7.1); extensions and
// trailers are read and ignored.
type chunkedReader struct {
	br   *bufio.Reader
	left int64 // bytes left in the current chunk
	done bool
	err  error
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	for c.err == nil && !c.done && c.left == 0 {
		c.err = c.nextChunk()
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.done {
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		c.err = err
	} else if c.left == 0 {
		c.err = c.crlf()
	}
	if n > 0 {
		return n, nil
	}
	return 0, c.err
}

func (c *chunkedReader) nextChunk() error {
	budget := 4096
	line, err := readLine(c.br, &budget)
	if err != nil {
		return unexpected(err)
	}
	size, _, _ := strings.Cut(line, ";")
	n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("malformed chunk size %q", line)
	}
	if n > 0 {
		c.left = n
		return nil
	}
	budget = maxHeaderBytes
	for { // trailers up to the blank line
		line, err := readLine(c.br, &budget)
		if err != nil {
			return unexpected(err)
		}
		if line == "" {
			c.done = true
			return nil
		}
	}
}

func (c *chunkedReader) crlf() error {
	b, err := c.br.ReadByte()
	if err == nil && b == '\r' {
		b, err = c.br.ReadByte()
	}
	if err != nil {
		return unexpected(err)
	}
	if b != '\n' {
		return errors.New("malformed chunked body: no line end after a chunk")
	}
	return nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
