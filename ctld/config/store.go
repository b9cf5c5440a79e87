package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// validateStore checks the store key's form; whether the database can
// be reached is the controller's start-up to find out.
func validateStore(store string) error {
	if store == "" {
		return nil
	}
	scheme, rest, ok := strings.Cut(store, "://")
	if !ok {
		return fmt.Errorf("store: %q is not a URL: want sqlite:///path/tide.db or postgres://host/db", redactStore(store))
	}
	switch scheme {
	case "sqlite":
		p, err := url.PathUnescape(rest)
		if err != nil || !filepath.IsAbs(p) || strings.HasSuffix(p, "/") {
			return fmt.Errorf("store: %q must name a file by its absolute path: sqlite:///path/tide.db", store)
		}
	case "postgres", "postgresql":
		u, err := url.Parse(store)
		if err != nil {
			return fmt.Errorf("store: %s: not a valid URL", redactStore(store))
		}
		if strings.Trim(u.Path, "/") == "" {
			return fmt.Errorf("store: %s names no database (postgres://host/dbname)", u.Redacted())
		}
	default:
		return fmt.Errorf("store: scheme %q is not sqlite or postgres", scheme)
	}
	return nil
}

// redactStore hides what may be a password in an unparsable store value.
func redactStore(store string) string {
	if u, err := url.Parse(store); err == nil {
		return u.Redacted()
	}
	scheme, _, _ := strings.Cut(store, ":")
	return scheme + "://…"
}

// isPostgresStore reports whether a valid store URL names PostgreSQL.
func isPostgresStore(store string) bool {
	scheme, _, _ := strings.Cut(store, "://")
	return scheme == "postgres" || scheme == "postgresql"
}
