package squeue

import (
	"errors"
	"fmt"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/getopt"
)

// command is squeue's option table: Slurm 22.05 squeue's, in the order
// of its long_options (the order glibc lists an ambiguous prefix's
// candidates in), read with getopt_long's rules (cli/getopt).
var command = getopt.Command[Options]{
	Name:       "squeue",
	Options:    options[:],
	TryHelp:    true,
	HelpColumn: 34,
}

type opt = getopt.Option[Options]

// options is the table. The options that ask for what Tide's one cluster
// has no use for (federation, hidden partitions, unit conversion) are
// accepted and change nothing; those that filter on what Tide's jobs
// never have (licenses, reservations) select no job.
var options = [...]opt{
	{Spec: getopt.Spec{Long: "accounts", Short: 'A', Arg: getopt.RequiredArg}, ArgName: "account(s)",
		Help: "comma separated list of accounts (Tide: queues) whose jobs to view", Str: func(o *Options) *string { return &o.Accounts }},
	{Spec: getopt.Spec{Long: "all", Short: 'a'}, Help: "show jobs in hidden partitions too (Tide hides none)"},
	{Spec: getopt.Spec{Long: "array", Short: 'r'}, Help: "one line per array task, pending tasks included", Flag: func(o *Options) *bool { return &o.Array }},
	{Spec: getopt.Spec{Long: "array-unique"}, Help: "one line per unique pending array element (Tide's default)"},
	{Spec: getopt.Spec{Long: "Format", Short: 'O', Arg: getopt.RequiredArg}, ArgName: "format",
		Help: "format specification of Name[:[.]width] fields", Set: setFormatLong},
	{Spec: getopt.Spec{Long: "format", Short: 'o', Arg: getopt.RequiredArg}, ArgName: "format",
		Help: "format specification of %[.][width]X fields", Set: setFormat},
	{Spec: getopt.Spec{Long: "federation"}, Help: "show the jobs of a federation (Tide runs one cluster)"},
	{Spec: getopt.Spec{Long: "help"}, Action: getopt.Help, Help: "show this help message"},
	{Spec: getopt.Spec{Long: "hide"}, Help: "hide jobs in hidden partitions (Tide hides none)"},
	{Spec: getopt.Spec{Long: "iterate", Short: 'i', Arg: getopt.RequiredArg}, ArgName: "seconds",
		Help: "repeat the report every so many seconds until interrupted", Set: setIterate},
	{Spec: getopt.Spec{Long: "jobs", Short: 'j', Arg: getopt.OptionalArg}, ArgName: "job(s)",
		Help: "comma separated list of job ids to view, in any state (also as the operand of -j)", Set: setJobs},
	{Spec: getopt.Spec{Long: "local"}, Help: "show only the local cluster's jobs (Tide runs one cluster)"},
	{Spec: getopt.Spec{Long: "long", Short: 'l'}, Help: "long report, with the date first", Flag: func(o *Options) *bool { return &o.Long }},
	{Spec: getopt.Spec{Long: "licenses", Short: 'L', Arg: getopt.RequiredArg}, ArgName: "license(s)",
		Help: "comma separated list of licenses whose jobs to view (Tide's jobs use none)", Str: func(o *Options) *string { return &o.Licenses }},
	{Spec: getopt.Spec{Long: "cluster", Short: 'M', Arg: getopt.RequiredArg}, Hidden: true, Str: func(o *Options) *string { return &o.Clusters }},
	{Spec: getopt.Spec{Long: "clusters", Short: 'M', Arg: getopt.RequiredArg, ID: "cluster"}, ArgName: "cluster_name",
		Help: "cluster to ask: the controller's own cluster, or all", Str: func(o *Options) *string { return &o.Clusters }},
	{Spec: getopt.Spec{Long: "me"}, Help: "view only the caller's jobs", Flag: func(o *Options) *bool { return &o.Me }},
	{Spec: getopt.Spec{Long: "name", Short: 'n', Arg: getopt.RequiredArg}, ArgName: "job_name(s)",
		Help: "comma separated list of job names to view", Str: func(o *Options) *string { return &o.Names }},
	{Spec: getopt.Spec{Long: "noconvert"}, Help: "print sizes as they are (Tide never converts them)"},
	{Spec: getopt.Spec{Long: "node", Short: 'w', Arg: getopt.RequiredArg, ID: "nodelist"}, Hidden: true, Str: func(o *Options) *string { return &o.NodeList }},
	{Spec: getopt.Spec{Long: "nodes", Short: 'w', Arg: getopt.RequiredArg, ID: "nodelist"}, Hidden: true, Str: func(o *Options) *string { return &o.NodeList }},
	{Spec: getopt.Spec{Long: "nodelist", Short: 'w', Arg: getopt.RequiredArg}, ArgName: "hostlist",
		Help: "hostlist of nodes whose jobs to view", Str: func(o *Options) *string { return &o.NodeList }},
	{Spec: getopt.Spec{Long: "noheader", Short: 'h'}, Help: "print no header lines", Flag: func(o *Options) *bool { return &o.NoHeader }},
	{Spec: getopt.Spec{Long: "partitions", Short: 'p', Arg: getopt.RequiredArg}, ArgName: "partition(s)",
		Help: "comma separated list of partitions whose jobs to view", Str: func(o *Options) *string { return &o.Partitions }},
	{Spec: getopt.Spec{Long: "priority", Short: 'P'}, Help: "one line per partition a job asked for (Tide's jobs run in one)"},
	{Spec: getopt.Spec{Long: "qos", Short: 'q', Arg: getopt.RequiredArg}, ArgName: "qos(s)",
		Help: "comma separated list of QOS (Tide: job classes) whose jobs to view", Str: func(o *Options) *string { return &o.QOS }},
	{Spec: getopt.Spec{Long: "reservation", Short: 'R', Arg: getopt.RequiredArg}, ArgName: "name",
		Help: "view the jobs of this reservation (Tide has none)", Str: func(o *Options) *string { return &o.Reservation }},
	{Spec: getopt.Spec{Long: "sib", ID: "sibling"}, Hidden: true},
	{Spec: getopt.Spec{Long: "sibling"}, Help: "show a federated job's sibling jobs (Tide runs one cluster)"},
	{Spec: getopt.Spec{Long: "sort", Short: 'S', Arg: getopt.RequiredArg}, ArgName: "fields",
		Help: "comma separated list of fields to sort on, '-' before one for descending", Str: func(o *Options) *string { return &o.Sort }},
	{Spec: getopt.Spec{Long: "start"}, Help: "expected start times of pending jobs", Flag: func(o *Options) *bool { return &o.Start }},
	{Spec: getopt.Spec{Long: "steps", Short: 's', Arg: getopt.OptionalArg}, ArgName: "step(s)",
		Help: "view job steps instead of jobs: those listed (job[_task].step), or all", Set: setSteps},
	{Spec: getopt.Spec{Long: "states", Short: 't', Arg: getopt.RequiredArg}, ArgName: "states",
		Help: "comma separated list of states to view, or all (default: pending, running and completing)", Str: func(o *Options) *string { return &o.States }},
	{Spec: getopt.Spec{Long: "usage"}, Action: getopt.Usage, Help: "show a brief summary of squeue's options"},
	{Spec: getopt.Spec{Long: "user", Short: 'u', Arg: getopt.RequiredArg}, ArgName: "user_name(s)",
		Help: "comma separated list of user names or ids whose jobs to view", Str: func(o *Options) *string { return &o.Users }},
	{Spec: getopt.Spec{Long: "users", Short: 'u', Arg: getopt.RequiredArg, ID: "user"}, Hidden: true, Str: func(o *Options) *string { return &o.Users }},
	{Spec: getopt.Spec{Long: "verbose", Short: 'v'}, Help: "print the options in effect on stderr", Count: func(o *Options) *int { return &o.Verbose }},
	{Spec: getopt.Spec{Long: "version", Short: 'V'}, Action: getopt.Version, Help: "print the Slurm release squeue behaves as"},
	{Spec: getopt.Spec{Long: "json"}, Help: "print the jobs as JSON", Flag: func(o *Options) *bool { return &o.JSON }},
	{Spec: getopt.Spec{Long: "yaml"}, Help: "print the jobs as YAML (not supported by Tide: use --json)", Set: noYAML},
	// -U: Slurm's old name of -A, a short option only.
	{Spec: getopt.Spec{Short: 'U', Arg: getopt.RequiredArg, ID: "accounts"}, Hidden: true, Str: func(o *Options) *string { return &o.Accounts }},
}

// setFormat is -o, which Slurm refuses after -O (and -O after -o).
func setFormat(o *Options, v string, _ bool) error {
	if o.formatLongSet {
		return errors.New("-o (--format) is incompatible with -O (--Format)")
	}
	o.Format, o.formatSet = v, true
	return nil
}

func setFormatLong(o *Options, v string, _ bool) error {
	if o.formatSet {
		return errors.New("-O (--Format) is incompatible with -o (--format)")
	}
	o.FormatLong, o.formatLongSet = v, true
	return nil
}

// setIterate reads the period as Slurm does (C's atoi) and refuses 0.
func setIterate(o *Options, v string, _ bool) error {
	n := cmdutil.Atoi(v)
	if n <= 0 {
		return fmt.Errorf("--iterate=%s: must be a positive number of seconds", v)
	}
	o.Iterate = n
	return nil
}

// setJobs is -j: the list may come attached, or as the first operand.
func setJobs(o *Options, v string, has bool) error {
	if has {
		o.Jobs = v
	}
	o.JobsFlag = true
	return nil
}

func setSteps(o *Options, v string, has bool) error {
	if has {
		o.Steps = v
	}
	o.StepsFlag = true
	return nil
}

func noYAML(*Options, string, bool) error {
	return errors.New("--yaml is not supported by Tide: use --json")
}

// parseArgs reads squeue's command line into o. done says the command
// has nothing more to do (help, usage and version were printed, or a
// syntax error was). Operands are taken as Slurm takes them: the first
// is -j's or -s's list when the option was given without one; any other
// is an error, followed by the usage on stdout.
func (o *Options) parseArgs(args []string) (done bool, err error) {
	operands, done, err := cmdutil.ParseOptions(o.IO, &command, o, args, o.Getenv)
	if done || err != nil {
		return done, err
	}
	if len(operands) > 0 {
		switch {
		case o.JobsFlag:
			o.Jobs, operands = operands[0], operands[1:]
		case o.StepsFlag:
			o.Steps, operands = operands[0], operands[1:]
		}
	}
	if len(operands) > 0 {
		cmdutil.Errorf(o.IO.ErrOut, command.Name, "Unrecognized option: %s", operands[0])
		command.WriteUsage(o.IO.Out)
		return true, &cmdutil.SilentError{Code: cmdutil.ExitError}
	}
	if o.Long && o.formatSet {
		return true, errors.New("Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.")
	}
	return false, nil
}
