package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// TestAnswerBeforeBody checks that an answer the controller sends
// before it has read the request body, closing the connection, reaches
// the caller: as net/http's server does with a body over its limit.
func TestAnswerBeforeBody(t *testing.T) {
	const body = `{"error":{"code":"invalid_argument","message":"Batch job submission failed: request body is big, too big"}}` + "\n"
	answer := fmt.Sprintf("HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "unix" {
				addr = filepath.Join(t.TempDir(), "s.sock")
			}
			ln, err := net.Listen(network, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() { // read the head only, answer, half-close, then close
						defer c.Close()
						if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
							return
						}
						c.Write([]byte(answer))
						if cw, ok := c.(interface{ CloseWrite() error }); ok {
							cw.CloseWrite()
						}
						time.Sleep(50 * time.Millisecond)
					}()
				}
			}()
			var c *Client
			if network == "unix" {
				c = NewUnix(ln.Addr().String())
			} else {
				c = NewTCP(ln.Addr().String(), "key-key-key-key-key")
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// 32 MiB: far more than the socket buffers, so the write is
			// still going when the server closes.
			_, err = c.Submit(ctx, api.SubmitRequest{Spec: api.JobSpec{Script: strings.Repeat("x", 32<<20)}})
			if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "request body is big, too big") {
				t.Fatalf("got %v, want the server's 413", err)
			}
		})
	}
}
