package config

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"time"
)

// TLS on the controller's TCP listeners (issue 21): the cluster CA in
// <state_dir>/tls (`tidectld ca init`), the controller's server
// certificate it issues, and the node certificates nodes get with a
// join token.

// TLS modes (tls.mode).
const (
	// TLSAuto turns TLS on when the CA exists in <state_dir>/tls, and
	// leaves the listeners in plain HTTP (nodes with the cluster key)
	// otherwise, with a warning.
	TLSAuto = "auto"
	// TLSOn requires the CA: the controller refuses to start without
	// it. node_addr and api_addr serve TLS only; nodes authenticate
	// with their certificates, never with the cluster key.
	TLSOn = "on"
	// TLSOff serves plain HTTP even when a CA exists: nodes use the
	// cluster key. For trusted networks and tests.
	TLSOff = "off"
)

// Defaults of tls.*.
const (
	// DefaultCertValidity is tls.cert_validity's default: node and
	// controller certificates live 30 days and are renewed after 20.
	DefaultCertValidity = 30 * 24 * time.Hour
	// minCertValidity and maxCertValidity bound tls.cert_validity.
	minCertValidity = 2 * time.Second
	maxCertValidity = 5 * 365 * 24 * time.Hour
)

// TLSConfig is tls.*.
type TLSConfig struct {
	// Mode is auto, on or off (TLSAuto, TLSOn, TLSOff).
	Mode string `mapstructure:"mode" json:"mode"`
	// Hostnames are names and IP addresses the controller's certificate
	// names besides those it always names: the host's name, localhost,
	// 127.0.0.1, ::1, and the IP addresses of node_addr and api_addr
	// when they are not wildcards. Clients must reach the controller at
	// one of them.
	Hostnames []string `mapstructure:"hostnames" json:"hostnames"`
	// CertValidity is how long the certificates the CA issues (the
	// controller's and the nodes') are valid; they are renewed after
	// two thirds of it.
	CertValidity time.Duration `mapstructure:"cert_validity" json:"-"`
}

// MarshalJSON prints the validity as "720h0m0s" rather than
// nanoseconds, for `tidectld config dump`.
func (t TLSConfig) MarshalJSON() ([]byte, error) {
	type plain TLSConfig
	return json.Marshal(struct {
		plain
		CertValidity string `json:"cert_validity"`
	}{plain(t), t.CertValidity.String()})
}

// tlsDefaults are the viper defaults of tls.*.
func tlsDefaults(c Config) map[string]any {
	return map[string]any{
		"tls.mode":          c.TLS.Mode,
		"tls.hostnames":     c.TLS.Hostnames,
		"tls.cert_validity": c.TLS.CertValidity,
	}
}

// validateTLS checks tls.*.
func (c Config) validateTLS(bad func(string, ...any)) {
	switch c.TLS.Mode {
	case TLSAuto, TLSOn, TLSOff:
	default:
		bad("tls.mode: %q is not auto, on or off", c.TLS.Mode)
	}
	if v := c.TLS.CertValidity; v < minCertValidity || v > maxCertValidity {
		bad("tls.cert_validity: %s is not between %s and %s", v, minCertValidity, maxCertValidity)
	}
	for i, h := range c.TLS.Hostnames {
		if net.ParseIP(h) != nil {
			continue
		}
		if h == "" || len(h) > 253 || strings.ContainsAny(h, " \t/:@*") {
			bad("tls.hostnames[%d]: %q is not a host name or IP address", i, h)
		}
	}
}

// ControllerHosts is what the controller's certificate names: the
// host's name (short and as given), localhost, the loopback addresses,
// the IP addresses of node_addr and api_addr when they are not
// wildcards, and tls.hostnames; without duplicates, in that order.
func (c Config) ControllerHosts(hostname string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(h string) {
		if h != "" && !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	add(hostname)
	if short, _, ok := strings.Cut(hostname, "."); ok {
		add(short)
	}
	add("localhost")
	add("127.0.0.1")
	add("::1")
	for _, a := range []string{c.NodeAddr, c.APIAddr} {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			add(ip.String())
		} else if ip == nil && host != "" {
			add(host)
		}
	}
	for _, h := range c.TLS.Hostnames {
		add(h)
	}
	return out
}

// TLSDir is where the CA and the controller's certificate live.
func (c Config) TLSDir() string { return filepath.Join(c.StateDir, "tls") }
