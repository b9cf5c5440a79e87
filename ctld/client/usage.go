package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/tide-hpc/tide/ctld/api"
)

// Usage returns what the steps of jobs ids used (sacct's usage fields),
// one api.StepUsage per step that a node reported, batch steps
// included (StepID api.BatchStepID).
func (c *Client) Usage(ctx context.Context, ids []uint64) ([]api.StepUsage, error) {
	return c.ClusterUsage(ctx, "", ids)
}

// ClusterUsage is Usage for the jobs ids of cluster, another cluster of
// the controller's shared store ("" = its own), for sacct -M.
func (c *Client) ClusterUsage(ctx context.Context, cluster string, ids []uint64) ([]api.StepUsage, error) {
	q := url.Values{}
	for _, id := range ids {
		q.Add("job", strconv.FormatUint(id, 10))
	}
	if cluster != "" {
		q.Set("cluster", cluster)
	}
	var r api.UsageList
	if err := c.do(ctx, methodGet, "/api/v1/accounting/usage", q, nil, &r); err != nil {
		return nil, err
	}
	if cluster != "" && r.Cluster != cluster {
		// A controller from before clusters' usage answers with its
		// own cluster's usage of the same ids.
		return nil, api.Errorf(api.ErrNotFound, "the controller does not serve the usage of cluster %s", cluster)
	}
	return r.Usage, nil
}

// LiveUsage returns the running values of the running steps of jobs ids
// (sstat), as the nodes sampled them last.
func (c *Client) LiveUsage(ctx context.Context, ids []uint64) ([]api.StepUsage, error) {
	q := url.Values{"live": {"1"}}
	for _, id := range ids {
		q.Add("job", strconv.FormatUint(id, 10))
	}
	var r api.UsageList
	err := c.do(ctx, methodGet, "/api/v1/accounting/usage", q, nil, &r)
	return r.Usage, err
}
