package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/tide-hpc/tide/ctld/api"
)

// Steps and allocations (issue 7): srun and salloc use these calls; the
// node connections of a step are internal/stepio's.

// CreateStep asks for a step of running job id and returns its signed
// grant.
//
// While the controller cannot be reached it is asked again within the
// retry window (SetRetryWindow), but only when the request surely did
// not create a step: it was never sent, or the controller answered 503.
// A connection broken after the request went out may have made one.
func (c *Client) CreateStep(ctx context.Context, id uint64, req api.StepRequest) (api.StepResponse, error) {
	var r api.StepResponse
	err := c.retrying(ctx, unsentOnly, func() error {
		return c.do(ctx, methodPost, "/api/v1/jobs/"+strconv.FormatUint(id, 10)+"/steps", nil, req, &r)
	})
	return r, err
}

// EndStep records how step id.step ended. The first report stands, so
// it is repeated within the retry window while the controller cannot be
// reached.
func (c *Client) EndStep(ctx context.Context, id uint64, step uint32, e api.StepEnd) error {
	path := "/api/v1/jobs/" + strconv.FormatUint(id, 10) + "/steps/" + strconv.FormatUint(uint64(step), 10) + "/end"
	return c.retrying(ctx, anyUnavailable, func() error { return c.do(ctx, methodPost, path, nil, e, nil) })
}

// Release gives an allocation-only job back; it ends COMPLETED for exit
// 0:0 and FAILED otherwise.
func (c *Client) Release(ctx context.Context, id uint64, exit api.ExitStatus) error {
	return c.do(ctx, methodPost, "/api/v1/jobs/"+strconv.FormatUint(id, 10)+"/release", nil, api.ReleaseRequest{Exit: exit}, nil)
}

// Steps lists the steps of the given jobs from accounting (sacct).
func (c *Client) Steps(ctx context.Context, ids []uint64) ([]api.StepRecord, error) {
	return c.ClusterSteps(ctx, "", ids)
}

// ClusterSteps lists the steps of the given jobs of cluster, another
// cluster of the controller's shared store ("" = its own), for sacct -M.
func (c *Client) ClusterSteps(ctx context.Context, cluster string, ids []uint64) ([]api.StepRecord, error) {
	q := url.Values{}
	for _, id := range ids {
		q.Add("job", strconv.FormatUint(id, 10))
	}
	if cluster != "" {
		q.Set("cluster", cluster)
	}
	var r api.StepList
	if err := c.do(ctx, methodGet, "/api/v1/accounting/steps", q, nil, &r); err != nil {
		return nil, err
	}
	if cluster != "" && r.Cluster != cluster {
		// A controller from before clusters' steps answers with its
		// own cluster's steps of the same ids.
		return nil, api.Errorf(api.ErrNotFound, "the controller does not serve the steps of cluster %s", cluster)
	}
	return r.Steps, nil
}
