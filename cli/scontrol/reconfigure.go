package scontrol

import (
	"context"
	"errors"
	"fmt"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
)

// reconfigurer is the controller call behind scontrol reconfigure (the
// client has it; fakes of cmdutil.API need not).
type reconfigurer interface {
	Reconfigure(ctx context.Context) (api.ReconfigureResponse, error)
}

// reconfigure asks the controller to re-read its configuration file
// and apply it (operators only). As Slurm's, it prints nothing when the
// controller applied the file; a refusal is "scontrol: error:
// slurm_reconfigure error: …" naming each problem, and exit 1 (-Q: the
// exit code alone).
func (o *Options) reconfigure(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("too many arguments for keyword: reconfigure")
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	r, ok := c.(reconfigurer)
	if !ok {
		return errors.New("slurm_reconfigure error: this client cannot ask the controller to reconfigure")
	}
	if _, err := r.Reconfigure(ctx); err != nil {
		if o.Quiet {
			return &cmdutil.SilentError{Code: cmdutil.ExitError}
		}
		return fmt.Errorf("slurm_reconfigure error: %w", err)
	}
	return nil
}
