package client

import (
	"context"

	"github.com/tide-hpc/tide/ctld/api"
)

// Priority lists the multifactor factors of the pending jobs f selects
// (sprio) and the weights in force; PriorityList.Weights is nil when the
// controller's policy has no multifactor priority.
func (c *Client) Priority(ctx context.Context, f api.JobFilter) (api.PriorityList, error) {
	var r api.PriorityList
	err := c.do(ctx, methodGet, api.PathPriority, f.Values(), nil, &r)
	return r, err
}
