package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// rawServer answers each request on a connection with the next canned
// answer from answers (one per request, in order over all connections);
// an empty answer closes the connection without replying, and one ending
// in NUL closes it after replying.
type rawServer struct {
	ln      net.Listener
	answers []string
	next    atomic.Int32
	conns   atomic.Int32
	reqs    chan string
	// hold keeps a connection whose request has no answer open until the
	// client closes it, instead of closing it at once.
	hold atomic.Bool
}

func newRawServer(t *testing.T, answers ...string) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, answers: answers, reqs: make(chan string, 100)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go s.serve(c)
		}
	}()
	return s
}

func (s *rawServer) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, _ := io.ReadAll(req.Body)
		s.reqs <- req.Method + " " + req.URL.String() + " " + string(body)
		i := int(s.next.Add(1)) - 1
		if i >= len(s.answers) || s.answers[i] == "" {
			if s.hold.Load() {
				io.Copy(io.Discard, br)
			}
			return
		}
		a, closeAfter := strings.CutSuffix(s.answers[i], "\x00")
		if _, err := io.WriteString(c, a); err != nil || closeAfter {
			return
		}
	}
}

func (s *rawServer) client() *Client { return NewTCP(s.ln.Addr().String(), "k") }

func TestWireFraming(t *testing.T) {
	tests := []struct {
		name    string
		answer  string
		want    string // Cluster().Name
		wantErr string
	}{
		{name: "content length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n{\"name\":\"a\"}\n", want: "a"},
		{name: "chunked with extension and trailer",
			answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\n{\"nam\r\n8\r\ne\":\"bc\"}\r\n0\r\nX-T: 1\r\n\r\n", want: "bc"},
		{name: "informational answer first",
			answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{\"name\":\"d\"}", want: "d"},
		{name: "body until close", answer: "HTTP/1.0 200 OK\r\n\r\n{\"name\":\"e\"}\x00", want: "e"},
		{name: "short body", answer: "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n{\"name\":\x00", wantErr: "unexpected EOF"},
		{name: "bad status line", answer: "HTTX 200 OK\r\n\r\n", wantErr: "malformed answer status line"},
		{name: "bad chunk size", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", wantErr: "malformed chunk size"},
		{name: "unknown transfer encoding", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", wantErr: "unsupported Transfer-Encoding"},
		{name: "error body",
			answer:  "HTTP/1.1 404 Not Found\r\nContent-Length: 55\r\n\r\n{\"error\":{\"code\":\"not_found\",\"message\":\"no such thing\"}}",
			wantErr: "no such thing"},
		{name: "error without body", answer: "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 3\r\n\r\nbad", wantErr: "HTTP 502: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newRawServer(t, tt.answer)
			c := s.client()
			defer c.Close()
			got, err := c.Cluster(context.Background())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.want {
				t.Errorf("name = %q, want %q", got.Name, tt.want)
			}
			if r := <-s.reqs; r != "GET /api/v1/cluster " {
				t.Errorf("request = %q", r)
			}
		})
	}
}

func TestWireKeepAliveAndStaleRetry(t *testing.T) {
	ok := func(name string) string {
		b := fmt.Sprintf(`{"name":%q}`, name)
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
	}
	t.Run("reuses the connection", func(t *testing.T) {
		s := newRawServer(t, ok("a"), ok("b"), ok("c"))
		c := s.client()
		defer c.Close()
		for _, want := range []string{"a", "b", "c"} {
			got, err := c.Cluster(context.Background())
			if err != nil || got.Name != want {
				t.Fatalf("got %q, %v; want %q", got.Name, err, want)
			}
		}
		if n := s.conns.Load(); n != 1 {
			t.Errorf("%d connections, want 1", n)
		}
	})
	t.Run("a read is resent after the controller closed the kept connection", func(t *testing.T) {
		s := newRawServer(t, ok("a"), "", ok("b"))
		c := s.client()
		defer c.Close()
		if _, err := c.Cluster(context.Background()); err != nil {
			t.Fatal(err)
		}
		got, err := c.Cluster(context.Background())
		if err != nil || got.Name != "b" {
			t.Fatalf("got %q, %v; want b", got.Name, err)
		}
		if n := s.conns.Load(); n != 2 {
			t.Errorf("%d connections, want 2", n)
		}
	})
	t.Run("a submission is not resent", func(t *testing.T) {
		s := newRawServer(t, ok("a"), "", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{\"id\":7}")
		c := s.client()
		defer c.Close()
		if _, err := c.Cluster(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, err := c.Submit(context.Background(), api.SubmitRequest{})
		if !errors.Is(err, api.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
		<-s.reqs
		<-s.reqs
		select {
		case r := <-s.reqs:
			t.Errorf("submission sent again: %q", r)
		default:
		}
	})
}

func TestWireContextCancel(t *testing.T) {
	s := newRawServer(t) // reads the request and never answers
	// Hold the connection: a close would race the cancel (the client
	// would see EOF first).
	s.hold.Store(true)
	c := s.client()
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-s.reqs
		cancel()
	}()
	done := make(chan error, 1)
	go func() {
		_, err := c.Sync(ctx, api.NodeSyncRequest{Name: "n1"})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a cancelled call did not return")
	}
}

// TestWireAgainstNetHTTP checks interoperation with the server the
// controller runs: a large streamed (chunked) answer, the key header and
// the query string.
func TestWireAgainstNetHTTP(t *testing.T) {
	var gotKey, gotQuery string
	big := strings.Repeat("x", 200_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey, gotQuery = r.Header.Get(KeyHeader), r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/v1/audit" {
			fmt.Fprint(w, "[]")
			return
		}
		fmt.Fprintf(w, `{"name":%q}`, big)
		w.(http.Flusher).Flush()
	}))
	defer srv.Close()
	c := NewTCP(strings.TrimPrefix(srv.URL, "http://"), "secret")
	defer c.Close()
	for i := 0; i < 3; i++ {
		got, err := c.Cluster(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != big {
			t.Fatalf("answer of %d bytes, want %d", len(got.Name), len(big))
		}
	}
	if gotKey != "secret" {
		t.Errorf("key header = %q", gotKey)
	}
	if _, err := c.Audit(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	if gotQuery != "limit=5" {
		t.Errorf("query = %q", gotQuery)
	}
}
