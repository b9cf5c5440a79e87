package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
)

// prog is the name messages start with (as root.Run prints errors).
const prog = "checkpoint-done"

// Environment variables tided sets in a job.
const (
	EnvJobID = "SLURM_JOB_ID"
	// EnvAck names the file a job may touch instead of calling the
	// controller; tided watches it and reports the acknowledgement.
	EnvAck = "TIDE_CHECKPOINT_ACK"
)

// Options is one run of checkpoint-done.
type Options struct {
	IO     *cmdutil.IOStreams
	API    func() (cmdutil.API, error)
	Getenv func(string) string
	Now    func() time.Time
	// Touch creates the acknowledgement file or sets its times to now.
	Touch func(path string, now time.Time) error

	// JobArg is the job id given on the command line ("" = this job).
	JobArg  string
	Verbose bool
}

// NewCmd returns `tide checkpoint-done [JOBID]`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	o := &Options{IO: f.IO, API: f.API, Getenv: f.Getenv, Now: f.Now, Touch: touch}
	cmd := &cobra.Command{
		Use:   "checkpoint-done [JOBID]",
		Short: "Acknowledge that the job finished writing a checkpoint",
		Long: `checkpoint-done tells Tide that a job finished writing its checkpoint.

Run it from inside the job (it reads SLURM_JOB_ID) after the checkpoint is
safely written, typically in the handler of the job's checkpoint signal
(--signal, SIGUSR1 by default). A job being preempted is then stopped at
once instead of at the end of its grace time, and the scheduler counts the
work a later preemption would lose from this checkpoint.

Inside a job it also touches $TIDE_CHECKPOINT_ACK, which tided watches, so
the acknowledgement arrives even when the controller cannot be reached.
Outside a job, name the job: tide checkpoint-done JOBID.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cmdutil.Usagef("checkpoint-done takes at most one job id, got %d arguments", len(args))
			}
			return nil
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.JobArg = args[0]
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return o.Run(ctx)
		},
	}
	cmd.Flags().BoolVarP(&o.Verbose, "verbose", "v", false, "say what was acknowledged")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cmdutil.Usagef("%s", err) })
	return cmd
}

// parseJobID reads a job id ("123"; an array task's own id, not 12_3).
func parseJobID(s string) (uint64, error) {
	id, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("invalid job id %q", s)
	}
	return id, nil
}

// Run acknowledges the checkpoint: the file first (it needs no
// controller), then the controller.
func (o *Options) Run(ctx context.Context) error {
	envID := strings.TrimSpace(o.Getenv(EnvJobID))
	arg := o.JobArg
	if arg == "" {
		if envID == "" {
			return cmdutil.Usagef("not inside a job (%s is not set): give the job id, as in: tide checkpoint-done JOBID", EnvJobID)
		}
		arg = envID
	}
	id, err := parseJobID(arg)
	if err != nil {
		if o.JobArg == "" {
			return fmt.Errorf("%s=%s: %w", EnvJobID, envID, err)
		}
		return cmdutil.Usagef("%v", err)
	}
	// The acknowledgement file belongs to the job this runs in; another
	// job's acknowledgement goes through the controller only.
	touched := ""
	if ack := o.Getenv(EnvAck); ack != "" && envID != "" && envID == strconv.FormatUint(id, 10) {
		if err := o.Touch(ack, o.Now()); err != nil {
			cmdutil.Warnf(o.IO.ErrOut, prog, "cannot touch %s=%s: %v", EnvAck, ack, err)
		} else {
			touched = ack
		}
	}
	c, err := o.API()
	if err == nil {
		err = c.Checkpoint(ctx, id)
	}
	switch {
	case err == nil:
		if o.Verbose {
			fmt.Fprintf(o.IO.Out, "job %d: checkpoint acknowledged\n", id)
		}
		return nil
	case touched != "" && errors.Is(err, api.ErrUnavailable):
		// tided reports the touched file with the job's next report.
		cmdutil.Warnf(o.IO.ErrOut, prog, "%v; acknowledged through %s (tided reports it)", err, touched)
		if o.Verbose {
			fmt.Fprintf(o.IO.Out, "job %d: checkpoint acknowledged through %s\n", id, touched)
		}
		return nil
	case errors.Is(err, api.ErrNotFound):
		return fmt.Errorf("job %d: %w", id, err)
	}
	return fmt.Errorf("acknowledge the checkpoint of job %d: %w", id, err)
}

// touch creates path or, when it exists, sets its times to now: tided
// notices the change of modification time.
func touch(path string, now time.Time) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chtimes(path, now, now)
}
