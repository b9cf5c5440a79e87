package sacct

import (
	"context"
	"errors"
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
// report: job ids repeat across clusters, so another cluster's job 7
// must not get the steps or usage of this cluster's job 7; other
// clusters' come from their own tables (loadClusterSteps,
// loadClusterUsage).
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

// clusterStepLister is implemented by clients that can list another
// cluster's steps (*client.Client).
type clusterStepLister interface {
	ClusterSteps(ctx context.Context, cluster string, ids []uint64) ([]api.StepRecord, error)
}

// loadClusterSteps fetches the srun steps of the jobs of other clusters
// that started, by cluster and job id (sacct -M on a shared store).
func (o *Options) loadClusterSteps(ctx context.Context, c cmdutil.API, sc clusterScope, jobs []api.Job) (map[string]map[uint64][]api.StepRecord, error) {
	sl, ok := c.(clusterStepLister)
	if !ok || !sc.many || o.Allocations {
		return nil, nil
	}
	order, ids := sc.otherStarted(jobs)
	out := map[string]map[uint64][]api.StepRecord{}
	for _, cl := range order {
		steps, err := sl.ClusterSteps(ctx, cl, ids[cl])
		if err != nil {
			if errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrUnavailable) {
				continue // a controller without other clusters' steps
			}
			return nil, fmt.Errorf("load job steps of cluster %s: %w", cl, err)
		}
		m := map[uint64][]api.StepRecord{}
		for _, st := range steps {
			m[st.JobID] = append(m[st.JobID], st)
		}
		out[cl] = m
	}
	return out, nil
}

// clusterUsageLister is implemented by clients that can list the usage
// of another cluster's steps (*client.Client).
type clusterUsageLister interface {
	ClusterUsage(ctx context.Context, cluster string, ids []uint64) ([]api.StepUsage, error)
}

// loadClusterUsage fetches the usage of the steps of the jobs of other
// clusters that started, by cluster (sacct -M on a shared store). Job
// rows print their CPU times from it, so -X asks too.
func (o *Options) loadClusterUsage(ctx context.Context, c cmdutil.API, sc clusterScope, jobs []api.Job) (map[string]*usageIndex, error) {
	ul, ok := c.(clusterUsageLister)
	if !ok || !sc.many {
		return nil, nil
	}
	order, ids := sc.otherStarted(jobs)
	out := map[string]*usageIndex{}
	for _, cl := range order {
		list, err := ul.ClusterUsage(ctx, cl, ids[cl])
		if err != nil {
			if errors.Is(err, api.ErrNotFound) || errors.Is(err, api.ErrUnavailable) {
				continue // a controller without other clusters' usage
			}
			return nil, fmt.Errorf("load job usage of cluster %s: %w", cl, err)
		}
		out[cl] = newUsageIndex(list)
	}
	return out, nil
}

// otherStarted groups the ids of the jobs of other clusters that
// started by cluster, the clusters in their order in jobs.
func (sc clusterScope) otherStarted(jobs []api.Job) (order []string, ids map[string][]uint64) {
	ids = map[string][]uint64{}
	for i := range jobs {
		j := &jobs[i]
		if sc.own(j) || j.StartTime.IsZero() {
			continue
		}
		if _, seen := ids[j.Cluster]; !seen {
			order = append(order, j.Cluster)
		}
		ids[j.Cluster] = append(ids[j.Cluster], j.ID)
	}
	return order, ids
}
