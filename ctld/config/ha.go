package config

import (
	"os"
	"time"
)

// HAConfig is the ha: block: how this controller takes turns as primary
// with the others that share its store (ctld/leader.go).
type HAConfig struct {
	// ControllerName names this controller in the store's leader lease
	// and in scontrol ping; empty is the host name. Controllers that
	// share a store must have different names: a controller takes a
	// lease held under its own name at once (it restarted).
	ControllerName string `mapstructure:"controller_name" json:"controller_name,omitempty"`
	// LeaseTTL is how long the lease lasts unrenewed: a standby takes
	// over at most this long (and a poll) after the primary dies.
	LeaseTTL time.Duration `mapstructure:"lease_ttl" json:"lease_ttl"`
}

// DefaultLeaseTTL is ha.lease_ttl's default: a standby serves within
// 10 seconds of a primary's death (6 s, a second's poll, recovery).
const DefaultLeaseTTL = 6 * time.Second

// Lease TTL bounds: under a second a busy store's commit could outlast
// a renewal; past ten minutes nobody would wait for a failover.
const (
	minLeaseTTL = time.Second
	maxLeaseTTL = 10 * time.Minute
)

// Name is the controller's name: ha.controller_name, else the host
// name.
func (h HAConfig) Name() string {
	if h.ControllerName != "" {
		return h.ControllerName
	}
	if hn, err := os.Hostname(); err == nil && hn != "" {
		return hn
	}
	return "tidectld"
}

func (h HAConfig) validate(bad func(string, ...any)) {
	if h.LeaseTTL < minLeaseTTL || h.LeaseTTL > maxLeaseTTL {
		bad("ha.lease_ttl: %v is not between %v and %v", h.LeaseTTL, minLeaseTTL, maxLeaseTTL)
	}
	if n := h.ControllerName; len(n) > 255 || !printable(n) {
		bad("ha.controller_name: %q must be at most 255 printable characters", n)
	}
}

// printable reports whether s has no control characters.
func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
