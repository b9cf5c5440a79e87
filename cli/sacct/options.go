package sacct

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/getopt"
	"github.com/tide-hpc/tide/ctld/api"
	"github.com/tide-hpc/tide/hostlist"
)

// command is sacct's option table: Slurm 22.05 sacct's, in the order of
// its long_options, read with getopt_long's rules (cli/getopt). Unlike
// Slurm's other commands sacct prints no "Try --help" line after a
// syntax error, and -h, -e and -U print their texts only once the whole
// line has been read (the last of them wins).
var command = getopt.Command[Options]{
	Name:      "sacct",
	Options:   options[:],
	HelpText:  writeHelp,
	UsageText: writeUsage,
}

type opt = getopt.Option[Options]

// What -h, -e and -U ask for; the last one given wins.
const (
	helpNone = iota
	helpText
	helpFields
	helpUsage
)

// slurmOptions are what the options Tide took on with Slurm's table
// select (filters.go applies them), and which help text was asked for.
type slurmOptions struct {
	help int
	// nodes (-N) are the nodes a job must have run on, nodeList as
	// written.
	nodes    map[string]bool
	nodeList string
	// qos (-q), groups (-g), reasons (-R) and constraints (-C) are lists
	// to match, case folded.
	qos, groups, reasons, constraints []string
	// nnodes (-i) and ncpus (-I) are min[-max] ranges of allocated nodes
	// and CPUs; timelimit (-k, -K) one of time limits in minutes. A
	// zero min selects everything, a zero max means exactly min.
	nnodes, ncpus, timelimit [2]int64
	// none: -W or -x asked for wckeys or associations, which no Tide
	// job has.
	none bool
}

var options = [...]opt{
	{Spec: getopt.Spec{Long: "allusers", Short: 'a'}, Help: "show the jobs of all users (the default for root; others see their own)",
		Flag: func(o *Options) *bool { return &o.AllUsers }},
	{Spec: getopt.Spec{Long: "accounts", Short: 'A', Arg: getopt.RequiredArg}, ArgName: "accounts",
		Help: "comma separated list of accounts (Tide: queues) whose jobs to show", List: func(o *Options) *[]string { return &o.Accounts }},
	{Spec: getopt.Spec{Long: "allocations", Short: 'X'}, Help: "show the job allocations only, no step lines",
		Flag: func(o *Options) *bool { return &o.Allocations }},
	{Spec: getopt.Spec{Long: "brief", Short: 'b'}, Help: "show JobID, State and ExitCode only", Flag: func(o *Options) *bool { return &o.Brief }},
	{Spec: getopt.Spec{Long: "batch-script", Short: 'B'}, Help: "print the job's batch script (not supported by Tide's sacct)", Set: noScript},
	{Spec: getopt.Spec{Long: "completion", Short: 'c'}, Help: "read the job completion log (Tide keeps none: it reads accounting)", Set: noCompletion},
	{Spec: getopt.Spec{Long: "constraints", Short: 'C', Arg: getopt.RequiredArg}, ArgName: "constraints",
		Help: "comma separated list of constraints (--constraint) of the jobs to show", Set: setConstraints},
	{Spec: getopt.Spec{Long: "delimiter", Arg: getopt.RequiredArg}, ArgName: "characters",
		Help: "field separator of -p and -P output (default '|')", Str: func(o *Options) *string { return &o.Delimiter }},
	{Spec: getopt.Spec{Long: "duplicates", Short: 'D'}, Help: "show every job that had an id (Tide never reuses ids)"},
	{Spec: getopt.Spec{Long: "federation"}, Help: "show the jobs of a federation (Tide runs one cluster)"},
	{Spec: getopt.Spec{Long: "helpformat", Short: 'e'}, Help: "list the fields --format accepts", Set: askFields},
	{Spec: getopt.Spec{Long: "help-fields", Short: 'e', ID: "helpformat"}, Hidden: true, Set: askFields},
	{Spec: getopt.Spec{Long: "endtime", Short: 'E', Arg: getopt.RequiredArg}, ArgName: "time",
		Help: "show jobs that were active before this time", Str: func(o *Options) *string { return &o.End }},
	{Spec: getopt.Spec{Long: "env-vars"}, Help: "print the job's environment (not supported by Tide's sacct)", Set: noEnv},
	{Spec: getopt.Spec{Long: "file", Short: 'f', Arg: getopt.RequiredArg}, ArgName: "file",
		Help: "read a job completion file (Tide keeps none: it reads accounting)", Set: noCompletion},
	{Spec: getopt.Spec{Long: "flags", Short: 'F', Arg: getopt.RequiredArg}, ArgName: "flags",
		Help: "select jobs by scheduler flags (not supported by Tide's sacct)", Set: noFlags},
	{Spec: getopt.Spec{Long: "gid", Short: 'g', Arg: getopt.RequiredArg}, ArgName: "groups",
		Help: "comma separated list of group names or ids whose jobs to show (also --group)", Set: setGroups},
	{Spec: getopt.Spec{Long: "group", Short: 'g', Arg: getopt.RequiredArg, ID: "gid"}, Hidden: true, Set: setGroups},
	{Spec: getopt.Spec{Long: "help", Short: 'h'}, Help: "print this description of use", Set: askHelp},
	{Spec: getopt.Spec{Long: "local"}, Help: "show only the local cluster's jobs (no federations: the default without -M)"},
	{Spec: getopt.Spec{Long: "name", Arg: getopt.RequiredArg}, ArgName: "names",
		Help: "comma separated list of job names to show", List: func(o *Options) *[]string { return &o.Names }},
	{Spec: getopt.Spec{Long: "nnodes", Short: 'i', Arg: getopt.RequiredArg}, ArgName: "N",
		Help: "show jobs that ran on this many nodes (N = min[-max])", Set: setNNodes},
	{Spec: getopt.Spec{Long: "ncpus", Short: 'I', Arg: getopt.RequiredArg}, ArgName: "N",
		Help: "show jobs that ran on this many CPUs (N = min[-max])", Set: setNCPUs},
	{Spec: getopt.Spec{Long: "jobs", Short: 'j', Arg: getopt.RequiredArg}, ArgName: "job(.step)",
		Help: "comma separated list of jobs (N, N_I for an array task) or steps (N.batch, N.S) to show, whatever their time",
		List: func(o *Options) *[]string { return &o.Jobs }},
	{Spec: getopt.Spec{Long: "timelimit-min", Short: 'k', Arg: getopt.RequiredArg}, ArgName: "time",
		Help: "show jobs with this time limit (with -K: at least this one)", Set: setTimeMin},
	{Spec: getopt.Spec{Long: "timelimit-max", Short: 'K', Arg: getopt.RequiredArg}, ArgName: "time",
		Help: "with -k: show jobs with a time limit of at most this", Set: setTimeMax},
	{Spec: getopt.Spec{Long: "long", Short: 'l'}, Help: "show Slurm's long list of fields", Flag: func(o *Options) *bool { return &o.Long }},
	{Spec: getopt.Spec{Long: "allclusters", Short: 'L'}, Help: "show the jobs of every cluster in the accounting store", Set: setAllClusters},
	{Spec: getopt.Spec{Long: "cluster", Short: 'M', Arg: getopt.RequiredArg}, Hidden: true,
		List: func(o *Options) *[]string { return &o.Clusters }},
	{Spec: getopt.Spec{Long: "clusters", Short: 'M', Arg: getopt.RequiredArg, ID: "cluster"}, ArgName: "clusters",
		Help: "comma separated list of clusters whose jobs to show, or all", List: func(o *Options) *[]string { return &o.Clusters }},
	{Spec: getopt.Spec{Long: "nodelist", Short: 'N', Arg: getopt.RequiredArg}, ArgName: "hostlist",
		Help: "show jobs that ran on any of these nodes", Set: setNodes},
	{Spec: getopt.Spec{Long: "noconvert"}, Help: "print sizes as they are (Tide never converts them)"},
	{Spec: getopt.Spec{Long: "units", Arg: getopt.RequiredArg}, ArgName: "[KMGTP]",
		Help: "print sizes in this unit (not supported by Tide's sacct)", Set: noUnits},
	{Spec: getopt.Spec{Long: "noheader", Short: 'n'}, Help: "print no header lines", Flag: func(o *Options) *bool { return &o.NoHeader }},
	{Spec: getopt.Spec{Long: "fields", Short: 'o', Arg: getopt.RequiredArg, ID: "format"}, Hidden: true,
		Set: func(o *Options, v string, _ bool) error { o.Formats = append(o.Formats, v); return nil }},
	{Spec: getopt.Spec{Long: "format", Short: 'o', Arg: getopt.RequiredArg}, ArgName: "fields",
		Help: "comma separated list of fields, Field%WIDTH (--helpformat lists them; also --fields)",
		Set:  func(o *Options, v string, _ bool) error { o.Formats = append(o.Formats, v); return nil }},
	{Spec: getopt.Spec{Long: "parsable", Short: 'p'}, Help: "'|' delimited output with a '|' at the end", Flag: func(o *Options) *bool { return &o.Parsable }},
	{Spec: getopt.Spec{Long: "parsable2", Short: 'P'}, Help: "'|' delimited output without a '|' at the end", Flag: func(o *Options) *bool { return &o.Parsable2 }},
	{Spec: getopt.Spec{Long: "qos", Short: 'q', Arg: getopt.RequiredArg}, ArgName: "qos",
		Help: "comma separated list of QOS (Tide: job classes) whose jobs to show", Set: setQOS},
	{Spec: getopt.Spec{Long: "partition", Short: 'r', Arg: getopt.RequiredArg}, ArgName: "partitions",
		Help: "comma separated list of partitions whose jobs to show", List: func(o *Options) *[]string { return &o.Partitions }},
	{Spec: getopt.Spec{Long: "reason", Short: 'R', Arg: getopt.RequiredArg}, ArgName: "reasons",
		Help: "comma separated list of reasons (Resources, Priority, ...) of the jobs to show", Set: setReasons},
	{Spec: getopt.Spec{Long: "state", Short: 's', Arg: getopt.RequiredArg}, ArgName: "states",
		Help: "comma separated list of states (CD, F, TO, CA, R, PD, ...) of the jobs to show; without -S, jobs in them now",
		List: func(o *Options) *[]string { return &o.States }},
	{Spec: getopt.Spec{Long: "starttime", Short: 'S', Arg: getopt.RequiredArg}, ArgName: "time",
		Help: "show jobs that were active after this time (default: midnight, or now with -s)", Str: func(o *Options) *string { return &o.Start }},
	{Spec: getopt.Spec{Long: "truncate", Short: 'T'}, Help: "cut start and end times to the -S/-E window (not supported by Tide's sacct)", Set: noTruncate},
	{Spec: getopt.Spec{Long: "uid", Short: 'u', Arg: getopt.RequiredArg, ID: "user"}, Hidden: true,
		List: func(o *Options) *[]string { return &o.Users }},
	{Spec: getopt.Spec{Long: "use-local-uid"}, Help: "read user ids on this host (as Tide always does)"},
	{Spec: getopt.Spec{Long: "usage", Short: 'U'}, Help: "print a brief usage message", Set: askUsage},
	{Spec: getopt.Spec{Long: "user", Short: 'u', Arg: getopt.RequiredArg}, ArgName: "users",
		Help: "comma separated list of user names or ids whose jobs to show, -1 for all (also --uid)",
		List: func(o *Options) *[]string { return &o.Users }},
	{Spec: getopt.Spec{Long: "verbose", Short: 'v'}, Help: "report more (Tide's sacct has nothing more to say)"},
	{Spec: getopt.Spec{Long: "version", Short: 'V'}, Action: getopt.Version, Help: "print the Slurm release sacct behaves as"},
	{Spec: getopt.Spec{Long: "wckeys", Short: 'W', Arg: getopt.RequiredArg}, ArgName: "wckeys",
		Help: "show the jobs of these workload characterization keys (Tide's jobs have none)", Set: selectNone},
	{Spec: getopt.Spec{Long: "whole-hetjob", Arg: getopt.OptionalArg}, ArgName: "yes|no",
		Help: "all the components of heterogeneous jobs, or not (Tide has none)", Set: checkWholeHetjob},
	{Spec: getopt.Spec{Long: "associations", Short: 'x', Arg: getopt.RequiredArg}, ArgName: "ids",
		Help: "show the jobs of these association ids (Tide has none)", Set: selectNone},
	{Spec: getopt.Spec{Long: "json"}, Help: "print the jobs as JSON", Flag: func(o *Options) *bool { return &o.JSON }},
	{Spec: getopt.Spec{Long: "yaml"}, Help: "print the jobs as YAML (not supported by Tide: use --json)", Set: noYAML},
	// -t: Slurm's old name of -X, a short option only.
	{Spec: getopt.Spec{Short: 't', ID: "allocations"}, Hidden: true, Flag: func(o *Options) *bool { return &o.Allocations }},
}

// askHelp, askFields and askUsage are -h, -e and -U.
func askHelp(o *Options, _ string, _ bool) error   { o.more.help = helpText; return nil }
func askFields(o *Options, _ string, _ bool) error { o.more.help = helpFields; return nil }
func askUsage(o *Options, _ string, _ bool) error  { o.more.help = helpUsage; return nil }

func setAllClusters(o *Options, _ string, _ bool) error {
	o.Clusters = append(o.Clusters, "all")
	return nil
}

// setNodes is -N; Slurm keeps the first list and complains about the
// others.
func setNodes(o *Options, v string, _ bool) error {
	if o.more.nodes != nil {
		cmdutil.Errorf(o.IO.ErrOut, "sacct", "Already asked for nodes '%s'", o.more.nodeList)
		return nil
	}
	hosts, err := hostlist.Expand(v)
	if err != nil || len(hosts) == 0 {
		return fmt.Errorf("'%s' invalid entry for --nodelist", v)
	}
	o.more.nodes, o.more.nodeList = map[string]bool{}, v
	for _, h := range hosts {
		o.more.nodes[h] = true
	}
	return nil
}

func setQOS(o *Options, v string, _ bool) error {
	o.more.qos = append(o.more.qos, nonEmpty(strings.Split(v, ","))...)
	return nil
}

func setGroups(o *Options, v string, _ bool) error {
	o.more.groups = append(o.more.groups, nonEmpty(strings.Split(v, ","))...)
	return nil
}

func setReasons(o *Options, v string, _ bool) error {
	o.more.reasons = append(o.more.reasons, nonEmpty(strings.Split(v, ","))...)
	return nil
}

func setConstraints(o *Options, v string, _ bool) error {
	o.more.constraints = append(o.more.constraints, nonEmpty(strings.Split(v, ","))...)
	return nil
}

func setNNodes(o *Options, v string, _ bool) error {
	r, err := parseRange(v, "requested node range")
	if err != nil {
		return fmt.Errorf("invalid node range -i '%s'", v)
	}
	o.more.nnodes = r
	return nil
}

func setNCPUs(o *Options, v string, _ bool) error {
	r, err := parseRange(v, "requested cpu range")
	if err != nil {
		return fmt.Errorf("invalid cpu range -I '%s'", v)
	}
	o.more.ncpus = r
	return nil
}

func setTimeMin(o *Options, v string, _ bool) error {
	m, err := parseMinutes(v)
	o.more.timelimit[0] = m
	return err
}

func setTimeMax(o *Options, v string, _ bool) error {
	m, err := parseMinutes(v)
	o.more.timelimit[1] = m
	return err
}

// parseMinutes reads a time limit in Slurm's formats as minutes
// (UNLIMITED as the largest); Slurm refuses zero and less.
func parseMinutes(v string) (int64, error) {
	secs, err := api.ParseTimeLimit(v)
	switch {
	case err == nil && secs == api.Infinite:
		return math.MaxInt32, nil
	case err != nil || secs <= 0:
		return 0, errors.New("Invalid time limit specification")
	}
	return (secs + 59) / 60, nil
}

// parseRange reads min[-max] as Slurm's node and CPU counts: numbers
// with an optional K (1024) or M (1048576) suffix; "" and "*" are any.
func parseRange(v, what string) ([2]int64, error) {
	if v == "" || v == "*" {
		return [2]int64{1, 1<<31 - 1}, nil
	}
	lo, hi, hasHi := strings.Cut(v, "-")
	var r [2]int64
	var err error
	if r[0], err = parseCount(lo, false); err != nil {
		return r, err
	}
	if hasHi {
		if r[1], err = parseCount(hi, true); err != nil {
			return r, err
		}
	}
	return r, nil
}

func parseCount(s string, positive bool) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k") || strings.HasSuffix(s, "K"):
		mult, s = 1024, s[:len(s)-1]
	case strings.HasSuffix(s, "m") || strings.HasSuffix(s, "M"):
		mult, s = 1048576, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || (positive && n == 0) || n*mult > 1<<31-1 {
		return 0, fmt.Errorf("invalid count %q", s)
	}
	return n * mult, nil
}

// checkWholeHetjob validates --whole-hetjob as Slurm does; Tide has no
// heterogeneous jobs, so either answer shows the same.
func checkWholeHetjob(_ *Options, v string, has bool) error {
	switch strings.ToLower(v) {
	case "yes", "y", "no", "n":
		return nil
	}
	if !has {
		return nil
	}
	return fmt.Errorf("Invalid --whole-hetjob value \"%s\". Valid values: [yes|no].", v)
}

func selectNone(o *Options, _ string, _ bool) error {
	o.more.none = true
	return nil
}

// The options Tide's sacct cannot carry out: refused with the reason,
// rather than ignored into a wrong answer.

func noScript(*Options, string, bool) error {
	return errors.New("-B/--batch-script is not supported by Tide's sacct: see scontrol show job -d")
}

func noEnv(*Options, string, bool) error {
	return errors.New("--env-vars is not supported by Tide's sacct")
}

func noCompletion(*Options, string, bool) error {
	return errors.New("Tide keeps no job completion log: sacct reads the accounting records (drop -c/-f)")
}

func noFlags(*Options, string, bool) error {
	return errors.New("-F/--flags is not supported by Tide's sacct")
}

func noUnits(*Options, string, bool) error {
	return errors.New("--units is not supported by Tide's sacct")
}

func noTruncate(*Options, string, bool) error {
	return errors.New("-T/--truncate is not supported by Tide's sacct")
}

func noYAML(*Options, string, bool) error {
	return errors.New("--yaml is not supported by Tide: use --json")
}

// parseArgs reads sacct's command line into o. done says the command
// has nothing more to do: help, usage or version were printed, or a
// syntax error was.
func (o *Options) parseArgs(args []string) (done bool, err error) {
	operands, done, err := cmdutil.ParseOptions(o.IO, &command, o, args, o.Getenv)
	if done || err != nil {
		return done, err
	}
	switch o.more.help {
	case helpText:
		command.WriteHelp(o.IO.Out)
		return true, nil
	case helpUsage:
		command.WriteUsage(o.IO.Out)
		return true, nil
	case helpFields:
		o.HelpFormat = true
	}
	switch {
	case len(operands) > 0:
		// Slurm's sacct ignores operands; Tide names the mistake.
		return true, cmdutil.Usagef("Unknown arguments: %s", strings.Join(operands, " "))
	case o.Long && len(o.Formats) > 0:
		return true, errors.New("Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.")
	}
	return false, nil
}

// writeHelp is sacct --help in the layout of Slurm's: each option on a
// line of its own, its description under it.
func writeHelp(w io.Writer) {
	const indent = "                   "
	var b strings.Builder
	b.WriteString("sacct [<OPTION>]\n    Valid <OPTION> values are:\n")
	// The table itself, not command, whose HelpText this is.
	table := getopt.Command[Options]{Options: options[:]}
	for _, op := range table.Listed() {
		if op.Short != 0 {
			fmt.Fprintf(&b, "     -%c, --%s:\n", op.Short, op.Long)
		} else {
			fmt.Fprintf(&b, "     --%s:\n", op.Long)
		}
		for _, l := range getopt.WrapWords(op.Help, 80-len(indent)) {
			b.WriteString(indent + l + "\n")
		}
	}
	b.WriteString("\n     Note, valid start/end time formats are...\n")
	for _, f := range []string{
		"HH:MM[:SS]",
		"MMDD[YY] or MM/DD[/YY]",
		"YYYY-MM-DD[THH:MM[:SS]]",
		"now[{+|-}count[seconds(default)|minutes|hours|days|weeks]]",
		"today, midnight, noon, yesterday, tomorrow",
	} {
		b.WriteString(indent + f + "\n")
	}
	io.WriteString(w, b.String())
}

// writeUsage is sacct --usage, which points at --help.
func writeUsage(w io.Writer) {
	io.WriteString(w, "Usage: sacct [options]\n\tSee --help for the options\n")
}
