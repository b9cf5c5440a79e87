package config

import (
	"encoding/json"
	"net"
	"time"

	"github.com/tide-hpc/tide/ctld/api"
)

// Defaults of the connection limits (limits.*). They are sized for a
// controller whose file descriptor limit is at least a few ten
// thousand (systemd's default hard limit is 524288); the controller
// lowers them at start when its limit is smaller (docs/operations.md,
// "Connection limits").
const (
	// DefaultConnections is limits.connections: open connections per
	// listener (the socket, node_addr and metrics_addr each).
	DefaultConnections = 4096
	// DefaultConnectionsPerPeer is limits.connections_per_peer: open
	// connections of one user on the socket, and of one IP address on
	// node_addr once they showed the cluster key.
	DefaultConnectionsPerPeer = 256
	// DefaultOperatorReserve is limits.operator_reserve: socket
	// connections that only root, the controller's user and operators
	// may take.
	DefaultOperatorReserve = 64
	// DefaultUnauthenticated is limits.unauthenticated: connections to
	// node_addr (and metrics_addr) that have not shown the cluster key.
	DefaultUnauthenticated = 256
	// DefaultUnauthenticatedPerPeer is limits.unauthenticated_per_peer:
	// the same from one IP address (one /64 for IPv6).
	DefaultUnauthenticatedPerPeer = 64
	// DefaultUnauthenticatedTimeout is limits.unauthenticated_timeout:
	// how long a connection without the key may stay idle.
	DefaultUnauthenticatedTimeout = 5 * time.Second
	// DefaultHeaderTimeout is limits.header_timeout: time to send a
	// request's headers.
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultBodyTimeout is limits.body_timeout: time to send a
	// request's body.
	DefaultBodyTimeout = 60 * time.Second
	// DefaultWriteTimeout is limits.write_timeout: time to handle a
	// request and write its answer (node long polls and profiles add
	// the time they legitimately wait).
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout is limits.idle_timeout: a kept-alive
	// connection idle this long is closed.
	DefaultIdleTimeout = 90 * time.Second
	// minSubmitBody is the smallest submission body limit the
	// controller derives (limits.max_submit_body empty): the largest
	// request it read before limits existed, with room to spare.
	minSubmitBody = 16 << 20
)

// LimitsConfig bounds what clients may hold of the controller:
// connections per listener, per peer and before authentication, the
// time each phase of a request may take, and request sizes. A peer is a
// uid on the unix socket (SO_PEERCRED) and an IP address on TCP.
type LimitsConfig struct {
	// Connections is the most open connections of each listener.
	Connections int `mapstructure:"connections" json:"connections"`
	// ConnectionsPerPeer is the most open connections of one uid on
	// the socket, and of one IP address on node_addr among those that
	// showed the cluster key.
	ConnectionsPerPeer int `mapstructure:"connections_per_peer" json:"connections_per_peer"`
	// OperatorReserve socket connections are kept for root, the
	// controller's user and operators: others are refused once
	// Connections-OperatorReserve are open.
	OperatorReserve int `mapstructure:"operator_reserve" json:"operator_reserve"`
	// Unauthenticated and UnauthenticatedPerPeer bound the TCP
	// connections that have not (yet) made a request with the cluster
	// key, in all and per IP address. Over them the oldest idle such
	// connection is closed for the new one (sshd's MaxStartups idea):
	// a flood of idle connections cannot keep a node from reconnecting.
	Unauthenticated        int `mapstructure:"unauthenticated" json:"unauthenticated"`
	UnauthenticatedPerPeer int `mapstructure:"unauthenticated_per_peer" json:"unauthenticated_per_peer"`
	// UnauthenticatedTimeout closes a TCP connection without the key
	// that idles (or sends headers) this long.
	UnauthenticatedTimeout time.Duration `mapstructure:"unauthenticated_timeout" json:"-"`
	// HeaderTimeout, BodyTimeout and WriteTimeout bound reading a
	// request's headers, reading its body, and handling it plus
	// writing the answer; IdleTimeout closes idle kept-alive
	// connections.
	HeaderTimeout time.Duration `mapstructure:"header_timeout" json:"-"`
	BodyTimeout   time.Duration `mapstructure:"body_timeout" json:"-"`
	WriteTimeout  time.Duration `mapstructure:"write_timeout" json:"-"`
	IdleTimeout   time.Duration `mapstructure:"idle_timeout" json:"-"`
	// MaxSubmitBody is the largest submission request body, a size
	// ("32M"); larger ones are answered 413 before they are read. Empty:
	// derived from submit.max_script_size and submit.max_env_size
	// (Config.SubmitBodyLimit).
	MaxSubmitBody string `mapstructure:"max_submit_body" json:"max_submit_body"`
}

// DefaultLimits returns limits.*'s defaults.
func DefaultLimits() LimitsConfig {
	return LimitsConfig{
		Connections: DefaultConnections, ConnectionsPerPeer: DefaultConnectionsPerPeer,
		OperatorReserve: DefaultOperatorReserve, Unauthenticated: DefaultUnauthenticated,
		UnauthenticatedPerPeer: DefaultUnauthenticatedPerPeer, UnauthenticatedTimeout: DefaultUnauthenticatedTimeout,
		HeaderTimeout: DefaultHeaderTimeout, BodyTimeout: DefaultBodyTimeout, WriteTimeout: DefaultWriteTimeout,
		IdleTimeout: DefaultIdleTimeout,
	}
}

// limitsDefaults are the viper defaults of limits.* and metrics_addr
// (a key viper does not know is not read from the environment).
func limitsDefaults(l LimitsConfig) map[string]any {
	return map[string]any{
		"metrics_addr":                    "",
		"limits.connections":              l.Connections,
		"limits.connections_per_peer":     l.ConnectionsPerPeer,
		"limits.operator_reserve":         l.OperatorReserve,
		"limits.unauthenticated":          l.Unauthenticated,
		"limits.unauthenticated_per_peer": l.UnauthenticatedPerPeer,
		"limits.unauthenticated_timeout":  l.UnauthenticatedTimeout,
		"limits.header_timeout":           l.HeaderTimeout,
		"limits.body_timeout":             l.BodyTimeout,
		"limits.write_timeout":            l.WriteTimeout,
		"limits.idle_timeout":             l.IdleTimeout,
		"limits.max_submit_body":          l.MaxSubmitBody,
	}
}

// MarshalJSON prints durations as "10s" rather than nanoseconds, for
// `tidectld config dump`.
func (l LimitsConfig) MarshalJSON() ([]byte, error) {
	type plain LimitsConfig
	return json.Marshal(struct {
		plain
		UnauthenticatedTimeout string `json:"unauthenticated_timeout"`
		HeaderTimeout          string `json:"header_timeout"`
		BodyTimeout            string `json:"body_timeout"`
		WriteTimeout           string `json:"write_timeout"`
		IdleTimeout            string `json:"idle_timeout"`
	}{plain(l), l.UnauthenticatedTimeout.String(), l.HeaderTimeout.String(), l.BodyTimeout.String(),
		l.WriteTimeout.String(), l.IdleTimeout.String()})
}

// SubmitBodyLimit is the largest submission request body in bytes:
// limits.max_submit_body, or when that is empty room for the largest
// script and environment submit.* allow as JSON (which writes a
// newline or a quote in two bytes) plus 1 MiB of options, and at least
// 16 MiB. A submission within the script and environment limits then
// always reaches their checks, whose answers name the script or the
// environment.
func (c Config) SubmitBodyLimit() (int64, error) {
	if c.Limits.MaxSubmitBody == "" {
		return max(2*(int64(c.Submit.MaxScriptSize)+int64(c.Submit.MaxEnvSize))+1<<20, minSubmitBody), nil
	}
	mb, err := api.ParseMemMB(c.Limits.MaxSubmitBody)
	if err != nil {
		return 0, err
	}
	return mb << 20, nil
}

// validateLimits checks limits.* and metrics_addr.
func (c Config) validateLimits(bad func(string, ...any)) {
	l := c.Limits
	if l.Connections < 1 {
		bad("limits.connections: %d must be at least 1", l.Connections)
	}
	if l.ConnectionsPerPeer < 1 || l.ConnectionsPerPeer > l.Connections {
		bad("limits.connections_per_peer: %d is not between 1 and limits.connections (%d)", l.ConnectionsPerPeer, l.Connections)
	}
	if l.OperatorReserve < 0 || l.OperatorReserve >= l.Connections {
		bad("limits.operator_reserve: %d is not between 0 and limits.connections-1 (%d)", l.OperatorReserve, l.Connections-1)
	}
	if l.Unauthenticated < 1 || l.Unauthenticated >= l.Connections {
		bad("limits.unauthenticated: %d is not between 1 and limits.connections-1 (%d): nodes that show the key need room", l.Unauthenticated, l.Connections-1)
	}
	if l.UnauthenticatedPerPeer < 1 || l.UnauthenticatedPerPeer > l.Unauthenticated {
		bad("limits.unauthenticated_per_peer: %d is not between 1 and limits.unauthenticated (%d)", l.UnauthenticatedPerPeer, l.Unauthenticated)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"unauthenticated_timeout", l.UnauthenticatedTimeout}, {"header_timeout", l.HeaderTimeout},
		{"body_timeout", l.BodyTimeout}, {"write_timeout", l.WriteTimeout}, {"idle_timeout", l.IdleTimeout},
	} {
		if d.v < 100*time.Millisecond {
			bad("limits.%s: %s is too short (at least 100ms)", d.key, d.v)
		}
	}
	if n, err := c.SubmitBodyLimit(); err != nil {
		bad("limits.max_submit_body: %v", err)
	} else if n < 1<<20 {
		bad("limits.max_submit_body: %s is below 1M", l.MaxSubmitBody)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			bad("metrics_addr: %q is not host:port: %v", c.MetricsAddr, err)
		} else if c.MetricsAddr == c.NodeAddr {
			bad("metrics_addr: %q is node_addr; leave it empty to serve /metrics on node_addr", c.MetricsAddr)
		}
	}
}
