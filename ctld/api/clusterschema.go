package api

import (
	"fmt"
	"strings"
)

// schemaPrefix starts every cluster's PostgreSQL schema name.
const schemaPrefix = "tide_"

// maxClusterName is the longest cluster name that maps to a schema:
// PostgreSQL truncates identifiers to 63 bytes (NAMEDATALEN - 1), which
// could make two long names one schema.
const maxClusterName = 63 - len(schemaPrefix)

// AllClusters is the word of sacct -M (and the store's cross-cluster
// read) for every cluster of a store.
const AllClusters = "all"

// ClusterSchema returns the PostgreSQL schema of cluster name: tide_
// then the name with upper-case letters lowered (Slurm lower-cases
// ClusterName too) and '-' written as '_'. A name that holds any other
// character than ASCII letters, digits, '-' and '_', is longer than 58
// characters, or is "all" (sacct -M's word for every cluster) maps to no
// schema and is refused with ErrInvalidArgument. Two names that differ
// only in case or in '-' against '_' map to one schema: the store's
// registry refuses the second. It lives here, not in the store, so that
// the configuration check (cgo-free) applies the same rule.
func ClusterSchema(name string) (string, error) {
	bad := func(why string) error {
		return fmt.Errorf("cluster_name %q %s: %w", name, why, ErrInvalidArgument)
	}
	switch {
	case name == "":
		return "", bad("is empty")
	case len(name) > maxClusterName:
		return "", bad(fmt.Sprintf("is longer than %d characters, too long for a PostgreSQL schema name (%s<name>)",
			maxClusterName, schemaPrefix))
	case strings.EqualFold(name, AllClusters):
		return "", bad("is sacct -M's word for every cluster")
	}
	b := []byte(name)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		case c >= 'A' && c <= 'Z':
			b[i] = c - 'A' + 'a'
		case c == '-':
			b[i] = '_'
		default:
			return "", bad(fmt.Sprintf("holds %q: a cluster sharing a PostgreSQL store needs a name of letters, digits, '-' and '_'",
				string(rune(c))))
		}
	}
	return schemaPrefix + string(b), nil
}
