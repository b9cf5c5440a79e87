package sprio

import (
	"context"
	"fmt"
	"strings"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/getopt"
	"github.com/tide-hpc/tide/cli/slurmfmt"
	"github.com/tide-hpc/tide/ctld/api"
)

// command is sprio's option table: Slurm 22.05 sprio's, in the order of
// its long_options, then Tide's own, read with getopt_long's rules
// (cli/getopt). -o and -S are refused with a reason rather than
// ignored; -w prints the weights under policy tide's multifactor
// priority and is refused otherwise (Tide's levels have no weights).
var command = getopt.Command[Options]{
	Name:       "sprio",
	Options:    options[:],
	TryHelp:    true,
	HelpColumn: 34,
}

type opt = getopt.Option[Options]

var options = [...]opt{
	{Spec: getopt.Spec{Long: "noheader", Short: 'h'}, Help: "print no header line", Flag: func(o *Options) *bool { return &o.NoHeader }},
	{Spec: getopt.Spec{Long: "jobs", Short: 'j', Arg: getopt.OptionalArg}, ArgName: "jobs",
		Help: "comma separated list of job ids to show (or give them as operands)", Set: setJobs},
	{Spec: getopt.Spec{Long: "long", Short: 'l'}, Help: "more columns: user, asked level, GPUs, and every reason that applies",
		Flag: func(o *Options) *bool { return &o.Long }},
	{Spec: getopt.Spec{Long: "cluster", Short: 'M', Arg: getopt.RequiredArg}, ArgName: "cluster_name",
		Help: "cluster to ask: the controller's own cluster (also --clusters)", Str: func(o *Options) *string { return &o.Clusters }},
	{Spec: getopt.Spec{Long: "clusters", Short: 'M', Arg: getopt.RequiredArg, ID: "cluster"}, Hidden: true, Str: func(o *Options) *string { return &o.Clusters }},
	{Spec: getopt.Spec{Long: "norm", Short: 'n'}, Help: "show the factors normalized to 0-1 (levels over 10, age over the starvation age)",
		Flag: func(o *Options) *bool { return &o.Norm }},
	{Spec: getopt.Spec{Long: "format", Short: 'o', Arg: getopt.RequiredArg}, ArgName: "format",
		Help: "format of Slurm's weighted factors (not supported: Tide's columns are its own factors)", Set: noFormat},
	{Spec: getopt.Spec{Long: "sort", Short: 'S', Arg: getopt.RequiredArg}, ArgName: "fields",
		Help: "sort on Slurm's factors (not supported: Tide lists pending jobs by id)", Set: noSort},
	{Spec: getopt.Spec{Long: "partition", Short: 'p', Arg: getopt.RequiredArg}, ArgName: "partition_name",
		Help: "comma separated list of partitions", Str: func(o *Options) *string { return &o.Partitions }},
	{Spec: getopt.Spec{Long: "user", Short: 'u', Arg: getopt.RequiredArg}, ArgName: "user_name",
		Help: "comma separated list of users whose jobs to show", Str: func(o *Options) *string { return &o.Users }},
	{Spec: getopt.Spec{Long: "users", Short: 'u', Arg: getopt.RequiredArg, ID: "user"}, Hidden: true, Str: func(o *Options) *string { return &o.Users }},
	{Spec: getopt.Spec{Long: "verbose", Short: 'v'}, Help: "print the options in effect first", Count: func(o *Options) *int { return &o.Verbose }},
	{Spec: getopt.Spec{Long: "version", Short: 'V'}, Action: getopt.Version, Help: "print the Slurm release sprio behaves as"},
	{Spec: getopt.Spec{Long: "weights", Short: 'w'}, Help: "show the multifactor weights (policy tide; levels have none: see tide queues)",
		Flag: func(o *Options) *bool { return &o.Weights }},
	{Spec: getopt.Spec{Long: "federation"}, Help: "show the jobs of a federation (Tide runs one cluster)"},
	{Spec: getopt.Spec{Long: "help"}, Action: getopt.Help, Help: "show this help message"},
	{Spec: getopt.Spec{Long: "local"}, Help: "show only the local cluster's jobs (Tide runs one cluster)"},
	{Spec: getopt.Spec{Long: "sib", ID: "sibling"}, Hidden: true},
	{Spec: getopt.Spec{Long: "sibling"}, Help: "one line per federation sibling (Tide runs one cluster)"},
	{Spec: getopt.Spec{Long: "usage"}, Action: getopt.Usage, Help: "show a brief summary of sprio's options"},

	// Tide's own.
	{Spec: getopt.Spec{Long: "me"}, Tide: true, Help: "show only the caller's jobs", Flag: func(o *Options) *bool { return &o.Me }},
	{Spec: getopt.Spec{Long: "json"}, Tide: true, Help: "print the factors as JSON", Flag: func(o *Options) *bool { return &o.JSON }},
}

// setJobs is -j: the list may come attached, or as operands.
func setJobs(o *Options, v string, has bool) error {
	if has {
		o.Jobs = v
	}
	o.JobsFlag = true
	return nil
}

// The options about Slurm's format and sort, which Tide's sprio does
// not take.
func noFormat(*Options, string, bool) error { return unsupported("-o/--format") }
func noSort(*Options, string, bool) error   { return unsupported("-S/--sort") }

func unsupported(name string) error {
	return fmt.Errorf("%s is not supported by Tide's sprio, which shows Tide's own priority factors", name)
}

// parseArgs reads sprio's command line into o; operands are job ids.
// done says the command has nothing more to do (help, usage and version
// were printed, or a syntax error was).
func (o *Options) parseArgs(args []string) (done bool, err error) {
	operands, done, err := cmdutil.ParseOptions(o.IO, &command, o, args, o.Getenv)
	if done || err != nil {
		return done, err
	}
	// Each operand is a list of ids, as -j's argument is.
	for _, a := range operands {
		o.Args = append(o.Args, api.SplitJobIDList(a)...)
	}
	if o.Verbose > 0 {
		o.printOptions()
	}
	return false, nil
}

// printOptions is -v: the options in effect, on stdout as Slurm's sprio
// prints them.
func (o *Options) printOptions() {
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "%-10s = %s\n", k, v) }
	flag := "0"
	if o.JobsFlag || len(o.Args) > 0 {
		flag = "1"
	}
	jobs := strings.Join(append(listOf(o.Jobs), o.Args...), ",")
	b.WriteString("-----------------------------\n")
	line("format", slurmfmt.OrNull(""))
	line("job_flag", flag)
	line("jobs", slurmfmt.OrNull(jobs))
	line("partition", slurmfmt.OrNull(o.Partitions))
	line("users", slurmfmt.OrNull(o.Users))
	line("verbose", fmt.Sprint(o.Verbose))
	b.WriteString("-----------------------------\n\n\n")
	o.IO.Out.Write([]byte(b.String()))
}

// listOf is s as a list of one, or none when it is empty.
func listOf(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// checkClusters refuses a -M/--clusters that names another cluster than
// the controller's (Tide runs one).
func (o *Options) checkClusters(ctx context.Context) error {
	if o.Clusters == "" {
		return nil
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	info, err := c.Cluster(ctx)
	if err != nil {
		return err
	}
	return cmdutil.CheckClusters(o.Clusters, info.Name, false)
}
