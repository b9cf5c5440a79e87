package cmdutil

import (
	"fmt"
	"strings"
)

// CheckClusters checks a cluster list (SLURM_CLUSTERS, -M/--clusters)
// against the one cluster a Tide controller runs, local: every name
// must be it, or "all". An empty list passes. fromEnv words the error as
// Slurm does for the variable ("… an invalid entry for SLURM_CLUSTERS")
// rather than the option.
func CheckClusters(list, local string, fromEnv bool) error {
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" || strings.EqualFold(name, "all") || name == local {
			continue
		}
		where := "--cluster"
		if fromEnv {
			where = "SLURM_CLUSTERS"
		}
		return fmt.Errorf("'%s' can't be reached now, or it is an invalid entry for %s.  Use 'sacctmgr list clusters' to see available clusters.", name, where)
	}
	return nil
}
