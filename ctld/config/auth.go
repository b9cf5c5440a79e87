package config

import (
	"encoding/json"
	"net"
	"strconv"
	"time"
)

// The user API over TCP (api_addr) and how its requests authenticate:
// a MUNGE credential decoded by the controller's munged (munge.*), or
// a JWT signed with the key in jwt.key_file (jwt.*), which `tide token`
// asks the controller to mint. The unix socket needs neither: the
// kernel names its peers.

// Defaults of the authentication settings.
const (
	// DefaultMungeSocket is munge.socket's default, munged's own.
	DefaultMungeSocket = "/run/munge/munge.socket.2"
	// DefaultJWTMaxLifespan is jwt.max_lifespan's default: the longest
	// a token `tide token` mints may live.
	DefaultJWTMaxLifespan = 24 * time.Hour
	// maxJWTMaxLifespan bounds jwt.max_lifespan (ten years): a key is
	// rotated long before.
	maxJWTMaxLifespan = 10 * 365 * 24 * time.Hour
)

// JWTConfig is jwt.*: the HS256 key tokens are signed with, and the
// longest lifespan a minted token may have.
type JWTConfig struct {
	// KeyFile holds the HS256 key, its bytes as they are (at least 32;
	// Slurm's jwt_hs256.key works). The controller refuses to start
	// when group or others may read it. Empty: no tokens are minted or
	// accepted.
	KeyFile string `mapstructure:"key_file" json:"key_file"`
	// MaxLifespan bounds the lifespan a token may be asked for.
	MaxLifespan time.Duration `mapstructure:"max_lifespan" json:"-"`
}

// MarshalJSON prints the lifespan as "24h0m0s" rather than nanoseconds,
// for `tidectld config dump`.
func (j JWTConfig) MarshalJSON() ([]byte, error) {
	type plain JWTConfig
	return json.Marshal(struct {
		plain
		MaxLifespan string `json:"max_lifespan"`
	}{plain(j), j.MaxLifespan.String()})
}

// MungeConfig is munge.*: the local munged that decodes the MUNGE
// credentials of requests on api_addr.
type MungeConfig struct {
	Socket string `mapstructure:"socket" json:"socket"`
}

// authDefaults are the viper defaults of api_addr, jwt.* and munge.* (a
// key viper does not know is not read from the environment).
func authDefaults(c Config) map[string]any {
	return map[string]any{
		"api_addr":         c.APIAddr,
		"jwt.key_file":     c.JWT.KeyFile,
		"jwt.max_lifespan": c.JWT.MaxLifespan,
		"munge.socket":     c.Munge.Socket,
	}
}

// validateAuth checks api_addr, jwt.* and munge.*.
func (c Config) validateAuth(bad func(string, ...any)) {
	if c.APIAddr != "" {
		if _, port, err := net.SplitHostPort(c.APIAddr); err != nil {
			bad("api_addr: %q is not host:port: %v", c.APIAddr, err)
		} else if p, err := strconv.ParseUint(port, 10, 16); err != nil || (p == 0 && port != "0") {
			bad("api_addr: %q has no valid port", c.APIAddr)
		} else if c.APIAddr == c.NodeAddr || c.APIAddr == c.MetricsAddr {
			bad("api_addr: %q is also node_addr or metrics_addr; the user API needs a listener of its own", c.APIAddr)
		}
	}
	if c.JWT.MaxLifespan < time.Minute || c.JWT.MaxLifespan > maxJWTMaxLifespan {
		bad("jwt.max_lifespan: %s is not between 1m and %s", c.JWT.MaxLifespan, maxJWTMaxLifespan)
	}
	if c.APIAddr != "" && c.Munge.Socket == "" {
		bad("munge.socket: must not be empty when api_addr is set")
	}
}
