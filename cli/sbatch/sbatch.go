package sbatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/sbatch/opts"
	"github.com/tide-hpc/tide/ctld/api"
	ctldclient "github.com/tide-hpc/tide/ctld/client"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// SlurmVersion is the Slurm release whose sbatch this one follows;
// --version prints it alone, as Slurm's does, because job scripts and
// wrappers parse the line (Tide's own version is `tide version`).
const SlurmVersion = cmdutil.SlurmVersion

// prog is the name messages start with.
const prog = "sbatch"

// Options is what one sbatch run needs; NewCmd fills it from the
// Factory, and tests replace what they must.
type Options struct {
	IO  *cmdutil.IOStreams
	API func() (cmdutil.API, error)

	Args     []string
	Getenv   func(string) string
	Environ  func() []string
	Getwd    func() (string, error)
	Hostname func() (string, error)
	Now      func() time.Time
	ReadFile func(string) ([]byte, error)
	// StdinIsTerminal says whether IO.In is a terminal, in which case no
	// script is read from it.
	StdinIsTerminal func() bool
	// Location is the zone --test-only prints start times in.
	Location *time.Location
	// PollInterval is how often --wait asks about the job.
	PollInterval time.Duration
	// Submitter reads what the job inherits from this process
	// (SLURM_UMASK, SLURM_PRIO_PROCESS); nil sets neither.
	Submitter func() opts.Submitter
}

// NewCmd returns the sbatch command. Cobra is only the shell here: flag
// parsing is disabled because sbatch's getopt_long rules (prefixes,
// option parsing stopping at the script) are not pflag's.
func NewCmd(f *cmdutil.Factory) *cobra.Command { return newCmd(f, nil) }

// newCmd lets tests capture the Options instead of running.
func newCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{
		IO:              f.IO,
		API:             f.API,
		Getenv:          f.Getenv,
		Environ:         f.Environ,
		Getwd:           f.Getwd,
		Hostname:        f.Hostname,
		Now:             f.Now,
		ReadFile:        os.ReadFile,
		StdinIsTerminal: func() bool { return isTerminal(f.IO.In) },
		Location:        time.Local,
		PollInterval:    200 * time.Millisecond,
	}
	return cmdutil.RawCommand("sbatch [OPTIONS...] script [args...]", "Submit a batch script",
		func(ctx context.Context, args []string) error {
			o.Args = args
			if runF != nil {
				return runF(ctx, o)
			}
			o.Submitter = opts.CurrentSubmitter
			return Run(ctx, o)
		})
}

// checkLimits refuses, before anything is sent, a submission over the
// controller's bounds on size (api.CheckSpecLimits): a 100 MB script
// gets its error at once, not after 100 MB crossed the socket. The
// bounds are the defaults unless the submission is over them, when the
// controller is asked for its own (an operator may have raised them).
func checkLimits(ctx context.Context, client cmdutil.API, spec *api.JobSpec) error {
	err := api.CheckSpecLimits(spec, api.DefaultSpecLimits())
	if err == nil {
		return nil
	}
	info, cerr := client.Cluster(ctx)
	if cerr != nil || info.Limits.MaxScriptSize == 0 {
		return nil // the controller checks it anyway
	}
	return api.CheckSpecLimits(spec, info.Limits)
}

// isTerminal reports whether r is a character device.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Run parses, submits and reports, printing as sbatch prints. Failures
// are printed here and returned as *cmdutil.SilentError with the exit
// code.
func Run(ctx context.Context, o *Options) error {
	errOut := o.IO.ErrOut
	in := opts.Input{Args: o.Args, Getenv: o.Getenv, ReadFile: o.ReadFile}
	if o.Environ != nil {
		in.Environ = o.Environ()
		in.LookupEnv = opts.LookupIn(in.Environ)
	}
	if o.Now != nil {
		in.Now = o.Now()
	}
	if o.StdinIsTerminal == nil || !o.StdinIsTerminal() {
		in.Stdin = o.IO.In
	}
	var err error
	if in.Cwd, err = o.Getwd(); err != nil {
		return failf(errOut, "getcwd failed: %v", err)
	}
	if in.Host, err = o.Hostname(); err != nil {
		return failf(errOut, "cannot get the submit host name: %v", err)
	}

	req, err := opts.Parse(in)
	if err != nil {
		var pe *opts.Error
		if errors.As(err, &pe) {
			pe.Write(errOut, prog)
			return &cmdutil.SilentError{Code: cmdutil.ExitError}
		}
		return failf(errOut, "%v", err)
	}
	switch req.Action {
	case opts.ActionHelp:
		opts.Help(o.IO.Out)
		return nil
	case opts.ActionUsage:
		opts.Usage(o.IO.Out)
		return nil
	case opts.ActionVersion:
		cmdutil.WriteSlurmVersion(o.IO.Out)
		return nil
	}

	if !req.Quiet {
		for _, w := range req.Warnings {
			cmdutil.Warnf(errOut, prog, "%s", w)
		}
	}
	if req.Verbose > 0 {
		for _, l := range opts.DefinedLines(req.Defined) {
			fmt.Fprintf(errOut, "%s: %s\n", prog, termsafe.Escape(l))
		}
	}
	if len(req.ScriptArgs) > 0 {
		req.Spec.ScriptArgs = req.ScriptArgs
	}
	var sub *opts.Submitter
	if o.Submitter != nil {
		s := o.Submitter()
		sub = &s
	}
	req.SetSubmitEnv(sub)

	client, err := o.API()
	if err != nil {
		return failf(errOut, "Batch job submission failed: %v", err)
	}
	if err := checkLimits(ctx, client, &req.Spec); err != nil {
		return failf(errOut, "Batch job submission failed: %v", err)
	}
	window, err := ctldclient.ParseRetryWindow(o.Getenv(ctldclient.RetryEnv))
	if err != nil {
		return failf(errOut, "%v", err)
	}
	onThrottle := func(th ctldclient.Throttle) {
		fmt.Fprintf(errOut, "%s: submission throttled by the controller (queue buffer full); retrying in %s\n", prog, th.RetryIn)
	}
	// The real client is matched by its type first: asserting to an
	// interface it is never converted to builds the method table at run
	// time, a search of its methods that cost each sbatch about 0.5%.
	switch t := client.(type) {
	case *ctldclient.Client:
		t.OnThrottle(onThrottle)
		t.SetRetryWindow(window)
		t.OnRetry(ctldclient.RetryNotice(errOut, prog, window))
	case cmdutil.Throttler:
		t.OnThrottle(onThrottle)
	}
	resp, err := client.Submit(ctx, api.SubmitRequest{Spec: req.Spec, TestOnly: req.TestOnly, User: req.User, Group: req.Group})
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "Batch job submission failed: ")
		return failf(errOut, "Batch job submission failed: %s", msg)
	}
	if !req.Quiet {
		for _, w := range resp.Warnings {
			cmdutil.Warnf(errOut, prog, "%s", w)
		}
	}
	if req.TestOnly {
		loc := o.Location
		if loc == nil {
			loc = time.Local
		}
		fmt.Fprintf(errOut, "%s: Job %d to start at %s using %d processors on nodes %s in partition %s\n",
			prog, resp.JobID, resp.TestStart.In(loc).Format("2006-01-02T15:04:05"),
			resp.TestCPUs, termsafe.Escape(resp.TestNodes), termsafe.Escape(resp.TestPartition))
		return nil
	}
	// Without fmt: on the usual path this is sbatch's only formatted
	// output, and fmt's first use costs more than the printing itself.
	line := make([]byte, 0, 48)
	if !req.Parsable {
		line = append(line, "Submitted batch job "...)
	}
	line = strconv.AppendUint(line, resp.JobID, 10)
	o.IO.Out.Write(append(line, '\n'))
	if !req.Wait {
		return nil
	}
	code, err := waitJob(ctx, client, resp.JobID, o.PollInterval)
	if err != nil {
		return failf(errOut, "waiting for job %d: %v", resp.JobID, err)
	}
	if code != 0 {
		return &cmdutil.SilentError{Code: code}
	}
	return nil
}

// failf prints "sbatch: error: ..." and returns exit code 1.
func failf(w io.Writer, format string, args ...any) error {
	return cmdutil.Failf(w, prog, format, args...)
}

// waitJob polls until the job is terminal and returns the exit code
// sbatch -W exits with. A controller that is briefly unavailable is
// waited out; a job gone from the queue is looked up in accounting.
func waitJob(ctx context.Context, c cmdutil.API, id uint64, every time.Duration) (int, error) {
	if every <= 0 {
		every = 200 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		j, err := c.Job(ctx, id)
		if errors.Is(err, api.ErrNotFound) {
			list, aerr := c.Accounting(ctx, api.JobFilter{IDs: []uint64{id}, All: true})
			if aerr != nil {
				return 0, aerr
			}
			if len(list.Jobs) == 0 {
				return 0, err
			}
			j, err = list.Jobs[0], nil
		}
		switch {
		case err == nil && j.State.Terminal():
			return waitExitCode(&j), nil
		case err != nil && !errors.Is(err, api.ErrUnavailable):
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// waitExitCode is the job's exit code, or 1 when it ended by a signal or
// failed without one, as sbatch -W does.
func waitExitCode(j *api.Job) int {
	switch {
	case j.Exit.Signal != 0:
		return 1
	case j.Exit.Code != 0:
		return j.Exit.Code
	case j.State != api.StateCompleted:
		return 1
	}
	return 0
}
