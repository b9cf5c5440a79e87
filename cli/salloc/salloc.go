package salloc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/sbatch/opts"
	"github.com/tide-hpc/tide/cli/srun"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

const prog = "salloc"

// Options is what one salloc run needs; NewCmd fills it from the Factory.
type Options struct {
	IO       *cmdutil.IOStreams
	API      func() (cmdutil.API, error)
	Args     []string
	Getenv   func(string) string
	Environ  func() []string
	Getwd    func() (string, error)
	Hostname func() (string, error)
	Now      func() time.Time
	// PollInterval is how often salloc asks whether its allocation runs;
	// WatchInterval how often it checks that it still does.
	PollInterval  time.Duration
	WatchInterval time.Duration
	// KillWait is how long the command gets between SIGTERM and SIGKILL
	// when the allocation is revoked.
	KillWait time.Duration
}

// NewCmd returns the salloc command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	o := &Options{IO: f.IO, API: f.API, Getenv: f.Getenv, Environ: f.Environ, Getwd: f.Getwd, Hostname: f.Hostname,
		Now: f.Now, PollInterval: 200 * time.Millisecond, WatchInterval: 2 * time.Second, KillWait: 5 * time.Second}
	return cmdutil.RawCommand("salloc [OPTIONS...] [command [args...]]", "Obtain an allocation and run a command in it",
		func(ctx context.Context, args []string) error {
			o.Args = args
			return Run(ctx, o)
		})
}

// failf prints "salloc: error: ..." and returns exit code 1.
func failf(w io.Writer, format string, args ...any) error {
	return cmdutil.Failf(w, prog, format, args...)
}

// Run allocates, runs the command and releases.
func Run(ctx context.Context, o *Options) error {
	errOut := o.IO.ErrOut
	in := srun.ParseInput{}
	if o.Environ != nil {
		in.Environ = o.Environ()
		in.EnvVars = sallocEnvVars
	}
	if o.Now != nil {
		in.Now = o.Now()
	}
	var err error
	if in.Cwd, err = o.Getwd(); err != nil {
		return failf(errOut, "getcwd failed: %v", err)
	}
	in.Host, _ = o.Hostname()
	in.Salloc = true
	a, err := srun.ParseArgs(o.Args, in)
	if err != nil {
		var pe *srun.ParseError
		if !errors.As(err, &pe) {
			pe = &srun.ParseError{Lines: []string{err.Error()}}
		}
		pe.Write(errOut, prog)
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	switch {
	case a.Help:
		srun.WriteHelp(o.IO.Out, true)
		return nil
	case a.Usage:
		srun.WriteUsage(o.IO.Out, true)
		return nil
	case a.Version:
		fmt.Fprintln(o.IO.Out, "slurm "+srun.SlurmVersion)
		return nil
	}
	if !a.Quiet {
		for _, w := range a.Warnings {
			cmdutil.Warnf(errOut, prog, "%s", w)
		}
	}
	argv := a.Argv
	if len(argv) == 0 {
		sh := o.Getenv("SHELL")
		if sh == "" {
			sh = "/bin/sh"
		}
		argv = []string{sh}
	}
	if a.Spec.Name == "" || a.Spec.Name == "sbatch" {
		a.Spec.Name = "interactive"
	}
	c, err := srun.StepClient(o.API)
	if err == nil {
		err = srun.RideOut(c, prog, errOut)
	}
	if err != nil {
		return failf(errOut, "%v", err)
	}
	// salloc catches the terminal's signals so that they reach the
	// command alone (a caught signal is reset for the child on exec; an
	// ignored one would not be).
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTSTP, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)

	alloc, err := srun.Allocate(ctx, c, a.Spec, srun.AllocOptions{Prog: prog, ErrOut: errOut, Every: o.PollInterval,
		Sigs: onlyTerm(sigs), Immediate: time.Duration(a.Immediate) * time.Second, Quiet: a.Quiet})
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return &cmdutil.SilentError{Code: cmdutil.ExitError}
		}
		if errors.Is(err, srun.ErrRevoked) || errors.Is(err, srun.ErrImmediate) {
			return &cmdutil.SilentError{Code: cmdutil.ExitError}
		}
		return failf(errOut, "%v", err)
	}
	j := alloc.Job
	if a.NoShell {
		// --no-shell: the allocation is the result; it stays until
		// scancel or its time limit.
		fmt.Fprintf(errOut, "%s: Granted job allocation %d\n", prog, j.ID)
		return nil
	}
	if !a.Quiet {
		if a.Bell {
			io.WriteString(errOut, "\a")
		}
		fmt.Fprintf(errOut, "%s: Granted job allocation %d\n", prog, j.ID)
		fmt.Fprintf(errOut, "%s: Nodes %s are ready for job\n", prog, hostlist.Compress(j.NodeNames()))
	}
	killSig := syscall.SIGTERM
	if a.KillCommand > 0 {
		killSig = syscall.Signal(a.KillCommand)
	}
	exit := runCommand(ctx, c, o, j, argv, in.Environ, sigs, killSig)
	if !a.Quiet {
		fmt.Fprintf(errOut, "%s: Relinquishing job allocation %d\n", prog, j.ID)
	}
	if err := c.Release(context.Background(), j.ID, exit); err != nil {
		cmdutil.Errorf(errOut, prog, "release job %d: %v", j.ID, err)
	}
	if code := exitCode(exit); code != 0 {
		return &cmdutil.SilentError{Code: code}
	}
	return nil
}

// onlyTerm passes on the signals that should cancel a waiting request
// (Ctrl-C, SIGTERM, SIGHUP) and drops the others.
func onlyTerm(in <-chan os.Signal) <-chan os.Signal {
	out := make(chan os.Signal, 1)
	go func() {
		for s := range in {
			if s == syscall.SIGINT || s == syscall.SIGTERM || s == syscall.SIGHUP {
				select {
				case out <- s:
				default:
				}
				return
			}
		}
	}()
	return out
}

// runCommand runs argv with the allocation's environment until it exits
// or the allocation ends, and returns its exit.
func runCommand(ctx context.Context, c srun.StepAPI, o *Options, j api.Job, argv, environ []string, sigs <-chan os.Signal, killSig syscall.Signal) api.ExitStatus {
	errOut := o.IO.ErrOut
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = AllocEnv(environ, &j)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.IO.In, o.IO.Out, errOut
	if err := cmd.Start(); err != nil {
		cmdutil.Errorf(errOut, prog, "%s: %v", argv[0], err)
		return api.ExitStatus{Code: 127}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	revoked := make(chan api.Job, 1)
	go srun.Watch(wctx, c, j.ID, o.WatchInterval, func(gone api.Job) { revoked <- gone })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case <-done:
			ps := cmd.ProcessState
			if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return api.ExitStatus{Signal: int(ws.Signal())}
			}
			return api.ExitStatus{Code: ps.ExitCode()}
		case s := <-sigs:
			// The terminal delivers SIGINT, SIGQUIT and SIGTSTP to the
			// command itself; the rest are passed on.
			if s == syscall.SIGTERM || s == syscall.SIGHUP || s == syscall.SIGUSR1 || s == syscall.SIGUSR2 {
				_ = cmd.Process.Signal(s)
			}
		case gone := <-revoked:
			fmt.Fprintf(errOut, "%s: Job allocation %d has been revoked (%s).\n", prog, j.ID, gone.State)
			_ = cmd.Process.Signal(killSig)
			select {
			case <-done:
			case <-time.After(o.KillWait):
				_ = cmd.Process.Kill()
				<-done
			}
			return api.ExitStatus{Signal: int(killSig)}
		}
	}
}

// exitCode is salloc's exit code for the command's exit.
func exitCode(e api.ExitStatus) int {
	if e.Signal != 0 {
		return 128 + e.Signal
	}
	return e.Code
}

// AllocEnv is the command's environment: the caller's, with the
// allocation's SLURM_* variables (and TIDE_* twins) set as salloc sets
// them (srun.JobEnv). It is pure.
func AllocEnv(environ []string, j *api.Job) []string { return srun.WithJobEnv(environ, j) }

// sallocEnvVars are salloc's input variables (man salloc, INPUT
// ENVIRONMENT VARIABLES, as Slurm 22.05's salloc reads them), in the
// order they apply; the command line wins. SALLOC_BELL, SALLOC_NO_BELL,
// SALLOC_IMMEDIATE and SALLOC_KILL_CMD set options Tide's salloc does
// not have.
var sallocEnvVars = []opts.EnvVar{
	{Name: "SALLOC_ACCOUNT", Option: "account"},
	{Name: "SALLOC_ACCTG_FREQ", Option: "acctg-freq"},
	{Name: "SALLOC_BURST_BUFFER", Option: "bb"},
	{Name: "SALLOC_CLUSTER_CONSTRAINT", Option: "cluster-constraint"},
	{Name: "SALLOC_CLUSTERS", Option: "clusters"},
	{Name: "SLURM_CLUSTERS", Option: "clusters"},
	{Name: "SALLOC_CONTAINER", Option: "container"},
	{Name: "SALLOC_CONSTRAINT", Option: "constraint"},
	{Name: "SALLOC_CORE_SPEC", Option: "core-spec"},
	{Name: "SALLOC_CPU_FREQ_REQ", Option: "cpu-freq"},
	{Name: "SALLOC_CPUS_PER_GPU", Option: "cpus-per-gpu"},
	{Name: "SALLOC_DEBUG", Option: "verbose"},
	{Name: "SALLOC_DELAY_BOOT", Option: "delay-boot"},
	{Name: "SALLOC_EXCLUSIVE", Option: "exclusive"},
	{Name: "SALLOC_GPUS", Option: "gpus"},
	{Name: "SALLOC_GPU_BIND", Option: "gpu-bind"},
	{Name: "SALLOC_GPU_FREQ", Option: "gpu-freq"},
	{Name: "SALLOC_GPUS_PER_NODE", Option: "gpus-per-node"},
	{Name: "SALLOC_GPUS_PER_SOCKET", Option: "gpus-per-socket"},
	{Name: "SALLOC_GPUS_PER_TASK", Option: "gpus-per-task"},
	{Name: "SALLOC_GRES", Option: "gres"},
	{Name: "SALLOC_GRES_FLAGS", Option: "gres-flags"},
	{Name: "SALLOC_HINT", Option: "hint"},
	{Name: "SLURM_HINT", Option: "hint"},
	{Name: "SALLOC_MEM_BIND", Option: "mem-bind"},
	{Name: "SALLOC_MEM_PER_CPU", Option: "mem-per-cpu"},
	{Name: "SALLOC_MEM_PER_GPU", Option: "mem-per-gpu"},
	{Name: "SALLOC_MEM_PER_NODE", Option: "mem"},
	{Name: "SALLOC_NETWORK", Option: "network"},
	{Name: "SALLOC_NO_KILL", Option: "no-kill"},
	{Name: "SALLOC_OVERCOMMIT", Option: "overcommit"},
	{Name: "SALLOC_PARTITION", Option: "partition"},
	{Name: "SALLOC_POWER", Option: "power"},
	{Name: "SALLOC_PROFILE", Option: "profile"},
	{Name: "SALLOC_QOS", Option: "qos"},
	{Name: "SALLOC_REQ_SWITCH", Option: "switches"},
	{Name: "SALLOC_RESERVATION", Option: "reservation"},
	{Name: "SALLOC_SIGNAL", Option: "signal"},
	{Name: "SALLOC_SPREAD_JOB", Option: "spread-job"},
	{Name: "SALLOC_THREAD_SPEC", Option: "thread-spec"},
	{Name: "SALLOC_THREADS_PER_CORE", Option: "threads-per-core"},
	{Name: "SALLOC_TIMELIMIT", Option: "time"},
	{Name: "SALLOC_USE_MIN_NODES", Option: "use-min-nodes"},
	{Name: "SALLOC_WAIT_ALL_NODES", Option: "wait-all-nodes"},
	{Name: "SALLOC_WAIT4SWITCH", Option: opts.EnvSwitchWait},
	{Name: "SALLOC_WCKEY", Option: "wckey"},
}
