package sacct

import (
	"context"
	"fmt"
	"strings"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
)

// clusterList is -M/--clusters as Slurm 22.05's sacct reads it, for the
// controller (api.JobFilter.Clusters): the clusters whose jobs to
// report, or "all" (also spelt "-1", or -L) for every cluster of the
// accounting store. Without -M it is empty: the controller's own
// cluster. The controller reads the other clusters of a shared
// PostgreSQL store; a name of no cluster there selects nothing and is no
// error (slurmdbd answers so); on an SQLite store, which holds one
// cluster, naming another is its error.
func (o *Options) clusterList() []string {
	var names []string
	for _, list := range o.Clusters {
		for _, n := range strings.Split(list, ",") {
			n = strings.TrimSpace(n)
			switch {
			case n == "":
			case strings.EqualFold(n, "all") || n == "-1":
				return []string{"all"}
			default:
				names = append(names, n)
			}
		}
	}
	return names
}

// clusterScope tells this controller's jobs from other clusters' in a
// report: only its own have steps and usage it can serve, and job ids
// repeat across clusters, so another cluster's job 7 must not get the
// steps of this cluster's job 7.
type clusterScope struct {
	// many is set when -M named clusters; local is then the
	// controller's cluster_name.
	many  bool
	local string
}

// clusterScope asks the controller its name when -M named clusters.
func (o *Options) clusterScope(ctx context.Context, c cmdutil.API, asked []string) (clusterScope, error) {
	if len(asked) == 0 {
		return clusterScope{}, nil
	}
	info, err := c.Cluster(ctx)
	if err != nil {
		return clusterScope{}, fmt.Errorf("load cluster name: %w", err)
	}
	return clusterScope{many: true, local: info.Name}, nil
}

// own reports whether j is a job of the controller's own cluster (a
// record without a cluster is).
func (sc clusterScope) own(j *api.Job) bool {
	return !sc.many || j.Cluster == "" || j.Cluster == sc.local
}

// ownJobs are the jobs of jobs that are the controller's own.
func (sc clusterScope) ownJobs(jobs []api.Job) []api.Job {
	if !sc.many {
		return jobs
	}
	var out []api.Job
	for i := range jobs {
		if sc.own(&jobs[i]) {
			out = append(out, jobs[i])
		}
	}
	return out
}
