package munge

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A fake munged for what a real one never does: lie about lengths, stall,
// hang up, answer with the wrong message. None of these tests needs
// munged.

// request is a request the fake received.
type request struct {
	h    header
	body []byte
}

type fakeMunged struct {
	socket string
	conns  atomic.Int32
	mu     sync.Mutex
	reqs   []request
}

// startFake serves each connection with serve, which gets the connection
// number (1, 2, …) and the request already read.
func startFake(t *testing.T, serve func(c net.Conn, n int, req request)) *fakeMunged {
	t.Helper()
	dir, err := os.MkdirTemp("", "fake-munged-")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeMunged{socket: filepath.Join(dir, "sock")}
	l, err := net.Listen("unix", f.socket)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		os.RemoveAll(dir)
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			n := int(f.conns.Add(1))
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				req, err := readRequest(c)
				if err != nil {
					t.Errorf("fake munged: reading request %d: %v", n, err)
					return
				}
				f.mu.Lock()
				f.reqs = append(f.reqs, req)
				f.mu.Unlock()
				serve(c, n, req)
			}()
		}
	}()
	return f
}

func (f *fakeMunged) requests() []request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]request(nil), f.reqs...)
}

func readRequest(c net.Conn) (request, error) {
	var hb [headerLen]byte
	if _, err := io.ReadFull(c, hb[:]); err != nil {
		return request{}, err
	}
	h, err := parseHeader(hb[:], maxCredential+64)
	if err != nil {
		return request{}, err
	}
	body := make([]byte, h.len)
	if _, err := io.ReadFull(c, body); err != nil {
		return request{}, err
	}
	return request{h: h, body: body}, nil
}

// stall keeps the connection open, reading, until the client hangs up.
func stall(c net.Conn) { io.Copy(io.Discard, c) }

func message(t msgType, body []byte) []byte {
	return append(appendHeader(nil, t, 0, len(body)), body...)
}

// appendCString appends a length byte and s with its NUL, as munged
// sends strings (no NUL when s fills the 255 bytes).
func appendCString(b []byte, s string) []byte {
	if s == "" {
		return append(b, 0)
	}
	if len(s) < 255 {
		s += "\x00"
	}
	b = append(b, byte(len(s)))
	return append(b, s...)
}

func marshalEncodeReply(m encodeReply) []byte {
	b := appendCString([]byte{m.errNum}, m.errMsg)
	cred := m.cred
	if cred != "" {
		cred += "\x00"
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(cred)))
	return append(b, cred...)
}

func marshalDecodeReply(m decodeReply) []byte {
	b := appendCString([]byte{m.errNum}, m.errMsg)
	b = append(b, m.cipher, m.mac, m.zip)
	b = appendCString(b, m.realm)
	b = binary.BigEndian.AppendUint32(b, m.ttl)
	b = append(b, byte(len(m.addr)))
	b = append(b, m.addr...)
	for _, v := range []uint32{m.time0, m.time1, m.credUID, m.credGID, m.authUID, m.authGID, uint32(len(m.payload))} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return append(b, m.payload...)
}

// goodDecodeReply is what munged answers for a fresh credential.
func goodDecodeReply() decodeReply {
	return decodeReply{cipher: 4, mac: 5, ttl: 60, addr: []byte{127, 0, 0, 1}, time0: 1_800_000_000, time1: 1_800_000_003,
		credUID: 1234, credGID: 5678, authUID: idAny, authGID: idAny, payload: []byte("data")}
}

func TestRequestsOnTheWire(t *testing.T) {
	f := startFake(t, func(c net.Conn, n int, req request) {
		if req.h.typ == msgEncodeRequest {
			c.Write(message(msgEncodeReply, marshalEncodeReply(encodeReply{cred: "MUNGE:AAAA:"})))
		} else {
			c.Write(message(msgDecodeReply, marshalDecodeReply(goodDecodeReply())))
		}
	})
	ctx := testCtx(t)
	cred, err := Encode(ctx, f.socket, []byte("pay"))
	if err != nil || cred != "MUNGE:AAAA:" {
		t.Fatalf("Encode: %q, %v", cred, err)
	}
	c, err := Decode(ctx, f.socket, "MUNGE:BBBB:")
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := Credential{UID: 1234, GID: 5678, Payload: []byte("data"), Encoded: time.Unix(1_800_000_000, 0),
		Decoded: time.Unix(1_800_000_003, 0), TTL: time.Minute}
	if c.UID != want.UID || c.GID != want.GID || !bytes.Equal(c.Payload, want.Payload) ||
		!c.Encoded.Equal(want.Encoded) || !c.Decoded.Equal(want.Decoded) || c.TTL != want.TTL {
		t.Errorf("Decode: got %+v, want %+v", c, want)
	}

	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("fake saw %d requests, want 2", len(reqs))
	}
	// cipher, MAC, zip: daemon default (1); no realm; TTL 0 (default);
	// anyone may decode (uid, gid 0xffffffff); the payload.
	wantEnc := []byte{1, 1, 1, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 3, 'p', 'a', 'y'}
	if r := reqs[0]; r.h.typ != msgEncodeRequest || r.h.retry != 0 || !bytes.Equal(r.body, wantEnc) {
		t.Errorf("encode request: type %v retry %d body % x\nwant type %v retry 0 body % x", r.h.typ, r.h.retry, r.body, msgEncodeRequest, wantEnc)
	}
	wantDec := append([]byte{0, 0, 0, 12}, "MUNGE:BBBB:\x00"...)
	if r := reqs[1]; r.h.typ != msgDecodeRequest || r.h.retry != 0 || !bytes.Equal(r.body, wantDec) {
		t.Errorf("decode request: type %v retry %d body %q, want type %v retry 0 body %q", r.h.typ, r.h.retry, r.body, msgDecodeRequest, wantDec)
	}
}

func TestHostilePeer(t *testing.T) {
	good := marshalDecodeReply(goodDecodeReply())
	withTrailer := append(bytes.Clone(good), 0)
	// The payload length field (4 bytes before the 4-byte payload) claims
	// nearly 4 GiB.
	hugePayload := bytes.Clone(good)
	binary.BigEndian.PutUint32(hugePayload[len(hugePayload)-8:], 0xFFFFFFF0)
	longAddr := goodDecodeReply()
	longAddr.addr = make([]byte, 16)
	header := func(magic uint32, version uint8, typ msgType, n uint32) []byte {
		b := binary.BigEndian.AppendUint32(nil, magic)
		b = append(b, version, byte(typ), 0)
		return binary.BigEndian.AppendUint32(b, n)
	}
	tests := []struct {
		name   string
		encode bool // Encode, else Decode
		reply  []byte
		class  error
		msg    string
	}{
		{"huge announced length", false, header(msgMagic, msgVersion, msgDecodeReply, 0xFFFFFFFF), ErrProtocol, "body of 4294967295 bytes exceeds the limit"},
		{"not munged", false, []byte("HTTP/1.1 400 Bad Request\r\n\r\n"), ErrProtocol, "bad magic"},
		{"other protocol version", false, header(msgMagic, 5, msgDecodeReply, 0), ErrProtocol, "message version 5"},
		{"wrong reply type", false, message(msgEncodeReply, marshalEncodeReply(encodeReply{cred: "MUNGE:A:"})), ErrProtocol, "got message type 3 (encode reply), want 5 (decode reply)"},
		{"hangs up at once", false, nil, ErrUnreachable, "EOF"},
		{"hangs up in the body", false, append(header(msgMagic, msgVersion, msgDecodeReply, 100), make([]byte, 10)...), ErrUnreachable, "after 10 of 100 bytes"},
		{"payload length beyond the body", false, message(msgDecodeReply, hugePayload), ErrProtocol, "truncated at payload"},
		{"bytes after the last field", false, message(msgDecodeReply, withTrailer), ErrProtocol, "1 bytes after its last field"},
		{"address too long", false, message(msgDecodeReply, marshalDecodeReply(longAddr)), ErrProtocol, "origin address of 16 bytes"},
		{"empty body", false, message(msgDecodeReply, nil), ErrProtocol, "truncated at error number"},
		{"credential with a header injection", true, message(msgEncodeReply, marshalEncodeReply(encodeReply{cred: "MUNGE:A:\r\nX-Evil: 1"})), ErrProtocol, "byte 0x0d at offset 8"},
		{"success without credential", true, message(msgEncodeReply, marshalEncodeReply(encodeReply{})), ErrProtocol, "no credential"},
		{"encode reply cut short", true, message(msgEncodeReply, []byte{0, 0, 0, 0}), ErrProtocol, "truncated at credential length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startFake(t, func(c net.Conn, n int, req request) {
				c.Write(tt.reply)
			})
			ctx := testCtx(t)
			var err error
			if tt.encode {
				_, err = Encode(ctx, f.socket, nil)
			} else {
				_, err = Decode(ctx, f.socket, "MUNGE:AAAA:")
			}
			if !errors.Is(err, tt.class) {
				t.Fatalf("got %v, want %v", err, tt.class)
			}
			if !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), f.socket) {
				t.Errorf("message %q should name the socket and say %q", err, tt.msg)
			}
			for _, other := range []error{ErrReplayed, ErrExpired, ErrRewound, ErrInvalid} {
				if errors.Is(err, other) {
					t.Errorf("%v matches %v", err, other)
				}
			}
		})
	}
}

// munged's refusals keep their code and map to their class; its message
// is kept, made printable.
func TestRefusalCodes(t *testing.T) {
	tests := []struct {
		code  Code
		class error // nil: none of the classes
	}{
		{CodeRewound, ErrRewound},
		{CodeExpired, ErrExpired},
		{CodeReplayed, ErrReplayed},
		{CodeInvalid, ErrInvalid},
		{CodeBadCred, ErrInvalid},
		{CodeBadVersion, ErrInvalid},
		{CodeBadCipher, ErrInvalid},
		{CodeBadMAC, ErrInvalid},
		{CodeBadZip, ErrInvalid},
		{CodeBadRealm, ErrInvalid},
		{CodeUnauthorized, ErrInvalid},
		{CodeSnafu, nil},
		{CodeNoMemory, nil},
		{CodeSocket, nil},
		{Code(99), nil},
	}
	classes := []error{ErrReplayed, ErrExpired, ErrRewound, ErrInvalid, ErrUnreachable, ErrProtocol}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			f := startFake(t, func(c net.Conn, n int, req request) {
				m := decodeReply{errNum: uint8(tt.code), errMsg: "\x1b[31mmunged says no\x07"}
				c.Write(message(msgDecodeReply, marshalDecodeReply(m)))
			})
			c, err := Decode(testCtx(t), f.socket, "MUNGE:AAAA:")
			var me *Error
			if !errors.As(err, &me) || me.Code != tt.code || me.Op != "decode" {
				t.Fatalf("got %#v, want a *Error with code %d", err, tt.code)
			}
			for _, class := range classes {
				if got, want := errors.Is(err, class), class == tt.class; got != want {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, class, got, want)
				}
			}
			if msg := err.Error(); strings.ContainsAny(msg, "\x1b\x07") || !strings.Contains(msg, "munged says no") || !strings.Contains(msg, tt.code.String()) {
				t.Errorf("message %q: want munged's text without control bytes, and the code's", msg)
			}
			if c.UID != 0 || c.Payload != nil {
				t.Errorf("refused credential returned %+v", c)
			}
		})
	}
	t.Run("encode refused", func(t *testing.T) {
		f := startFake(t, func(c net.Conn, n int, req request) {
			c.Write(message(msgEncodeReply, marshalEncodeReply(encodeReply{errNum: uint8(CodeBadLength)})))
		})
		_, err := Encode(testCtx(t), f.socket, nil)
		var me *Error
		if !errors.As(err, &me) || me.Code != CodeBadLength || me.Op != "encode" {
			t.Fatalf("got %v, want a *Error with code %d", err, CodeBadLength)
		}
		if want := "munge: encode: Exceeded maximum message length"; err.Error() != want {
			t.Errorf("message %q, want %q", err, want)
		}
	})
}

// A peer that stalls never makes Encode or Decode hang: the context's
// deadline, its cancellation, or DefaultTimeout ends the exchange.
func TestStallingPeer(t *testing.T) {
	var sendSome atomic.Bool
	f := startFake(t, func(c net.Conn, n int, req request) {
		if sendSome.Load() {
			c.Write(append(appendHeader(nil, msgDecodeReply, 0, 100), 1, 2, 3))
		}
		stall(c)
	})
	call := func(t *testing.T, ctx context.Context, encode bool) error {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			var err error
			if encode {
				_, err = Encode(ctx, f.socket, nil)
			} else {
				_, err = Decode(ctx, f.socket, "MUNGE:AAAA:")
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrUnreachable) {
				t.Errorf("got %v, want ErrUnreachable", err)
			}
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("the call did not return within 30s")
			return nil
		}
	}
	for _, encode := range []bool{false, true} {
		op := map[bool]string{false: "decode", true: "encode"}[encode]
		t.Run(op+"/deadline", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			if err := call(t, ctx, encode); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %v, want context.DeadlineExceeded in the chain", err)
			}
		})
		t.Run(op+"/cancel", func(t *testing.T) {
			// A deadline far beyond the watchdog's: only the
			// cancellation can end the call in time.
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			time.AfterFunc(200*time.Millisecond, cancel)
			if err := call(t, ctx, encode); !errors.Is(err, context.Canceled) {
				t.Errorf("got %v, want context.Canceled in the chain", err)
			}
		})
		t.Run(op+"/no deadline", func(t *testing.T) {
			defer func(d time.Duration) { defaultTimeout = d }(defaultTimeout)
			defaultTimeout = 200 * time.Millisecond
			if err := call(t, context.Background(), encode); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %v, want context.DeadlineExceeded in the chain", err)
			}
		})
	}
	t.Run("stall inside the body", func(t *testing.T) {
		sendSome.Store(true)
		defer sendSome.Store(false)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		call(t, ctx, false)
	})
}

// Encode tries again, telling munged so, when the connection broke; Decode
// never does, because munged accepts a replayed credential on a retry.
func TestRetries(t *testing.T) {
	f := startFake(t, func(c net.Conn, n int, req request) {
		if n == 1 {
			return // hang up without an answer
		}
		if req.h.typ == msgEncodeRequest {
			c.Write(message(msgEncodeReply, marshalEncodeReply(encodeReply{cred: "MUNGE:AAAA:"})))
		} else {
			c.Write(message(msgDecodeReply, marshalDecodeReply(goodDecodeReply())))
		}
	})
	if _, err := Encode(testCtx(t), f.socket, nil); err != nil {
		t.Fatalf("Encode after one hang-up: %v", err)
	}
	reqs := f.requests()
	if len(reqs) != 2 || reqs[0].h.retry != 0 || reqs[1].h.retry != 1 {
		t.Fatalf("encode requests %+v, want two with retry 0 then 1", reqs)
	}

	g := startFake(t, func(c net.Conn, n int, req request) {})
	if _, err := Decode(testCtx(t), g.socket, "MUNGE:AAAA:"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Decode after a hang-up: got %v, want ErrUnreachable", err)
	}
	if n := g.conns.Load(); n != 1 {
		t.Errorf("Decode connected %d times, want exactly 1", n)
	}
	if r := g.requests(); len(r) != 1 || r[0].h.retry != 0 {
		t.Errorf("decode requests %+v, want one with retry 0", r)
	}
}

// A peer that announces the largest reply and sends a few bytes costs
// what it sent, not what it announced.
func TestAnnouncedLengthNotAllocated(t *testing.T) {
	f := startFake(t, func(c net.Conn, n int, req request) {
		c.Write(append(appendHeader(nil, msgDecodeReply, 0, maxReply), make([]byte, 16)...))
		stall(c)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Decode(ctx, f.socket, "MUNGE:AAAA:")
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrUnreachable after the deadline", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > maxReply/4 {
		t.Errorf("Decode allocated %d bytes for a reply that announced %d and sent 16", got, maxReply)
	}
}
