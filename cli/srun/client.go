package srun

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/stepio"
)

// StepAPI is the controller API srun and salloc need: the commands'
// API plus steps and allocation release. *client.Client implements it.
type StepAPI interface {
	cmdutil.API
	CreateStep(ctx context.Context, id uint64, req api.StepRequest) (api.StepResponse, error)
	EndStep(ctx context.Context, id uint64, step uint32, e api.StepEnd) error
	Release(ctx context.Context, id uint64, exit api.ExitStatus) error
}

var _ StepAPI = (*client.Client)(nil)

// StepClient returns the factory's client as a StepAPI.
func StepClient(get func() (cmdutil.API, error)) (StepAPI, error) {
	c, err := get()
	if err != nil {
		return nil, err
	}
	s, ok := c.(StepAPI)
	if !ok {
		return nil, fmt.Errorf("the controller client (%T) cannot run steps", c)
	}
	return s, nil
}

// RideOut makes c keep trying, as sbatch does, while the controller
// cannot be reached (a restart): the allocation's submission, step
// creations that surely did not reach it, step ends. TIDE_SUBMIT_RETRY
// bounds it; prog names the command in the notice on errOut.
func RideOut(c StepAPI, prog string, errOut io.Writer) error {
	rc, ok := c.(*client.Client)
	if !ok {
		return nil
	}
	window, err := client.ParseRetryWindow(os.Getenv(client.RetryEnv))
	if err != nil {
		return err
	}
	rc.SetRetryWindow(window)
	rc.OnRetry(client.RetryNotice(errOut, prog, window))
	return nil
}

// decodeGrant reads a grant srun received (its credential is the node
// daemons' to check).
func decodeGrant(sg api.SignedGrant) (*api.StepGrant, error) { return stepio.Decode(sg) }
