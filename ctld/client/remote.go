package client

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/munge"
)

// The user API over TCP: a client on another host than the controller
// reaches its api_addr and sends a credential with every request,
// since a TCP peer's address proves nothing. The unix socket path
// (NewUnix) is untouched by any of this.

// Environment variables that choose the controller and the credential.
const (
	// ControllerEnv makes the commands use the controller's api_addr
	// (host:port) over TCP instead of the unix socket.
	ControllerEnv = "TIDE_CONTROLLER"
	// JWTEnv holds a token from `tide token`; when it is set, requests
	// over TCP carry it instead of a MUNGE credential.
	JWTEnv = "TIDE_JWT"
	// MungeSocketEnv names the local munged's socket (default
	// DefaultMungeSocket).
	MungeSocketEnv = "TIDE_MUNGE_SOCKET"
)

// DefaultMungeSocket is munged's own socket.
const DefaultMungeSocket = "/run/munge/munge.socket.2"

// Credentials supply the Authorization header of requests over TCP. It
// is asked once per request sent, retries included, so that a MUNGE
// credential is never sent twice (munged refuses a replay).
type Credentials interface {
	Authorization(ctx context.Context) (string, error)
}

// Bearer is a JWT, sent as "Authorization: Bearer <token>".
type Bearer string

// Authorization returns the header value.
func (b Bearer) Authorization(context.Context) (string, error) { return "Bearer " + string(b), nil }

// ParseBearer checks that token (as TIDE_JWT holds it) looks like a JWT:
// three dot-separated base64url parts. A value with other characters
// would be a broken header, or a forged one (a line break).
func ParseBearer(token string) (Bearer, error) {
	token = strings.TrimSpace(token)
	if strings.HasPrefix(token, JWTEnv+"=") {
		return "", fmt.Errorf("%s holds %s=…: set it to the token alone, as `export $(tide token)` does", JWTEnv, JWTEnv)
	}
	if token == "" {
		return "", fmt.Errorf("%s is empty", JWTEnv)
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "", fmt.Errorf("%s is not a JWT: character %q at offset %d (a token has base64url parts and dots only)", JWTEnv, c, i)
		}
	}
	if strings.Count(token, ".") != 2 {
		return "", fmt.Errorf("%s is not a JWT: %d dot-separated parts, want 3", JWTEnv, strings.Count(token, ".")+1)
	}
	return Bearer(token), nil
}

// Munge gets a fresh MUNGE credential for every request from the local
// munged at Socket; the controller's munged decodes it with the same
// key and vouches for this process's uid and gid.
type Munge struct {
	Socket string
}

// Authorization returns "MUNGE <credential>": a fresh credential of
// this process's uid and gid, which the controller's munged decodes
// once.
func (m Munge) Authorization(ctx context.Context) (string, error) {
	cred, err := munge.Encode(ctx, m.Socket, nil)
	if err != nil {
		return "", fmt.Errorf("get a MUNGE credential from munged at %s (%s): %w", m.Socket, MungeSocketEnv, err)
	}
	return "MUNGE " + cred, nil
}

// NewRemote returns a client for a controller's api_addr (host:port)
// that authenticates every request with creds.
func NewRemote(addr string, creds Credentials) *Client {
	ep := &endpoint{tr: &transport{dial: tcpDialer(addr, 1), host: addr, auth: creds.Authorization}, where: addr}
	return newClient([]*endpoint{ep}, "", creds)
}

// FromEnv returns the commands' client: for TIDE_CONTROLLER's api_addr
// over TLS when it is set (the controller verified with TIDE_CA's CA;
// with TIDE_JWT's token, else MUNGE credentials from
// TIDE_MUNGE_SOCKET's munged), else for the unix socket at TIDE_SOCKET
// or DefaultSocket. TIDE_CONTROLLER (and TIDE_SOCKET) may list several controllers,
// comma-separated (standby controllers): calls fail over among them.
// Bad values are errors naming the variable.
func FromEnv() (*Client, error) {
	v := os.Getenv(ControllerEnv)
	if v == "" {
		p := os.Getenv("TIDE_SOCKET")
		if p == "" {
			p = DefaultSocket
		}
		// Several controllers on one host list their sockets.
		return NewUnixList(strings.Split(p, ",")), nil
	}
	addrs, err := ParseControllers(v)
	if err != nil {
		return nil, err
	}
	var creds Credentials
	if tok, ok := os.LookupEnv(JWTEnv); ok {
		b, err := ParseBearer(tok)
		if err != nil {
			return nil, err
		}
		creds = b
	} else {
		sock := os.Getenv(MungeSocketEnv)
		if sock == "" {
			sock = DefaultMungeSocket
		}
		creds = Munge{Socket: sock}
	}
	// Always TLS: a credential never crosses the network in clear.
	tlsFor, err := remoteTLS()
	if err != nil {
		return nil, err
	}
	return NewRemoteTLSList(addrs, creds, tlsFor), nil
}

// checkAddr checks TIDE_CONTROLLER: host:port with a port number.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s=%q is not host:port (the controller's api_addr, e.g. ctl:6820)", ControllerEnv, addr)
	}
	if !checkPort(port) || host == "" {
		return fmt.Errorf("%s=%q is not host:port with a port number (the controller's api_addr, e.g. ctl:6820)", ControllerEnv, addr)
	}
	return nil
}

// checkPort reports whether port is a TCP port number (1-65535).
func checkPort(port string) bool {
	p, err := strconv.ParseUint(port, 10, 16)
	return err == nil && p != 0
}

// credentialError is a failure to get a request's credential: nothing
// was sent.
type credentialError struct{ err error }

func (e *credentialError) Error() string { return e.err.Error() }
func (e *credentialError) Unwrap() error { return e.err }

// validHeaderValue reports whether v can be sent as a header value as
// it is: no control characters (a line break would end the header).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// Token asks the controller to mint a JWT for the caller, or for
// req.User (operators only).
func (c *Client) Token(ctx context.Context, req api.TokenRequest) (api.TokenResponse, error) {
	var r api.TokenResponse
	err := c.do(ctx, methodPost, api.PathTokens, nil, req, &r)
	return r, err
}
