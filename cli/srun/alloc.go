package srun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
)

// Allocation is a granted allocation-only job.
type Allocation struct {
	Job api.Job
}

// AllocOptions is how Allocate waits for an allocation.
type AllocOptions struct {
	// Prog starts the messages ("srun", "salloc") on ErrOut.
	Prog   string
	ErrOut io.Writer
	// Every is how often the job is asked about (default 200 ms).
	Every time.Duration
	// Sigs: a signal received while waiting cancels the request.
	Sigs <-chan os.Signal
	// Immediate, when positive, is how long the job may wait to start
	// (-I): then it is cancelled and Allocate fails with ErrImmediate.
	Immediate time.Duration
	// Quiet leaves out the informational messages (-Q).
	Quiet bool
	// Verbose (-v) names the job while it waits even under -I, which
	// otherwise waits silently: tools read the job id from it.
	Verbose bool
}

// Allocate submits spec as an allocation-only job and waits until it
// runs, telling the user as Slurm's srun and salloc do. Signals on
// o.Sigs while it waits cancel the request. A job that ends before it
// runs is an error.
func Allocate(ctx context.Context, c StepAPI, spec api.JobSpec, o AllocOptions) (*Allocation, error) {
	prog, errOut, every := o.Prog, o.ErrOut, o.Every
	spec.Allocation = true
	spec.Script, spec.ScriptArgs, spec.Environment = "", nil, nil
	spec.Stdout, spec.Stderr, spec.Stdin = "", "", ""
	resp, err := c.Submit(ctx, api.SubmitRequest{Spec: spec})
	if err != nil {
		return nil, fmt.Errorf("Unable to allocate resources: %v", trimPrefix(err))
	}
	if !o.Quiet {
		for _, w := range resp.Warnings {
			cmdutil.Warnf(errOut, prog, "%s", w)
		}
	}
	id := resp.JobID
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	start := time.Now()
	t := time.NewTicker(every)
	defer t.Stop()
	waited := false
	for {
		j, err := c.Job(ctx, id)
		switch {
		case err != nil && !errors.Is(err, api.ErrUnavailable):
			return nil, fmt.Errorf("job %d: %v", id, err)
		case err == nil && j.State == api.StateRunning:
			if waited && !o.Quiet {
				fmt.Fprintf(errOut, "%s: job %d has been allocated resources\n", prog, id)
			}
			return &Allocation{Job: j}, nil
		case err == nil && j.State.Terminal():
			return nil, fmt.Errorf("Unable to allocate resources: job %d ended %s before it started", id, j.State)
		case o.Immediate > 0 && time.Since(start) >= o.Immediate:
			_, _ = c.Cancel(context.Background(), api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{id}}})
			fmt.Fprintf(errOut, "%s: error: Unable to allocate resources: %s\n", prog, api.StepBusy)
			return nil, ErrImmediate
		case err == nil && !waited && (o.Immediate == 0 || o.Verbose):
			waited = true
			if !o.Quiet {
				if prog == "salloc" {
					fmt.Fprintf(errOut, "%s: Pending job allocation %d\n", prog, id)
				}
				fmt.Fprintf(errOut, "%s: job %d queued and waiting for resources\n", prog, id)
			}
		}
		select {
		case <-ctx.Done():
			_, _ = c.Cancel(context.Background(), api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{id}}})
			return nil, ctx.Err()
		case <-o.Sigs:
			_, _ = c.Cancel(context.Background(), api.CancelRequest{Filter: api.JobFilter{IDs: []uint64{id}}})
			fmt.Fprintf(errOut, "%s: Job allocation %d has been revoked.\n", prog, id)
			return nil, ErrRevoked
		case <-t.C:
		}
	}
}

// ErrImmediate: the allocation did not start within -I's time; it was
// cancelled (Allocate said so).
var ErrImmediate = errors.New("allocation not granted in time")

// ErrRevoked: the user gave up waiting for the allocation (Allocate
// printed so).
var ErrRevoked = errors.New("allocation request cancelled")

// trimPrefix drops the controller's "Batch job submission failed: "
// from a submit error: srun and salloc word it their way.
func trimPrefix(err error) string {
	const p = "Batch job submission failed: "
	s := err.Error()
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// Watch polls job id every interval and calls gone once it is no longer
// running (cancelled, timed out, ended), then returns; it also returns
// when ctx ends.
func Watch(ctx context.Context, c StepAPI, id uint64, every time.Duration, gone func(api.Job)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		j, err := c.Job(ctx, id)
		if err == nil && j.State != api.StateRunning {
			gone(j)
			return
		}
	}
}
