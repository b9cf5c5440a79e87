package srun

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/sbatch/opts"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/pki"
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
	// Submitter reads what the step inherits from this process
	// (SLURM_UMASK, SLURM_PRIO_PROCESS); nil sets neither.
	Submitter func() opts.Submitter
}

// NewCmd returns the srun command. Flag parsing is srun's own (sbatch's
// getopt table plus srun's options, stopping at the command).
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	o := &Options{IO: f.IO, API: f.API, Getenv: f.Getenv, Environ: f.Environ, Getwd: f.Getwd,
		Hostname: f.Hostname, Now: f.Now, PollInterval: 200 * time.Millisecond, WatchInterval: 2 * time.Second,
		Submitter: opts.CurrentStepSubmitter}
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

// SlurmVersion is the Slurm release srun and salloc answer -V with.
const SlurmVersion = "22.05.8"

// Run parses the command line and runs the step.
func Run(ctx context.Context, o *Options) error {
	errOut := o.IO.ErrOut
	in := ParseInput{}
	if o.Environ != nil {
		in.Environ = o.Environ()
		in.EnvVars = SrunEnvVars(in.Environ)
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
		var pe *ParseError
		if !errors.As(err, &pe) {
			pe = &ParseError{Lines: []string{err.Error()}}
		}
		pe.Write(errOut, prog)
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	var sub *opts.Submitter
	if o.Submitter != nil {
		s := o.Submitter()
		sub = &s
	}
	a.Spec.Environment = StepEnvironment(a, sub)
	switch {
	case a.Help:
		writeHelp(o.IO.Out, forSrun)
		return nil
	case a.Usage:
		writeUsage(o.IO.Out, forSrun)
		return nil
	case a.Version:
		fmt.Fprintln(o.IO.Out, "slurm "+SlurmVersion)
		return nil
	case a.CPUBindHelp:
		io.WriteString(o.IO.Out, CPUBindHelp)
		return nil
	case a.MPIList:
		fmt.Fprintln(o.IO.Out, "MPI plugin types are...")
		for _, t := range mpiTypes {
			fmt.Fprintf(o.IO.Out, "\t%s\n", t)
		}
		return nil
	}
	v := newVerbose(errOut, a)
	v.defined(a.Defined)
	if a.NoAllocate {
		return failf(errOut, "--no-allocate: Tide runs tasks only inside allocations")
	}
	if len(a.Argv) == 0 && !a.TestOnly {
		fmt.Fprintf(errOut, "%s: fatal: No command given to execute.\n", prog)
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	if !a.Quiet {
		for _, w := range a.Warnings {
			cmdutil.Warnf(errOut, prog, "%s", w)
		}
	}
	var taskArgv [][]string
	if a.MultiProg {
		path := a.Argv[0]
		if !filepath.IsAbs(path) {
			path = filepath.Join(a.Spec.WorkDir, path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return failf(errOut, "Unable to open configuration file %s", a.Argv[0])
		}
		taskArgv, err = ParseMultiProg(string(data), a.Argv[0], a.Spec.Tasks, a.Argv[1:])
		if err != nil {
			var pe *ParseError
			if errors.As(err, &pe) {
				pe.Write(errOut, prog)
				return &cmdutil.SilentError{Code: cmdutil.ExitError}
			}
			return failf(errOut, "%v", err)
		}
		a.Spec.Tasks = len(taskArgv)
	}
	if err := readHostfile(a, o.Getenv); err != nil {
		return failf(errOut, "%v", err)
	}
	if a.Spec.CPUsPerTask > 0 && !a.Exact && !a.Whole && !a.Overlap {
		v.say(1, "Implicitly setting --exact, because -c/--cpus-per-task given.")
	}
	c, err := StepClient(o.API)
	if err == nil {
		err = RideOut(c, prog, errOut)
	}
	if err != nil {
		return failf(errOut, "%v", err)
	}
	if a.TestOnly {
		return testOnly(ctx, c, a, errOut)
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
		stop := make(chan struct{})
		alloc, err := Allocate(ctx, c, a.Spec, AllocOptions{Prog: prog, ErrOut: errOut, Every: o.PollInterval,
			Sigs: revoking(sigs, stop), Immediate: time.Duration(a.Immediate) * time.Second, Quiet: a.Quiet, Verbose: a.Verbose > 0})
		close(stop)
		if errors.Is(err, ErrRevoked) || errors.Is(err, ErrImmediate) {
			return &cmdutil.SilentError{Code: cmdutil.ExitError}
		}
		if err != nil {
			return failf(errOut, "%v", err)
		}
		jobID = alloc.Job.ID
		v.say(1, JobLine(&alloc.Job))
		a.Spec.Environment = WithJobEnv(a.Spec.Environment, &alloc.Job)
		go Watch(stepCtx, c, jobID, o.WatchInterval, func(j api.Job) {
			fmt.Fprintf(errOut, "%s: error: job %d ended %s: terminating its step\n", prog, jobID, j.State)
			fmt.Fprintf(errOut, "%s: Job step aborted: Waiting up to %d seconds for job step to finish.\n", prog, abortWait)
			cancel()
		})
	}
	if !own && v.on(1) {
		// Slurm's srun prints the allocation it runs in, its own or not.
		if j, err := c.Job(ctx, jobID); err == nil {
			v.say(1, JobLine(&j))
		}
	}
	code, err := step(stepCtx, c, jobID, a, o, sigs, taskArgv, own, v)
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
	if errors.Is(err, errStepCancelled) {
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	if err != nil {
		return failf(errOut, "%v", err)
	}
	if code != 0 {
		return &cmdutil.SilentError{Code: code}
	}
	return nil
}

// abortWait is the wait srun announces when its step is aborted
// (Slurm's KillWait plus two seconds, at its default).
const abortWait = 32

// stepRequest is the step a's options ask for inside job id's
// allocation; own says that srun made the allocation for it (whose
// time limit is then the job's, not the step's).
func stepRequest(a *Args, taskArgv [][]string, own bool, host string) api.StepRequest {
	spec := a.Spec
	req := api.StepRequest{Argv: a.Argv, Name: spec.Name, Nodes: spec.Nodes, Tasks: spec.Tasks,
		TasksPerNode: spec.TasksPerNode, CPUsPerTask: spec.CPUsPerTask, GPUsPerTask: spec.GPUsPerTask,
		Cwd: spec.WorkDir, Env: spec.Environment, Pty: a.Pty,
		Exact: (a.Exact || spec.Exclusive) && !a.Whole, Overlap: a.Overlap, Overcommit: a.Overcommit, Whole: a.Whole,
		GPUs: spec.GPUs, GPUsPerNode: spec.GPUsPerNode, MemPerCPUMB: spec.MemPerCPUMB,
		NodeList: spec.NodeList, Exclude: spec.Exclude, Relative: a.Relative, Distribution: a.Distribution,
		GPUBind: a.GPUBind, CPUBind: a.CPUBind, TaskArgv: taskArgv, TaskHosts: a.TaskHosts, TaskProlog: a.TaskProlog, TaskEpilog: a.TaskEpilog,
		MPI: a.MPI, PreserveEnv: a.PreserveEnv, SrunHost: host, SrunPID: os.Getpid()}
	if spec.MemPerNodeMB > 0 {
		req.MemPerNodeMB = spec.MemPerNodeMB
	}
	if !own {
		req.TimeLimit = spec.TimeLimit
	}
	return req
}

// step creates and runs one step of job id and returns srun's exit code.
func step(ctx context.Context, c StepAPI, id uint64, a *Args, o *Options, sigs <-chan os.Signal, taskArgv [][]string, own bool, v *verbose) (int, error) {
	spec := a.Spec
	host, _ := o.Hostname()
	req := stepRequest(a, taskArgv, own, host)
	resp, err := createStep(ctx, c, id, req, a.Immediate, o.IO.ErrOut, sigs, o.PollInterval)
	if err != nil {
		return 1, err
	}
	g, err := decodeGrant(resp.Grant)
	if err != nil {
		return 1, err
	}
	if a.Prolog != "" {
		if rc := runLocal(ctx, a.Prolog, a.Argv, spec.Environment, g); rc != 0 {
			cmdutil.Errorf(o.IO.ErrOut, prog, "srun prolog failed rc = %d. Aborting step.", rc)
			_ = c.EndStep(context.Background(), id, g.StepID, api.StepEnd{Exit: api.ExitStatus{Code: 1}, Cancelled: true})
			return 1, errStepCancelled
		}
	}
	so := stepOptions{label: a.Label, unbuffered: a.Unbuffered, killBadExit: a.KillBadEx,
		stdout: spec.Stdout, stderr: spec.Stderr, stdin: spec.Stdin, cwd: spec.WorkDir, appendOut: spec.OpenMode == "append", slurmdDebug: a.SlurmdDebug,
		debuggerTest: a.DebuggerTest, exeOf: func(t int) string {
			if t < len(taskArgv) && len(taskArgv[t]) > 0 {
				return taskArgv[t][0]
			}
			if len(a.Argv) > 0 {
				return a.Argv[0]
			}
			return ""
		},
		in: o.IO.In, out: o.IO.Out, errOut: o.IO.ErrOut, signals: sigs, wait: a.Wait, verbose: v,
		policy:    signalPolicy{quitOnInterrupt: a.QuitOnInterrupt, disableStatus: a.DisableStatus},
		jobEnding: func() bool { return jobEnding(c, id) }}
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
	stepID := g.StepID
	end := api.StepEnd{Exit: res.exit, Cancelled: res.cancelled || ctx.Err() != nil}
	if runErr != nil {
		end = api.StepEnd{Exit: api.ExitStatus{Code: 1}}
	}
	if err := c.EndStep(context.Background(), id, stepID, end); err != nil {
		cmdutil.Errorf(o.IO.ErrOut, prog, "record end of step %d.%d: %v", id, stepID, err)
	}
	if a.Epilog != "" {
		if rc := runLocal(context.Background(), a.Epilog, a.Argv, spec.Environment, g); rc != 0 {
			cmdutil.Errorf(o.IO.ErrOut, prog, "srun epilog failed status=%d", rc)
		}
	}
	if runErr != nil {
		return 1, runErr
	}
	return res.code, nil
}

// jobEndingWait bounds srun's question whether its job is ending.
const jobEndingWait = 2 * time.Second

// jobEnding reports whether job id is ending: no longer RUNNING at the
// controller (a cancel or requeue is under way), or unknown there. A
// controller that does not answer counts as ending: srun then passes the
// signal on rather than kill the tasks without their kill wait.
func jobEnding(c cmdutil.API, id uint64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), jobEndingWait)
	defer cancel()
	j, err := c.Job(ctx, id)
	return err != nil || j.State != api.StateRunning
}

// readHostfile applies -m arbitrary: the file SLURM_HOSTFILE names gives
// the node of each task (opts.ParseHostfile), so the allocation asks
// for those nodes and the step lays its ranks out by it. Without the
// variable the tasks are laid out as block, as Slurm does.
func readHostfile(a *Args, getenv func(string) string) error {
	first, _, _ := strings.Cut(a.Distribution, ",")
	first, _, _ = strings.Cut(first, ":")
	if !strings.EqualFold(first, "arbitrary") || getenv == nil {
		return nil
	}
	path := strings.TrimSpace(getenv("SLURM_HOSTFILE"))
	if path == "" {
		return nil
	}
	name := path
	if !filepath.IsAbs(path) {
		path = filepath.Join(a.Spec.WorkDir, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("Unable to read SLURM_HOSTFILE %s: %v", name, err)
	}
	hosts, err := opts.ParseHostfile(string(data), a.Spec.Tasks)
	if err != nil {
		return fmt.Errorf("SLURM_HOSTFILE %s: %v", name, err)
	}
	distinct := opts.DistinctHosts(hosts)
	a.TaskHosts, a.Spec.NodeList, a.Spec.Tasks, a.Spec.TasksPerNode = hosts, distinct, len(hosts), 0
	if a.Spec.Nodes == 0 || a.Spec.Nodes < len(distinct) {
		a.Spec.Nodes = len(distinct)
	}
	return nil
}
