package ctld

// sacct -M/--clusters: the accounting of several clusters whose
// controllers share one PostgreSQL store, each cluster in a schema of its
// own (issue 26; the store's side and the naming rule are in
// accounting/clusters.go). Other clusters' jobs, steps and usage are read
// from the store only: this controller knows nothing else of them (not
// the running values of their steps, which their own controllers keep in
// memory for sstat).

import (
	"context"
	"fmt"
	"strings"

	"github.com/tide-hpc/tide/accounting"
	"github.com/tide-hpc/tide/ctld/api"
)

// clusterStore is what reading other clusters' accounting needs from the
// store; *accounting.Store has it. It is asserted rather than added to
// Store: a store without it answers for this controller's cluster only.
type clusterStore interface {
	QueryClusters(ctx context.Context, clusters []string, f api.JobFilter) ([]api.Job, error)
	ClusterSteps(ctx context.Context, cluster string, jobIDs []uint64) ([]api.StepRecord, error)
	ClusterUsage(ctx context.Context, cluster string, jobIDs []uint64) ([]api.NodeUsage, error)
}

var _ clusterStore = (*accounting.Store)(nil)

// queryAccounting answers sacct's query f: the jobs of this controller's
// cluster, or with f.Clusters those of the clusters it names ("all":
// every cluster of the store), sorted by cluster and id. Every job
// carries its cluster's name. The caller narrows f and filters the
// answer by its view (privacy.go) whatever the cluster: the uids of
// clusters sharing a store are one user base, as under slurmdbd.
func (s *Server) queryAccounting(ctx context.Context, f api.JobFilter) ([]api.Job, error) {
	var jobs []api.Job
	var err error
	if s.onlyLocal(f.Clusters) {
		jobs, err = s.store.QueryJobs(ctx, f)
	} else if cs, serr := s.sharedStore(); serr != nil {
		err = serr
	} else {
		jobs, err = cs.QueryClusters(ctx, f.Clusters, f)
	}
	if err != nil {
		return nil, storeReadError("query accounting", err)
	}
	for i := range jobs {
		// Records from before jobs carried their cluster are this
		// controller's: other clusters' come named by the store.
		if jobs[i].Cluster == "" {
			jobs[i].Cluster = s.cl.ClusterName
		}
	}
	s.livePendingReasons(jobs)
	return jobs, nil
}

// livePendingReasons gives this cluster's pending jobs in jobs the
// reasons the last pass gave them: those are not stored (schedulePass).
func (s *Server) livePendingReasons(jobs []api.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range jobs {
		j := &jobs[i]
		if j.State != api.StatePending || j.Cluster != s.cl.ClusterName {
			continue
		}
		if live := s.jobs[j.ID]; live != nil && live.State == api.StatePending {
			j.Reason, j.ReasonDetail = live.Reason, live.ReasonDetail
		}
	}
}

// sharedStore is the store as one that reads other clusters' tables,
// or the error for a store that holds this cluster only.
func (s *Server) sharedStore() (clusterStore, error) {
	cs, ok := s.store.(clusterStore)
	if !ok {
		return nil, api.Errorf(api.ErrInvalidArgument, "this controller's store holds only cluster %s", s.cl.ClusterName)
	}
	return cs, nil
}

// onlyLocal reports whether clusters asks for this controller's cluster
// alone (or names none), which its own tables answer.
func (s *Server) onlyLocal(clusters []string) bool {
	for _, c := range clusters {
		if c = strings.TrimSpace(c); c != "" && c != s.cl.ClusterName {
			return false
		}
	}
	return true
}

// clusterSteps answers sacct's steps of another cluster's jobs (sacct
// -M): read from that cluster's tables of a shared store. The steps of
// running jobs there are as that cluster's controller last stored them.
func (s *Server) clusterSteps(ctx context.Context, cluster string, ids []uint64) ([]api.StepRecord, error) {
	cs, err := s.sharedStore()
	if err != nil {
		return nil, err
	}
	steps, err := cs.ClusterSteps(ctx, cluster, ids)
	if err != nil {
		return nil, storeReadError("query steps", err)
	}
	return steps, nil
}

// clusterUsage answers sacct's usage of another cluster's jobs (sacct
// -M): the node reports stored in that cluster's tables of a shared
// store, summed per step as listUsage sums this controller's.
func (s *Server) clusterUsage(ctx context.Context, cluster string, ids []uint64) ([]api.StepUsage, error) {
	cs, err := s.sharedStore()
	if err != nil {
		return nil, err
	}
	rows, err := cs.ClusterUsage(ctx, cluster, ids)
	if err != nil {
		return nil, storeReadError("query usage", err)
	}
	return summarizeRows(rows), nil
}

// storeReadError is the answer's error for a failed read of the store:
// a failure of the store is internal, named by what; a refusal of the
// query (an invalid cluster name) keeps its class.
func storeReadError(what string, err error) error {
	if _, code := api.HTTPStatus(err); code == "internal" {
		return fmt.Errorf("%s: %w: %w", what, api.ErrInternal, err)
	}
	return err
}
