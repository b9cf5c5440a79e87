package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/pki"
)

// TLS for the TCP paths (issue 21): tided's requests to node_addr
// (mutual TLS with the node's certificate), the CLI's to api_addr (the
// controller verified with the cluster CA, TIDE_CA) and tided join's
// (the controller verified with the CA hash of a join token). The unix
// socket path never touches any of it.

// CAEnv names the cluster CA's certificate the CLI verifies the
// controller with over TCP (default DefaultCA).
const CAEnv = "TIDE_CA"

// DefaultCA is where the cluster CA's certificate is installed on
// login nodes.
const DefaultCA = "/etc/tide/ca.crt"

// handshakeTimeout bounds a TLS handshake when the request's context
// has no earlier deadline.
const handshakeTimeout = 10 * time.Second

// tlsDialer dials addr and completes a TLS handshake with cfg. hint is
// added to errors that are not network errors (a certificate that does
// not verify): it names what to check.
// With several endpoints the connect is bounded as tcpDialer's is.
func tlsDialer(addr string, cfg *tls.Config, hint string, endpoints int) func(ctx context.Context) (net.Conn, error) {
	dial := tcpDialer(addr, endpoints)
	return func(ctx context.Context) (net.Conn, error) {
		raw, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
		defer cancel()
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(hctx); err != nil {
			raw.Close()
			if ctx.Err() != nil || isNetErr(err) {
				return nil, fmt.Errorf("TLS handshake: %w", err)
			}
			return nil, &TLSError{Addr: addr, Err: err, Hint: hint}
		}
		return tc, nil
	}
}

// isNetErr reports a handshake that failed for the network's sake
// (worth another try), not for a certificate's.
func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// TLSError is a TLS handshake that failed on the certificates: the
// controller's did not verify (or ours was refused). It is not worth
// another try, and its message says what to check.
type TLSError struct {
	Addr string
	Err  error
	// Hint says what to check ("" for none).
	Hint string
}

func (e *TLSError) Error() string {
	msg := fmt.Sprintf("TLS with %s failed: %v", e.Addr, e.Err)
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Unwrap returns the handshake's error.
func (e *TLSError) Unwrap() error { return e.Err }

// NewTLS returns a client for a controller's node address over TLS with
// cfg (a node's mutual TLS, or tided join's pinned CA). It sends no
// cluster key. hint is added to certificate errors ("" for none).
func NewTLS(addr string, cfg *tls.Config, hint string) *Client {
	return NewTLSList([]string{addr}, func(string) (*tls.Config, string) { return cfg, hint })
}

// NewTLSList is NewTLS for every controller's node address (standby
// controllers): calls fail over from one to the next. tlsFor returns
// the TLS configuration of one address and the hint for its
// certificate errors.
func NewTLSList(addrs []string, tlsFor func(addr string) (*tls.Config, string)) *Client {
	return newClient(tlsEndpoints(addrs, tlsFor, nil), "", nil)
}

// NewRemoteTLS is NewRemote over TLS with cfg (pki.ControllerClient
// for the cluster CA).
func NewRemoteTLS(addr string, creds Credentials, cfg *tls.Config, hint string) *Client {
	return NewRemoteTLSList([]string{addr}, creds, func(string) (*tls.Config, string) { return cfg, hint })
}

// NewRemoteTLSList is NewRemoteTLS for every controller's api_addr
// (standby controllers), as NewTLSList is NewTLS's.
func NewRemoteTLSList(addrs []string, creds Credentials, tlsFor func(addr string) (*tls.Config, string)) *Client {
	return newClient(tlsEndpoints(addrs, tlsFor, creds), "", creds)
}

// tlsEndpoints returns an endpoint over TLS for every address; creds,
// when set, authenticate each request.
func tlsEndpoints(addrs []string, tlsFor func(addr string) (*tls.Config, string), creds Credentials) []*endpoint {
	eps := make([]*endpoint, len(addrs))
	for i, addr := range addrs {
		cfg, hint := tlsFor(addr)
		tr := &transport{dial: tlsDialer(addr, cfg, hint, len(addrs)), host: addr}
		if creds != nil {
			tr.auth = creds.Authorization
		}
		eps[i] = &endpoint{tr: tr, where: addr}
	}
	return eps
}

// remoteTLS returns the TLS configuration of the commands over TCP for
// a controller's address: the controller verified with the CA in
// TIDE_CA (or DefaultCA), by the address's host name.
func remoteTLS() (func(addr string) (*tls.Config, string), error) {
	path, set := os.LookupEnv(CAEnv)
	if !set || path == "" {
		path = DefaultCA
	}
	pool, err := pki.ReadPool(path)
	if err != nil {
		return nil, fmt.Errorf("%s is set, so the commands reach the controller over TLS, and need the cluster CA's certificate: %w (set %s to the controller's <state_dir>/tls/ca.crt, copied to this host)",
			ControllerEnv, err, CAEnv)
	}
	hint := fmt.Sprintf("the controller is verified with the CA in %s=%s", CAEnv, path)
	return func(addr string) (*tls.Config, string) {
		host, _, _ := net.SplitHostPort(addr)
		return pki.ControllerClient(pool, host, nil), hint
	}, nil
}

// Reconnect closes the idle connections and has those in use closed
// when their request ends, so that every request from now on goes over
// a new connection (with a renewed certificate).
func (c *Client) Reconnect() {
	for _, ep := range c.eps {
		ep.tr.retire()
	}
}

// NodeToken asks the controller for a join token (operators).
func (c *Client) NodeToken(ctx context.Context, req api.NodeTokenRequest) (api.NodeTokenResponse, error) {
	var r api.NodeTokenResponse
	err := c.do(ctx, methodPost, api.PathNodeTokens, nil, req, &r)
	return r, err
}

// Join exchanges a join token and a certificate request for a node
// certificate.
func (c *Client) Join(ctx context.Context, req api.NodeJoinRequest) (api.NodeCertResponse, error) {
	var r api.NodeCertResponse
	err := c.do(ctx, methodPost, api.PathNodeJoin, nil, req, &r)
	return r, err
}

// RenewCert asks for a new certificate for the node of the client's
// certificate.
func (c *Client) RenewCert(ctx context.Context, req api.NodeRenewRequest) (api.NodeCertResponse, error) {
	var r api.NodeCertResponse
	err := c.do(ctx, methodPost, api.PathNodeRenew, nil, req, &r)
	return r, err
}
