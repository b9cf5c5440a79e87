package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// unixListener listens on a fresh socket (short path: sun_path is 108
// bytes) and serves each connection with serve.
func unixListener(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rawunix")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return path
}

func TestRawUnixDialErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.sock")
	_, err := dialRawUnix(context.Background(), path)
	if err == nil || err.Error() != "dial unix "+path+": connect: no such file or directory" {
		t.Errorf("dial of a missing socket: %v", err)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v does not match os.ErrNotExist", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := dialRawUnix(ctx, path); !errors.Is(err, context.Canceled) {
		t.Errorf("dial with a cancelled context: %v", err)
	}
}

func TestRawUnixReadWriteEOF(t *testing.T) {
	path := unixListener(t, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 5)
		if _, err := io.ReadFull(c, buf); err == nil {
			c.Write([]byte(strings.ToUpper(string(buf))))
		}
	})
	c, err := dialRawUnix(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := c.Write([]byte("hello")); n != 5 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "HELLO" {
		t.Fatalf("read %q, %v; want HELLO and EOF", got, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second close: %v", err)
	}
}

func TestRawUnixDeadlines(t *testing.T) {
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	path := unixListener(t, func(c net.Conn) { <-hold; c.Close() })

	c, err := dialRawUnix(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v", err)
	}

	// A deadline moved into the past wakes a read blocked without one.
	c2, err := dialRawUnix(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	done := make(chan error, 1)
	go func() {
		_, err := c2.Read(make([]byte, 1))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := c2.SetDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("a cancelled read returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a past deadline did not wake the blocked read")
	}
}

// TestClientOverRawUnix runs requests through the client's transport
// over a unix socket: an answer, and a cancel while the controller
// takes its time.
func TestClientOverRawUnix(t *testing.T) {
	dir, err := os.MkdirTemp("", "rawunix")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ctld.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/jobs/7" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"job_id":42}`)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	defer close(release)

	c := NewUnix(path)
	defer c.Close()
	resp, err := c.Submit(context.Background(), api.SubmitRequest{Spec: api.JobSpec{Name: "x", WorkDir: "/"}})
	if err != nil || resp.JobID != 42 {
		t.Fatalf("submit: %+v, %v", resp, err)
	}
	// The kept-alive connection carries a second request.
	if resp, err := c.Submit(context.Background(), api.SubmitRequest{Spec: api.JobSpec{Name: "y", WorkDir: "/"}}); err != nil || resp.JobID != 42 {
		t.Fatalf("second submit: %+v, %v", resp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Job(ctx, 7); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a request past its context's deadline: %v", err)
	}
	if waited := time.Since(start); waited > 20*time.Second {
		t.Errorf("the cancelled request returned after %v", waited)
	}
}
