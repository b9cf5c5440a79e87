package munge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

// DefaultSocket is where munged listens unless told otherwise.
const DefaultSocket = "/run/munge/munge.socket.2"

// DefaultTimeout bounds one Encode or Decode whose context has no
// deadline. munged answers in well under a millisecond; its own client
// gives each read 2 seconds.
const DefaultTimeout = 5 * time.Second

// defaultTimeout is DefaultTimeout, shortened by tests.
var defaultTimeout = DefaultTimeout

// Credential is what munged vouches for in a decoded credential.
type Credential struct {
	// UID and GID of the process that asked munged for the credential,
	// as munged saw them on its socket.
	UID, GID uint32
	// Payload is the data encoded into the credential (nil when none).
	Payload []byte
	// Encoded and Decoded are when munged made and checked the
	// credential, to the second, each by its own host's clock.
	Encoded, Decoded time.Time
	// TTL is how long after Encoded the credential is accepted.
	TTL time.Duration
}

// Encode asks the munged listening on socket (DefaultSocket when empty)
// for a credential holding payload (at most MaxPayload bytes, may be
// empty) and the caller's uid and gid, with munged's default cipher,
// MAC and time-to-live. The credential is printable ASCII, "MUNGE:…:".
func Encode(ctx context.Context, socket string, payload []byte) (string, error) {
	if len(payload) > MaxPayload {
		return "", fmt.Errorf("munge: encode: payload of %d bytes exceeds munged's limit of %d", len(payload), MaxPayload)
	}
	return encode(ctx, socket, payload, ttlDefault)
}

// encode is Encode with a time-to-live in seconds (0: munged's default),
// for the tests of expiry.
func encode(ctx context.Context, socket string, payload []byte, ttl uint32) (string, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	body := encodeRequestBody(payload, ttl)
	// munged's own client retries an exchange that broke after it
	// connected, telling munged the attempt number. That is safe for
	// encoding only (see Decode).
	var (
		reply []byte
		err   error
	)
	for retry := uint8(0); ; retry++ {
		var connected bool
		reply, connected, err = roundTrip(ctx, "encode", socket, msgEncodeRequest, retry, body, msgEncodeReply)
		if err == nil || !connected || !errors.Is(err, ErrUnreachable) || retry == 2 {
			break
		}
		if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || sleepCtx(ctx, time.Duration(retry+1)*10*time.Millisecond) != nil {
			break
		}
	}
	if err != nil {
		return "", err
	}
	m, err := parseEncodeReply(reply)
	if err != nil {
		return "", classed("munge: encode: malformed reply from munged at "+sockName(socket)+": "+err.Error(), ErrProtocol, nil)
	}
	if m.errNum != 0 {
		return "", &Error{Op: "encode", Code: Code(m.errNum), Message: printable(m.errMsg)}
	}
	return m.cred, nil
}

// Decode asks the munged listening on socket (DefaultSocket when empty)
// to check cred, and returns what it vouches for. munged refuses
// credentials that are expired, rewound, replayed, or not made with its
// key: see ErrExpired, ErrRewound, ErrReplayed and ErrInvalid.
//
// Decode makes one attempt only. munged's own client retries a failed
// exchange and tells munged it is a retry, and munged then lets the
// credential be decoded again; a client that retried would turn a
// dropped connection into an accepted replay.
func Decode(ctx context.Context, socket, cred string) (Credential, error) {
	switch {
	case cred == "":
		return Credential{}, classed("munge: decode: empty credential", ErrInvalid, nil)
	case len(cred) > maxCredential:
		return Credential{}, classed(fmt.Sprintf("munge: decode: credential of %d bytes exceeds munged's limit of %d", len(cred), maxCredential), ErrInvalid, nil)
	case strings.IndexByte(cred, 0) >= 0:
		// munged would read the credential only up to the NUL.
		return Credential{}, classed("munge: decode: credential contains a NUL byte", ErrInvalid, nil)
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	reply, _, err := roundTrip(ctx, "decode", socket, msgDecodeRequest, 0, decodeRequestBody(cred), msgDecodeReply)
	if err != nil {
		return Credential{}, err
	}
	m, err := parseDecodeReply(reply)
	if err != nil {
		return Credential{}, classed("munge: decode: malformed reply from munged at "+sockName(socket)+": "+err.Error(), ErrProtocol, nil)
	}
	if m.errNum != 0 {
		return Credential{}, &Error{Op: "decode", Code: Code(m.errNum), Message: printable(m.errMsg)}
	}
	c := Credential{
		UID:     m.credUID,
		GID:     m.credGID,
		Encoded: time.Unix(int64(m.time0), 0),
		Decoded: time.Unix(int64(m.time1), 0),
		TTL:     time.Duration(m.ttl) * time.Second,
	}
	if len(m.payload) > 0 {
		c.Payload = bytes.Clone(m.payload)
	}
	return c, nil
}

// withDefaultTimeout gives ctx DefaultTimeout when it has no deadline.
func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, defaultTimeout)
}

func sockName(socket string) string {
	if socket == "" {
		return DefaultSocket
	}
	return socket
}

// roundTrip sends one request to munged and returns the body of its
// reply, which must be of type want; connected says whether the
// connection was made. Errors are ErrUnreachable or ErrProtocol. ctx
// must have a deadline.
func roundTrip(ctx context.Context, op, socket string, typ msgType, retry uint8, body []byte, want msgType) (reply []byte, connected bool, err error) {
	socket = sockName(socket)
	conn, err := dial(ctx, socket)
	if err != nil {
		hint := ""
		if fi, serr := os.Stat(socket); serr == nil && fi.Mode().Type() != os.ModeSocket {
			hint = " (not a socket)"
		} else if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			hint = " (is munged running?)"
		}
		return nil, false, classed(fmt.Sprintf("munge: %s: cannot connect to munged at %s%s", op, socket, hint), ErrUnreachable, err)
	}
	defer conn.Close()
	// The deadline bounds the whole exchange, and cancelling ctx ends it
	// at once by moving the deadline into the past.
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, true, classed("munge: "+op+": setting a deadline", ErrUnreachable, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	fail := func(what string, err error) ([]byte, bool, error) {
		// Say why the exchange ended: the caller's cancellation or
		// deadline (the connection's deadline is the context's, and
		// may fire a moment before the context's own timer).
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			err = context.DeadlineExceeded
		}
		return nil, true, classed(fmt.Sprintf("munge: %s: %s munged at %s", op, what, socket), ErrUnreachable, err)
	}
	msg := appendHeader(make([]byte, 0, headerLen+len(body)), typ, retry, len(body))
	if _, err := conn.Write(append(msg, body...)); err != nil {
		return fail("sending the request to", err)
	}
	var hb [headerLen]byte
	if _, err := io.ReadFull(conn, hb[:]); err != nil {
		return fail("no reply from", err)
	}
	h, err := parseHeader(hb[:], maxReply)
	if err != nil {
		return nil, true, classed(fmt.Sprintf("munge: %s: malformed reply from munged at %s: %v", op, socket, err), ErrProtocol, nil)
	}
	if h.typ != want {
		return nil, true, classed(fmt.Sprintf("munge: %s: malformed reply from munged at %s: got message type %d (%v), want %d (%v)", op, socket, h.typ, h.typ, want, want), ErrProtocol, nil)
	}
	// Read what arrives rather than allocating the announced length: a
	// peer that announces maxReply and sends nothing costs little.
	reply, err = io.ReadAll(io.LimitReader(conn, int64(h.len)))
	if err != nil {
		return fail("reading the reply of", err)
	}
	if len(reply) != int(h.len) {
		return fail("reading the reply of", fmt.Errorf("connection closed after %d of %d bytes: %w", len(reply), h.len, io.ErrUnexpectedEOF))
	}
	return reply, true, nil
}

// dial connects to munged. A listener whose backlog is full answers
// EAGAIN (Linux) or ECONNREFUSED (BSD, or munged restarting), so those
// are tried again a few times, as munged's own client does.
func dial(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	for attempt := 1; ; attempt++ {
		conn, err := d.DialContext(ctx, "unix", socket)
		if err == nil {
			return conn, nil
		}
		if attempt == 5 || !(errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ECONNREFUSED)) {
			return nil, err
		}
		if sleepCtx(ctx, time.Duration(attempt)*20*time.Millisecond) != nil {
			return nil, err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
