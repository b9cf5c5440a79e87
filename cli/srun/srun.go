package srun

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/pki"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// prog is the name messages start with.
const prog = "srun"

// Options is what one srun run needs; NewCmd fills it from the Factory.
type Options struct {
	IO       *cmdutil.IOStreams
	API      func() (cmdutil.API, error)
	Args     []string
	Getenv   func(string) string
	Environ  func() []string
	Getwd    func() (string, error)
	Hostname func() (string, error)
	Now      func() time.Time
	// PollInterval is how often srun asks whether its allocation runs.
	PollInterval time.Duration
	// WatchInterval is how often srun, holding its own allocation, checks
	// that the allocation still runs (scancel, time limit).
	WatchInterval time.Duration
}

// NewCmd returns the srun command. Flag parsing is srun's own (sbatch's
// getopt table plus srun's options, stopping at the command).
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	o := &Options{IO: f.IO, API: f.API, Getenv: f.Getenv, Environ: f.Environ, Getwd: f.Getwd,
		Hostname: f.Hostname, Now: f.Now, PollInterval: 200 * time.Millisecond, WatchInterval: 2 * time.Second}
	return cmdutil.RawCommand("srun [OPTIONS...] executable [args...]", "Run a parallel job step",
		func(ctx context.Context, args []string) error {
			o.Args = args
			return Run(ctx, o)
		})
}

// failf prints "srun: error: ..." and returns exit code 1.
func failf(w io.Writer, format string, args ...any) error {
	return cmdutil.Failf(w, prog, format, args...)
}

// Run parses the command line and runs the step.
func Run(ctx context.Context, o *Options) error {
	errOut := o.IO.ErrOut
	in := ParseInput{}
	if o.Environ != nil {
		in.Environ = o.Environ()
	}
	if o.Now != nil {
		in.Now = o.Now()
	}
	var err error
	if in.Cwd, err = o.Getwd(); err != nil {
		return failf(errOut, "getcwd failed: %v", err)
	}
	in.Host, _ = o.Hostname()
	a, err := ParseArgs(o.Args, in)
	if err != nil {
		fmt.Fprintf(errOut, "%s: %s\nTry \"srun --help\" for more information\n", prog, termsafe.Escape(err.Error()))
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	switch {
	case a.Help || a.Usage:
		io.WriteString(o.IO.Out, helpText)
		return nil
	case a.Version:
		fmt.Fprintln(o.IO.Out, "slurm 22.05.8 (tide)")
		return nil
	case len(a.Argv) == 0:
		fmt.Fprintf(errOut, "%s: fatal: No command given to execute.\n", prog)
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	for _, w := range a.Warnings {
		cmdutil.Warnf(errOut, prog, "%s", w)
	}
	c, err := StepClient(o.API)
	if err == nil {
		err = RideOut(c, prog, errOut)
	}
	if err != nil {
		return failf(errOut, "%v", err)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	jobID := a.JobID
	if jobID == 0 {
		if v := strings.TrimSpace(o.Getenv("SLURM_JOB_ID")); v != "" {
			if jobID, err = strconv.ParseUint(v, 10, 64); err != nil {
				return failf(errOut, "Invalid SLURM_JOB_ID %q", v)
			}
		}
	}
	stepCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	own := jobID == 0
	if own {
		alloc, err := Allocate(ctx, c, a.Spec, prog, errOut, o.PollInterval, sigs)
		if errors.Is(err, ErrRevoked) {
			return &cmdutil.SilentError{Code: cmdutil.ExitError}
		}
		if err != nil {
			return failf(errOut, "%v", err)
		}
		jobID = alloc.Job.ID
		go Watch(stepCtx, c, jobID, o.WatchInterval, func(j api.Job) {
			fmt.Fprintf(errOut, "%s: error: job %d ended %s: terminating its step\n", prog, jobID, j.State)
			cancel()
		})
	}
	code, err := step(stepCtx, c, jobID, a, o, sigs)
	if own {
		exit := api.ExitStatus{Code: code}
		if code > 128 {
			exit = api.ExitStatus{Signal: code - 128}
		}
		if err != nil {
			exit = api.ExitStatus{Code: 1}
		}
		if rerr := c.Release(context.Background(), jobID, exit); rerr != nil {
			cmdutil.Errorf(errOut, prog, "release job %d: %v", jobID, rerr)
		}
	}
	if err != nil {
		return failf(errOut, "%v", err)
	}
	if code != 0 {
		return &cmdutil.SilentError{Code: code}
	}
	return nil
}

// step creates and runs one step of job id and returns srun's exit code.
func step(ctx context.Context, c StepAPI, id uint64, a *Args, o *Options, sigs <-chan os.Signal) (int, error) {
	spec := a.Spec
	req := api.StepRequest{Argv: a.Argv, Name: spec.Name, Nodes: spec.Nodes, Tasks: spec.Tasks,
		TasksPerNode: spec.TasksPerNode, CPUsPerTask: spec.CPUsPerTask, GPUsPerTask: spec.GPUsPerTask,
		Cwd: spec.WorkDir, Env: spec.Environment, Pty: a.Pty}
	resp, err := c.CreateStep(ctx, id, req)
	if err != nil {
		return 1, err
	}
	so := stepOptions{label: a.Label, unbuffered: a.Unbuffered, killBadExit: a.KillBadEx,
		stdout: spec.Stdout, stderr: spec.Stderr, stdin: spec.Stdin, cwd: spec.WorkDir,
		in: o.IO.In, out: o.IO.Out, errOut: o.IO.ErrOut, signals: sigs}
	if resp.CA != "" {
		cas, err := pki.ParseCerts([]byte(resp.CA))
		if err != nil {
			return 1, fmt.Errorf("the controller's CA for the step: %w", err)
		}
		so.ca = x509.NewCertPool()
		for _, c := range cas {
			so.ca.AddCert(c)
		}
	}
	if a.Pty {
		if f, ok := o.IO.In.(*os.File); ok && isTerminal(f) {
			restore, err := makeRaw(f)
			if err == nil {
				defer restore()
			}
			so.term = f
		}
	}
	res, runErr := runStep(ctx, resp.Grant, so)
	stepID, _ := decodeIDs(resp.Grant)
	end := api.StepEnd{Exit: res.exit, Cancelled: res.cancelled || ctx.Err() != nil}
	if runErr != nil {
		end = api.StepEnd{Exit: api.ExitStatus{Code: 1}}
	}
	if err := c.EndStep(context.Background(), id, stepID, end); err != nil {
		cmdutil.Errorf(o.IO.ErrOut, prog, "record end of step %d.%d: %v", id, stepID, err)
	}
	if runErr != nil {
		return 1, runErr
	}
	return res.code, nil
}

// decodeIDs returns the step id of a grant (0 if unreadable).
func decodeIDs(sg api.SignedGrant) (uint32, error) {
	g, err := decodeGrant(sg)
	if err != nil {
		return 0, err
	}
	return g.StepID, nil
}

const helpText = `Usage: srun [OPTIONS...] executable [args...]

Runs a job step: executable in every task, inside the allocation named by
SLURM_JOB_ID or --jobid, else in a new allocation that srun asks for and
gives back when the step ends.

srun's own options:
  -l, --label                 prepend the task number to every output line
  -K, --kill-on-bad-exit[=0|1] end the whole step when a task exits non-zero
      --pty                   run task 0 in a pseudo-terminal (srun --pty bash)
  -u, --unbuffered            do not line-buffer the tasks' output
      --jobid=id              run the step in this job's allocation

Task layout (see sbatch --help for every resource option):
  -N, --nodes=N               nodes of the allocation to use
  -n, --ntasks=ntasks         number of tasks
      --ntasks-per-node=n     tasks per node
  -c, --cpus-per-task=ncpus   CPUs per task
      --gpus-per-task=n       GPUs per task (each task's CUDA_VISIBLE_DEVICES)
  -o, --output=pattern        task output: a file pattern (%t task, %n node id,
                              %N node, %j job, %s step), none, or a task number
  -e, --error=pattern         task stderr, as --output (default: as --output)
  -i, --input=mode            stdin to all (default), none, a task number, or a file
  -J, --job-name=name         the step's (and a new allocation's) name
  -D, --chdir=path            the tasks' working directory
`
