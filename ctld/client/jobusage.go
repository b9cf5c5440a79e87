package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/tide-hpc/tide/ctld/api"
)

// JobUsage returns job id's usage series as the controller sampled it
// (GET /api/v1/jobs/{id}/usage): its points and latest sample.
func (c *Client) JobUsage(ctx context.Context, id uint64) (api.JobUsage, error) {
	var r api.JobUsage
	err := c.do(ctx, methodGet, "/api/v1/jobs/"+strconv.FormatUint(id, 10)+"/usage", nil, nil, &r)
	return r, err
}

// JobUsages returns the latest usage of jobs ids, without their points
// (GET /api/v1/jobs/usage): jobs the controller holds no series of, or
// the caller may not see, are left out. No ids: every series the caller
// may see.
func (c *Client) JobUsages(ctx context.Context, ids []uint64) ([]api.JobUsage, error) {
	q := url.Values{}
	for _, id := range ids {
		q.Add("job", strconv.FormatUint(id, 10))
	}
	var r api.JobUsageList
	err := c.do(ctx, methodGet, "/api/v1/jobs/usage", q, nil, &r)
	return r.Jobs, err
}
