package sacct

import (
	"context"
	"fmt"
	"strings"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
)

// clusterFilter applies -M/--clusters as Slurm 22.05's sacct does: the
// list names the clusters whose jobs to report, "all" (or the old "-1")
// every cluster. A Tide controller runs one cluster, so its jobs are
// reported when its name is in the list; a name of no cluster Tide knows
// is no error (slurmdbd answers such a query with no jobs), it just
// selects nothing. local is the controller's
// cluster name when it had to be asked ("" otherwise).
func (o *Options) clusterFilter(ctx context.Context, c cmdutil.API) (keep func(*api.Job) bool, local string, err error) {
	all := func(*api.Job) bool { return true }
	var names []string
	for _, n := range o.Clusters {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if strings.EqualFold(n, "all") || n == "-1" {
			return all, "", nil
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		return all, "", nil
	}
	info, err := c.Cluster(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("load cluster name: %w", err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	return func(j *api.Job) bool {
		name := j.Cluster
		if name == "" {
			name = info.Name
		}
		return want[name]
	}, info.Name, nil
}
