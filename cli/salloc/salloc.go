package salloc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/srun"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
	"github.com/tide-hpc/tide/internal/termsafe"
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
	}
	if o.Now != nil {
		in.Now = o.Now()
	}
	var err error
	if in.Cwd, err = o.Getwd(); err != nil {
		return failf(errOut, "getcwd failed: %v", err)
	}
	in.Host, _ = o.Hostname()
	a, err := srun.ParseArgs(o.Args, in)
	if err != nil {
		fmt.Fprintf(errOut, "%s: %s\nTry \"salloc --help\" for more information\n", prog, termsafe.Escape(err.Error()))
		return &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	switch {
	case a.Help || a.Usage:
		io.WriteString(o.IO.Out, "Usage: salloc [OPTIONS(0)...] [command(0) [args(0)...]]\n\n"+
			"Takes sbatch's resource options (sbatch --help); runs command, default $SHELL,\n"+
			"with the allocation's SLURM_* variables, and releases the allocation when it exits.\n")
		return nil
	case a.Version:
		fmt.Fprintln(o.IO.Out, "slurm 22.05.8 (tide)")
		return nil
	case a.Label || a.Pty || a.KillBadEx || a.JobID != 0:
		return failf(errOut, "--label, --pty, --kill-on-bad-exit and --jobid are srun options")
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

	alloc, err := srun.Allocate(ctx, c, a.Spec, prog, errOut, o.PollInterval, onlyTerm(sigs))
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return &cmdutil.SilentError{Code: cmdutil.ExitError}
		}
		if errors.Is(err, srun.ErrRevoked) {
			return &cmdutil.SilentError{Code: cmdutil.ExitError}
		}
		return failf(errOut, "%v", err)
	}
	j := alloc.Job
	fmt.Fprintf(errOut, "%s: Granted job allocation %d\n", prog, j.ID)
	fmt.Fprintf(errOut, "%s: Nodes %s are ready for job\n", prog, hostlist.Compress(j.NodeNames()))

	exit := runCommand(ctx, c, o, j, argv, in.Environ, sigs)
	fmt.Fprintf(errOut, "%s: Relinquishing job allocation %d\n", prog, j.ID)
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
func runCommand(ctx context.Context, c srun.StepAPI, o *Options, j api.Job, argv, environ []string, sigs <-chan os.Signal) api.ExitStatus {
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
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(o.KillWait):
				_ = cmd.Process.Kill()
				<-done
			}
			return api.ExitStatus{Signal: int(syscall.SIGTERM)}
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
// them. It is pure.
func AllocEnv(environ []string, j *api.Job) []string {
	nodes := j.NodeNames()
	list := hostlist.Compress(nodes)
	cpus := make([]int, len(j.Alloc))
	tasks := make([]int, len(j.Alloc))
	for i, a := range j.Alloc {
		cpus[i], tasks[i] = a.CPUs, max(a.Tasks, 1)
	}
	id := strconv.FormatUint(j.ID, 10)
	vars := [][2]string{
		{"SLURM_JOB_ID", id}, {"SLURM_JOBID", id}, {"SLURM_JOB_NAME", j.Name},
		{"SLURM_JOB_NODELIST", list}, {"SLURM_NODELIST", list},
		{"SLURM_JOB_NUM_NODES", strconv.Itoa(len(nodes))}, {"SLURM_NNODES", strconv.Itoa(len(nodes))},
		{"SLURM_NTASKS", strconv.Itoa(j.ReqTasks())}, {"SLURM_NPROCS", strconv.Itoa(j.ReqTasks())},
		{"SLURM_JOB_CPUS_PER_NODE", counts(cpus)}, {"SLURM_TASKS_PER_NODE", counts(tasks)},
		{"SLURM_JOB_PARTITION", j.Partition}, {"SLURM_CLUSTER_NAME", j.Cluster},
		{"SLURM_SUBMIT_DIR", j.SubmitDir}, {"SLURM_SUBMIT_HOST", j.SubmitHost},
		{"SLURM_JOB_USER", j.User}, {"SLURM_JOB_UID", strconv.FormatUint(uint64(j.UserID), 10)},
	}
	if j.CPUsPerTask > 0 {
		vars = append(vars, [2]string{"SLURM_CPUS_PER_TASK", strconv.Itoa(j.CPUsPerTask)})
	}
	if j.Account != "" {
		vars = append(vars, [2]string{"SLURM_JOB_ACCOUNT", j.Account})
	}
	set := map[string]bool{}
	for _, v := range vars {
		set[v[0]] = true
		set["TIDE_"+v[0][len("SLURM_"):]] = true
	}
	var out []string
	for _, kv := range environ {
		k, _, _ := cut(kv)
		if !set[k] {
			out = append(out, kv)
		}
	}
	for _, v := range vars {
		out = append(out, v[0]+"="+v[1])
	}
	for _, v := range vars {
		out = append(out, "TIDE_"+v[0][len("SLURM_"):]+"="+v[1])
	}
	return out
}

func cut(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// counts writes per-node counts as Slurm does: "4(x2),2".
func counts(ns []int) string {
	out := ""
	for i := 0; i < len(ns); {
		k := i
		for k < len(ns) && ns[k] == ns[i] {
			k++
		}
		if out != "" {
			out += ","
		}
		out += strconv.Itoa(ns[i])
		if k-i > 1 {
			out += "(x" + strconv.Itoa(k-i) + ")"
		}
		i = k
	}
	return out
}
