package client

import (
	"context"

	"github.com/tide-hpc/tide/ctld/api"
)

// Reconfigure asks the controller to re-read its configuration file
// and apply it (scontrol reconfigure; operators only). The answer
// lists what changed; an error names each setting or job that kept the
// file from being applied, and then nothing changed.
func (c *Client) Reconfigure(ctx context.Context) (api.ReconfigureResponse, error) {
	var r api.ReconfigureResponse
	err := c.do(ctx, methodPost, api.PathReconfigure, nil, nil, &r)
	return r, err
}
