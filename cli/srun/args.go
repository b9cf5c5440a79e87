package srun

import (
	"errors"
	"fmt"
	"github.com/tide-hpc/tide/internal/stepio"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tide-hpc/tide/cli/getopt"
	"github.com/tide-hpc/tide/cli/sbatch/opts"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// Args is a parsed srun (or salloc) command line: the resource options,
// read with sbatch's option table so that both commands take the same
// flags the same way, plus srun's own options and the command.
type Args struct {
	// Spec holds the resource options (-N -n -c --gpus-per-task -p -t
	// …), -J as Name, -o/-e/-i as Stdout/Stderr/Stdin, -D as WorkDir and
	// --export's result as Environment.
	Spec api.JobSpec
	// Argv is the command and its arguments (empty when none is given).
	Argv []string
	// srun's own options.
	Label      bool
	KillBadEx  bool
	Pty        bool
	Unbuffered bool
	// QuitOnInterrupt (--quit-on-interrupt) and DisableStatus (-X,
	// --disable-status) change what Ctrl-C does (signals.go).
	QuitOnInterrupt, DisableStatus bool
	// JobID is --jobid (0 when not given).
	JobID uint64
	// Exact, Overlap and Whole say how the step shares its allocation
	// (see api.StepRequest); Overcommit is -O, for the step (Spec's
	// Overcommit carries it to an allocation srun obtains itself).
	Exact, Overlap, Whole, Overcommit bool
	// CPUBind, GPUBind and MPI are --cpu-bind, --gpu-bind and --mpi as
	// given (validated).
	CPUBind, GPUBind, MPI string
	// MultiProg: Argv[0] is a --multi-prog configuration file.
	MultiProg bool
	// SlurmdDebug is --slurmd-debug as a level name (quiet ... debug5;
	// "" when not given): what the nodes tell the step's task 0 about
	// its launch on its standard error.
	SlurmdDebug string
	// DebuggerTest (--debugger-test): the tasks start held before they
	// exec, srun prints the process table a parallel debugger reads
	// (MPIR) and waits, as under a debugger that never releases them.
	DebuggerTest bool
	// TaskProlog and TaskEpilog run around each task on its node;
	// Prolog and Epilog around the step, here.
	TaskProlog, TaskEpilog, Prolog, Epilog string
	// Wait is -W/--wait in seconds: kill the other tasks that long after
	// the first one ended; -1 when not given, 0 for no limit.
	Wait int
	// Immediate is -I/--immediate in seconds (0: not given): give up
	// when the allocation or the step's resources are not there by then.
	Immediate int
	// Relative is -r/--relative (nil: not given).
	Relative *int
	// Distribution is -m as given.
	Distribution string
	// TaskHosts is -m arbitrary's layout from SLURM_HOSTFILE: the node
	// of each task (nil: none).
	TaskHosts []string
	// PreserveEnv is -E: the tasks keep SLURM_NNODES and SLURM_NTASKS
	// from srun's environment.
	PreserveEnv bool
	// NoAllocate is -Z, which Tide refuses to run.
	NoAllocate bool
	// Verbose counts -v; Quiet is -Q; TestOnly is --test-only.
	Verbose  int
	Quiet    bool
	TestOnly bool
	// MPIList: --mpi=list asks for the MPI types.
	MPIList bool
	// CPUBindHelp: --cpu-bind=help asks for its help.
	CPUBindHelp bool
	// salloc's own options: --no-shell, --bell, --no-bell and
	// -K/--kill-command's signal (0: not given).
	NoShell, Bell, NoBell bool
	KillCommand           int
	// Defined lists the options set, for -v's "defined options" block.
	Defined [][2]string
	// Help, Usage and Version ask for those texts instead of running.
	Help, Usage, Version bool
	Warnings             []string
}

// ParseInput is what ParseArgs reads besides the words.
type ParseInput struct {
	Environ   []string
	Cwd, Host string
	Now       time.Time
	// EnvVars are the option variables read from Environ (srun's
	// SrunEnvVars, salloc's own list); nil reads none.
	EnvVars []opts.EnvVar
	// Salloc parses salloc's command line (its option table) rather
	// than srun's.
	Salloc bool
}

// ParseError is a command line srun or salloc refuses, worded as Slurm
// words it. A syntax error (Usage) prints as "srun: <line>" and the
// "--help" hint; others as "srun: error: <line>" lines, then Fatal as
// "srun: fatal: <text>" when set.
type ParseError struct {
	Usage bool
	Lines []string
	Fatal string
}

func (e *ParseError) Error() string {
	s := strings.Join(e.Lines, "; ")
	if e.Fatal != "" {
		if s != "" {
			s += "; "
		}
		s += e.Fatal
	}
	return s
}

// Write prints the error for program prog.
func (e *ParseError) Write(w io.Writer, prog string) {
	for _, l := range e.Lines {
		if e.Usage {
			fmt.Fprintf(w, "%s: %s\n", prog, termsafe.Escape(l))
		} else {
			fmt.Fprintf(w, "%s: error: %s\n", prog, termsafe.Escape(l))
		}
	}
	if e.Fatal != "" {
		fmt.Fprintf(w, "%s: fatal: %s\n", prog, termsafe.Escape(e.Fatal))
	}
	if e.Usage {
		fmt.Fprintf(w, "Try \"%s --help\" for more information\n", prog)
	}
}

// errorf is a ParseError of one error line.
func errorf(format string, args ...any) error {
	return &ParseError{Lines: []string{fmt.Sprintf(format, args...)}}
}

// placeholder stands in for the batch script sbatch's parser wants: the
// command line names a program, not a script.
const placeholder = "#!/bin/sh\n"

// ownOption is an option of srun's or salloc's own (sbatch has none of
// that name or one that means something else): its getopt entry, its
// handler and its --help line. Flags (arg 0) are set with v == "".
type ownOption struct {
	long  string
	short byte
	arg   int // 0 none, 1 required, 2 optional
	set   func(a *Args, v string) error
	cmds  cmdSet
	// id names options that are one under several names (cpu_bind).
	id     string
	group  int
	arg0   string
	help   string
	hidden bool
}

func flag(f func(a *Args)) func(a *Args, v string) error {
	return func(a *Args, _ string) error { f(a); return nil }
}

// parseInt is Slurm's parse_int: a plain decimal, at least 1 when
// positive. name is how the message names the option.
func parseInt(name, v string, positive bool) (int, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 || positive && n == 0 {
		if err != nil && errors.Is(err, strconv.ErrRange) {
			return 0, errorf("Numeric argument (%s) to big for %s.", v, name)
		}
		return 0, errorf("Invalid numeric value \"%s\" for %s.", v, name)
	}
	return int(n), nil
}

// noEffect records an option Tide accepts without acting on it.
func noEffect(name string) func(a *Args, v string) error {
	return func(a *Args, _ string) error {
		a.Warnings = append(a.Warnings, fmt.Sprintf("--%s has no effect yet in Tide; ignored", name))
		return nil
	}
}

// mpiTypes are the --mpi types Tide's srun knows (its MPI "plugins").
var mpiTypes = []string{"none", "pmi2"}

// ownOptions are srun's and salloc's own options.
var ownOptions = []ownOption{
	{long: "accel-bind", arg: 1, cmds: forSrun, arg0: "options", help: "accelerator binding (g, n, v)", set: func(a *Args, v string) error {
		if !strings.ContainsAny(v, "gnv") {
			return errorf("Invalid --accel-bind specification")
		}
		return noEffect("accel-bind")(a, v)
	}},
	{long: "bcast", arg: 2, cmds: forSrun, arg0: "dest_path", help: "copy the executable to the compute nodes", set: noEffect("bcast")},
	{long: "bcast-exclude", arg: 1, cmds: forSrun, arg0: "paths", help: "shared object directories --bcast leaves out", set: func(a *Args, v string) error {
		if strings.TrimSpace(v) == "" {
			return errorf("Invalid --bcast-exclude specification")
		}
		return noEffect("bcast-exclude")(a, v)
	}},
	{long: "bell", cmds: forSalloc, help: "ring the terminal bell when the allocation is granted", set: flag(func(a *Args) { a.Bell, a.NoBell = true, false })},
	{long: "no-bell", cmds: forSalloc, help: "do not ring the terminal bell", set: flag(func(a *Args) { a.NoBell, a.Bell = true, false })},
	{long: "compress", arg: 2, cmds: forSrun, arg0: "library", help: "compression library of --bcast (lz4, zlib, none)", set: func(a *Args, v string) error {
		switch strings.ToLower(v) {
		case "", "lz4", "zlib", "none":
			return nil
		}
		return errorf("Invalid --compress specification: %s", v)
	}},
	{long: "context", arg: 1, cmds: forBoth, arg0: "context", help: "SELinux context of the job", set: noEffect("context")},
	{long: "cpu-bind", arg: 1, cmds: forSrun, id: "cpu-bind", group: grpAffinity, arg0: "type", help: "bind tasks to CPUs (see --cpu-bind=help)", set: setCPUBind},
	{long: "cpu_bind", arg: 1, cmds: forSrun, id: "cpu-bind", hidden: true, set: setCPUBind},
	{long: "debugger-test", cmds: forSrun, hidden: true, help: "start the tasks held and print the process table a parallel debugger reads (MPIR), as under a debugger that never releases them (for tests)", set: flag(func(a *Args) { a.DebuggerTest = true })},
	{long: "disable-status", short: 'X', cmds: forSrun, help: "Ctrl-C goes to the tasks instead of showing their status", set: flag(func(a *Args) { a.DisableStatus = true })},
	{long: "epilog", arg: 1, cmds: forSrun, arg0: "program", help: "run program here after the step ends (none: no epilog)", set: func(a *Args, v string) error {
		a.Epilog = v
		if strings.EqualFold(v, "none") {
			a.Epilog = ""
		}
		return nil
	}},
	{long: "exact", cmds: forSrun, group: grpConsumable, help: "the step holds only the resources it asks for (default: all CPUs of its nodes)", set: flag(func(a *Args) { a.Exact, a.Overlap = true, false })},
	{long: "gpu-bind", arg: 1, cmds: forSrun, group: grpGPU, arg0: "...", help: "how tasks share the step's GPUs: closest, map_gpu:, mask_gpu:, single:N, none", set: func(a *Args, v string) error {
		if _, err := api.ParseGPUBind(v); err != nil {
			return errorf("%v", err)
		}
		a.GPUBind = v
		return nil
	}},
	{long: "het-group", arg: 1, cmds: forSrun, arg0: "value", help: "heterogeneous job component(s) to run in (Tide has one: 0)", set: setHetGroup},
	{long: "pack-group", arg: 1, cmds: forSrun, arg0: "value", hidden: true, help: "old name of --het-group", set: setHetGroup},
	{long: "immediate", short: 'I', arg: 2, cmds: forBoth, arg0: "secs", help: "exit if resources are not available within secs (default 1)", set: func(a *Args, v string) error {
		if v == "" {
			a.Immediate = 1
			return nil
		}
		n, err := parseInt("immediate", v, false)
		a.Immediate = n
		return err
	}},
	{long: "interactive", cmds: forSrun, hidden: true, help: "accepted and ignored, as Slurm's hidden option is", set: flag(func(*Args) {})},
	{long: "jobid", arg: 1, cmds: forSrun, arg0: "id", help: "run under an already allocated job", set: func(a *Args, v string) error {
		id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil || id == 0 {
			return errorf("Invalid job id: %s", v)
		}
		a.JobID = id
		return nil
	}},
	{long: "kill-on-bad-exit", short: 'K', arg: 2, cmds: forSrun, arg0: "0|1", help: "end the step when a task exits non-zero", set: func(a *Args, v string) error {
		if v == "" {
			a.KillBadEx = true
			return nil
		}
		n, err := parseInt("--kill-on-bad-exit", v, false)
		a.KillBadEx = n != 0
		return err
	}},
	{long: "kill-command", short: 'K', arg: 2, cmds: forSalloc, arg0: "signal", help: "signal the command when the allocation ends (default TERM)", set: func(a *Args, v string) error {
		if v == "" {
			a.KillCommand = 15
			return nil
		}
		sig, ok := opts.SignalNumber(v)
		if !ok {
			return errorf("Invalid signal name: %s", v)
		}
		a.KillCommand = sig
		return nil
	}},
	{long: "label", short: 'l', cmds: forSrun, help: "prepend the task number to lines of stdout/err", set: flag(func(a *Args) { a.Label = true })},
	{long: "threads", short: 'T', arg: 1, cmds: forSrun, arg0: "threads", help: "srun's launch fanout (accepted, no effect in Tide)", set: func(a *Args, v string) error {
		_, err := parseInt("--threads", v, true)
		return err
	}},
	{long: "mpi", arg: 1, cmds: forSrun, arg0: "type", help: "MPI type: none or pmi2 (its environment; see --mpi=list)", set: func(a *Args, v string) error {
		switch {
		case v == "list":
			a.MPIList = true
		case slices.Contains(mpiTypes, v):
			a.MPI = v
		default:
			return &ParseError{Lines: []string{fmt.Sprintf("Invalid MPI type '%s', --mpi=list for acceptable types", v)}}
		}
		return nil
	}},
	{long: "msg-timeout", arg: 1, cmds: forSrun, arg0: "seconds", help: "message timeout (accepted, no effect in Tide)", set: func(a *Args, v string) error {
		_, err := parseInt("--msg-timeout", v, true)
		return err
	}},
	{long: "multi-prog", cmds: forSrun, help: "the command is a configuration naming each task's program", set: flag(func(a *Args) { a.MultiProg = true })},
	{long: "no-allocate", short: 'Z', cmds: forSrun, group: grpConstraint, help: "run without an allocation (refused: root only in Slurm, never in Tide)", set: flag(func(a *Args) { a.NoAllocate = true })},
	{long: "no-shell", cmds: forSalloc, help: "get the allocation and exit; it stays until scancel or its time limit", set: flag(func(a *Args) { a.NoShell = true })},
	{long: "ntasks-per-tres", arg: 1, cmds: forBoth, arg0: "n", hidden: true, help: "number of tasks to invoke for each GPU (Slurm's hidden spelling of --ntasks-per-gpu)", set: func(a *Args, v string) error {
		_, err := parseInt("--ntasks-per-tres", v, true)
		return err
	}},
	{long: "overlap", arg: 2, cmds: forSrun, help: "share the step's resources with the other steps", set: func(a *Args, _ string) error {
		a.Overlap, a.Exact = true, false
		return nil
	}},
	{long: "preserve-env", short: 'E', cmds: forSrun, help: "tasks keep SLURM_NNODES and SLURM_NTASKS from srun's environment", set: flag(func(a *Args) { a.PreserveEnv = true })},
	{long: "prolog", arg: 1, cmds: forSrun, arg0: "program", help: "run program here before the step starts (none: no prolog)", set: func(a *Args, v string) error {
		a.Prolog = v
		if strings.EqualFold(v, "none") {
			a.Prolog = ""
		}
		return nil
	}},
	{long: "pty", cmds: forSrun, help: "run task zero in a pseudo terminal", set: flag(func(a *Args) { a.Pty = true })},
	{long: "quit-on-interrupt", cmds: forSrun, help: "quit on a single Ctrl-C", set: flag(func(a *Args) { a.QuitOnInterrupt = true })},
	{long: "relative", short: 'r', arg: 1, cmds: forSrun, arg0: "n", help: "run the step from node n of the allocation", set: func(a *Args, v string) error {
		n, err := parseInt("--relative", v, false)
		a.Relative = &n
		return err
	}},
	{long: "resv-ports", arg: 2, cmds: forSrun, group: grpConsumable, arg0: "count", help: "reserve communication ports (accepted, no effect in Tide)", set: func(a *Args, v string) error {
		if v == "" {
			return nil
		}
		_, err := parseInt("--resv-ports", v, false)
		return err
	}},
	{long: "send-libs", arg: 2, cmds: forSrun, arg0: "yes|no", help: "broadcast the executable's shared objects (with --bcast)", set: func(a *Args, v string) error {
		switch strings.ToLower(v) {
		case "", "y", "yes", "n", "no":
			return nil
		}
		return errorf("Invalid --send-libs specification")
	}},
	{long: "slurmd-debug", arg: 1, cmds: forSrun, arg0: "level", help: "slurmd debug level: the nodes report the step's launch on task 0's stderr", set: func(a *Args, v string) error {
		l, ok := stepio.DebugLevelName(v)
		if !ok {
			return errorf("Invalid --slurmd-debug specification: %s", v)
		}
		a.SlurmdDebug = l
		return nil
	}},
	{long: "task-epilog", arg: 1, cmds: forSrun, arg0: "program", help: "run program after each task, on its node", set: func(a *Args, v string) error {
		if strings.TrimSpace(v) == "" {
			return errorf("Invalid --task-epilog specification")
		}
		a.TaskEpilog = v
		return nil
	}},
	{long: "task-prolog", arg: 1, cmds: forSrun, arg0: "program", help: "run program before each task, on its node (its export lines set the task's environment)", set: func(a *Args, v string) error {
		if strings.TrimSpace(v) == "" {
			return errorf("Invalid --task-prolog specification")
		}
		a.TaskProlog = v
		return nil
	}},
	{long: "unbuffered", short: 'u', cmds: forSrun, help: "do not line-buffer stdout/err", set: flag(func(a *Args) { a.Unbuffered = true })},
	{long: "wait", short: 'W', arg: 1, cmds: forSrun, arg0: "sec", help: "seconds to wait after the first task exits before killing the others (0: no limit)", set: func(a *Args, v string) error {
		n, err := parseInt("--wait", v, false)
		a.Wait = n
		return err
	}},
	{long: "whole", cmds: forSrun, group: grpConsumable, help: "the step holds every free CPU of its nodes, even with -c", set: flag(func(a *Args) { a.Whole, a.Exact = true, false })},
	{long: "x11", arg: 2, cmds: forBoth, arg0: "all|first|last", help: "X11 forwarding (accepted, no effect in Tide)", set: func(a *Args, v string) error {
		switch strings.ToLower(v) {
		case "", "all", "first", "last", "batch":
			return noEffect("x11")(a, v)
		}
		return errorf("Invalid --x11 specification: %s", v)
	}},
	{long: "help", short: 'h', cmds: forBoth, group: grpHelp, help: "show this help message", set: flag(func(a *Args) { a.Help = true })},
	{long: "usage", cmds: forBoth, group: grpHelp, help: "display brief usage message", set: flag(func(a *Args) { a.Usage = true })},
	{long: "version", short: 'V', cmds: forBoth, group: grpOther, help: "output version information and exit", set: flag(func(a *Args) { a.Version = true })},
}

// setCPUBind validates --cpu-bind as Slurm does.
func setCPUBind(a *Args, v string) error {
	b, err := api.ParseCPUBind(v)
	var be *api.CPUBindError
	if errors.As(err, &be) {
		return &ParseError{Lines: be.Lines, Fatal: api.ErrCPUBind.Error()}
	}
	if b.Help {
		a.CPUBindHelp = true
		return nil
	}
	a.CPUBind = v
	return nil
}

// setHetGroup takes --het-group: component indices ("0", "0-1", "0,2").
// Tide's jobs have one component, so only 0 runs.
func setHetGroup(a *Args, v string) error {
	for _, part := range strings.Split(v, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if _, err := strconv.ParseUint(lo, 10, 16); err != nil {
			return errorf("Invalid --het-group value: %s", v)
		}
		if _, err := strconv.ParseUint(hi, 10, 16); isRange && err != nil {
			return errorf("Invalid --het-group value: %s", v)
		}
		if lo != "0" || (hi != "" && hi != "0") {
			return errorf("Invalid --het-group value: %s (Tide's jobs have one component, 0)", v)
		}
	}
	return nil
}

// CPUBindHelp is --cpu-bind=help's text.
const CPUBindHelp = `CPU bind options:
    --cpu-bind=         Bind tasks to CPUs
        q[uiet]         quietly bind before task runs (default)
        v[erbose]       verbosely report binding before task runs
        no[ne]          don't bind tasks to CPUs (default)
        rank            bind by task rank
        map_cpu:<list>  specify a CPU ID binding for each task
                        where <list> is <cpuid1>,<cpuid2>,...<cpuidN>
        mask_cpu:<list> specify a CPU ID binding mask for each task
                        where <list> is <mask1>,<mask2>,...<maskN>
        rank_ldom       bind task by rank to CPUs in a NUMA locality domain
        map_ldom:<list> specify a NUMA locality domain ID for each task
                        where <list> is <ldom1>,<ldom2>,...<ldomN>
        mask_ldom:<list>specify a NUMA locality domain ID mask for each task
                        where <list> is <mask1>,<mask2>,...<maskN>
        sockets         auto-generated masks bind to sockets
        cores           auto-generated masks bind to cores
        threads         auto-generated masks bind to threads
        ldoms           auto-generated masks bind to NUMA locality domains
        help            show this help message
`

// ParseArgs parses words (after the program name) with srun's (or
// salloc's) option table: getopt stops at the command. srun's own
// options are applied here; the options it shares with sbatch go to
// sbatch's parser under their full names, which validates them and
// fills the JobSpec (and reads the option variables, EnvVars).
func ParseArgs(words []string, in ParseInput) (*Args, error) {
	cmd := forSrun
	if in.Salloc {
		cmd = forSalloc
	}
	a := &Args{Wait: -1}
	table := tableOf(cmd)
	specs := make([]getopt.Spec, len(table))
	for i, e := range table {
		specs[i] = e.spec()
	}
	ms, operands, gerr := getopt.New(specs).Parse(words)
	for _, m := range ms {
		// A --help written before a mistake still wins, as in Slurm.
		switch specs[m.Index].Long {
		case "help":
			a.Help = true
			return a, nil
		case "usage":
			a.Usage = true
			return a, nil
		case "version":
			a.Version = true
			return a, nil
		}
	}
	if gerr != nil {
		return nil, &ParseError{Usage: true, Lines: []string{gerr.Error()}}
	}
	lookup := opts.LookupIn(in.Environ)
	env, err := applyEnv(a, in.EnvVars, lookup)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, errorf("%v", err)
	}
	var shared []string
	var own [][2]string
	for _, m := range ms {
		e := table[m.Index]
		if o := e.own; o != nil {
			if err := o.set(a, m.Value); err != nil {
				return nil, err
			}
			shown := m.Value
			if !m.HasValue {
				shown = "set"
			}
			name := o.long
			if o.id != "" {
				name = o.id
			}
			own = append(own, [2]string{name, shown})
			continue
		}
		w := "--" + e.shared.long
		if m.HasValue {
			w += "=" + m.Value
		}
		shared = append(shared, w)
	}
	a.Argv = operands
	if len(operands) > 0 {
		// The command names the job (sbatch's script name rule).
		shared = append(shared, "--", operands[0])
	}
	gpt := 0
	var req *opts.Request
	for {
		req, err = opts.Parse(opts.Input{
			Args: shared, Getenv: func(string) string { return "" }, Environ: in.Environ,
			LookupEnv: lookup, EnvVars: env.opts,
			ReadFile: func(string) ([]byte, error) { return []byte(placeholder), nil },
			Stdin:    strings.NewReader(placeholder), Cwd: in.Cwd, Host: in.Host, Now: in.Now,
		})
		if err == nil {
			break
		}
		var pe *opts.Error
		if errors.As(err, &pe) && len(pe.Lines) > 0 && strings.Contains(pe.Lines[0], "--gpus-per-task requires") && gpt == 0 {
			// A step without -n or --ntasks-per-node runs the job's
			// own task layout (the controller lays it out), so
			// --gpus-per-task alone is valid for srun, unlike for
			// sbatch: parse the rest without it.
			var err2 error
			if shared, gpt, err2 = takeGPUsPerTask(shared); err2 != nil {
				return nil, err2
			}
			if gpt > 0 {
				continue
			}
		}
		if errors.As(err, &pe) {
			return nil, &ParseError{Usage: pe.Usage, Lines: pe.Lines}
		}
		return nil, err
	}
	a.Spec = req.Spec
	if gpt > 0 {
		a.Spec.GPUsPerTask = gpt
	}
	if a.Spec.GPUsPerTask == 0 && env.gpt != "" {
		if a.Spec.GPUsPerTask, err = envGPUsPerTask(env.gpt, env.gptV); err != nil {
			return nil, err
		}
	}
	allocNodes(a, req.FromEnv, lookup)
	a.Spec.Script, a.Spec.ScriptArgs = "", nil
	a.Verbose, a.Quiet, a.TestOnly = req.Verbose, req.Quiet, req.TestOnly
	acts := map[string]bool{}
	for _, s := range sharedOptions {
		if s.acts {
			acts[fmt.Sprintf("--%s has no effect yet in Tide; ignored", s.long)] = true
		}
	}
	for _, w := range req.Warnings {
		if !acts[w] {
			a.Warnings = append(a.Warnings, w)
		}
	}
	for _, d := range req.Defined {
		switch d[0] {
		case "overcommit":
			a.Overcommit = true
		case "distribution":
			a.Distribution = d[1]
		case "verbose":
			d[1] = strconv.Itoa(a.Verbose)
		}
		a.Defined = append(a.Defined, d)
	}
	a.Defined = append(a.Defined, own...)
	slices.SortStableFunc(a.Defined, func(x, y [2]string) int { return strings.Compare(x[0], y[0]) })
	return a, nil
}

// takeGPUsPerTask removes the first --gpus-per-task from words and
// returns its value (0 when there is none).
func takeGPUsPerTask(words []string) ([]string, int, error) {
	at, n := -1, 1
	val := ""
	for i, w := range words {
		if w == "--" {
			break
		}
		switch {
		case strings.HasPrefix(w, "--gpus-per-task="):
			at, val = i, strings.TrimPrefix(w, "--gpus-per-task=")
		case w == "--gpus-per-task" && i+1 < len(words):
			at, val, n = i, words[i+1], 2
		}
	}
	if at < 0 {
		return words, 0, nil
	}
	g, err := strconv.Atoi(val)
	if i := strings.LastIndexByte(val, ':'); err != nil && i >= 0 {
		g, err = strconv.Atoi(val[i+1:])
	}
	if err != nil || g < 1 {
		return nil, 0, errorf("Invalid --gpus-per-task specification: %s", val)
	}
	return append(words[:at:at], words[at+n:]...), g, nil
}
