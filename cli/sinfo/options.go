package sinfo

import (
	"errors"
	"fmt"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/getopt"
)

// command is sinfo's option table: Slurm 22.05 sinfo's, in the order of
// its long_options, then Tide's own, read with getopt_long's rules
// (cli/getopt).
var command = getopt.Command[Options]{
	Name:       "sinfo",
	Options:    options[:],
	TryHelp:    true,
	HelpColumn: 29,
}

type opt = getopt.Option[Options]

// options is the table. The options for what Tide's one cluster has no
// use for (federation, hidden partitions, unit conversion) are accepted
// and change nothing.
var options = [...]opt{
	{Spec: getopt.Spec{Long: "all", Short: 'a'}, Help: "show all partitions (Tide hides none)", Set: setAll},
	{Spec: getopt.Spec{Long: "dead", Short: 'd'}, Help: "only nodes that do not respond", Flag: func(o *Options) *bool { return &o.Dead }},
	{Spec: getopt.Spec{Long: "exact", Short: 'e'}, Help: "group nodes only with identical sizes (no min+ ranges)", Flag: func(o *Options) *bool { return &o.Exact }},
	{Spec: getopt.Spec{Long: "federation"}, Help: "show a federation's partitions (Tide runs one cluster)"},
	{Spec: getopt.Spec{Long: "help"}, Action: getopt.Help, Help: "show this help message"},
	{Spec: getopt.Spec{Long: "hide"}, Help: "hide hidden partitions (Tide hides none)"},
	{Spec: getopt.Spec{Long: "iterate", Short: 'i', Arg: getopt.RequiredArg}, ArgName: "seconds",
		Help: "repeat the report every so many seconds until interrupted", Set: setIterate},
	{Spec: getopt.Spec{Long: "local"}, Help: "show only the local cluster (Tide runs one)"},
	{Spec: getopt.Spec{Long: "long", Short: 'l'}, Help: "long report, with the date first", Flag: func(o *Options) *bool { return &o.Long }},
	{Spec: getopt.Spec{Long: "cluster", Short: 'M', Arg: getopt.RequiredArg}, Hidden: true, Str: func(o *Options) *string { return &o.Clusters }},
	{Spec: getopt.Spec{Long: "clusters", Short: 'M', Arg: getopt.RequiredArg, ID: "cluster"}, ArgName: "names",
		Help: "cluster to ask: the controller's own cluster, or all", Str: func(o *Options) *string { return &o.Clusters }},
	{Spec: getopt.Spec{Long: "nodes", Short: 'n', Arg: getopt.RequiredArg}, ArgName: "nodes",
		Help: "hostlist of nodes to view", Str: func(o *Options) *string { return &o.Nodes }},
	{Spec: getopt.Spec{Long: "noconvert"}, Help: "print sizes as they are (Tide never converts them)"},
	{Spec: getopt.Spec{Long: "noheader", Short: 'h'}, Help: "print no header lines", Flag: func(o *Options) *bool { return &o.NoHeader }},
	{Spec: getopt.Spec{Long: "Node", Short: 'N'}, Help: "one line per node (and partition)", Flag: func(o *Options) *bool { return &o.NodeView }},
	{Spec: getopt.Spec{Long: "format", Short: 'o', Arg: getopt.RequiredArg}, ArgName: "format",
		Help: "format specification of %[.][width]X fields", Set: setFormat},
	{Spec: getopt.Spec{Long: "Format", Short: 'O', Arg: getopt.RequiredArg}, ArgName: "format",
		Help: "format specification of Name[:[.]width] fields", Set: setFormatLong},
	{Spec: getopt.Spec{Long: "partition", Short: 'p', Arg: getopt.RequiredArg}, ArgName: "partition",
		Help: "comma separated list of partitions to view", Set: setPartition},
	{Spec: getopt.Spec{Long: "responding", Short: 'r'}, Help: "only nodes that respond", Flag: func(o *Options) *bool { return &o.Responding }},
	{Spec: getopt.Spec{Long: "list-reasons", Short: 'R'}, Help: "list why nodes are down or drained", Flag: func(o *Options) *bool { return &o.ListReasons }},
	{Spec: getopt.Spec{Long: "summarize", Short: 's'}, Help: "one line per partition with node counts", Flag: func(o *Options) *bool { return &o.Summarize }},
	{Spec: getopt.Spec{Long: "sort", Short: 'S', Arg: getopt.RequiredArg}, ArgName: "fields",
		Help: "comma separated list of fields to sort on ('-' descending, '#P' partitions in config order)", Str: func(o *Options) *string { return &o.Sort }},
	{Spec: getopt.Spec{Long: "states", Short: 't', Arg: getopt.RequiredArg}, ArgName: "node_state",
		Help: "comma separated list of node states to view", Str: func(o *Options) *string { return &o.States }},
	{Spec: getopt.Spec{Long: "reservation", Short: 'T'}, Help: "show reservations instead (Tide has none)", Flag: func(o *Options) *bool { return &o.Reservations }},
	{Spec: getopt.Spec{Long: "usage"}, Action: getopt.Usage, Help: "show a brief summary of sinfo's options"},
	{Spec: getopt.Spec{Long: "verbose", Short: 'v'}, Help: "print the options in effect on stderr", Count: func(o *Options) *int { return &o.Verbose }},
	{Spec: getopt.Spec{Long: "version", Short: 'V'}, Action: getopt.Version, Help: "print the Slurm release sinfo behaves as"},
	{Spec: getopt.Spec{Long: "json"}, Help: "print nodes and partitions as JSON", Flag: func(o *Options) *bool { return &o.JSON }},
	{Spec: getopt.Spec{Long: "yaml"}, Help: "print them as YAML (not supported by Tide: use --json)", Set: noYAML},

	// Tide's own.
	{Spec: getopt.Spec{Long: "gpus"}, Tide: true, Help: "add a GPUS(A/I/T) column: allocated, idle and total GPUs", Flag: func(o *Options) *bool { return &o.GPUs }},
	{Spec: getopt.Spec{Long: "partitions", Arg: getopt.RequiredArg, ID: "partition"}, Tide: true, Hidden: true, Set: setPartition},
}

// setAll is -a; Slurm forgets a -p given before it.
func setAll(o *Options, _ string, _ bool) error {
	o.allSet, o.Partitions = true, ""
	return nil
}

func setPartition(o *Options, v string, _ bool) error {
	o.Partitions, o.partitionSet = v, true
	return nil
}

// setFormat and setFormatLong are -o and -O: the last one given wins.
func setFormat(o *Options, v string, _ bool) error {
	o.Format, o.FormatLong, o.formatSet = v, "", true
	return nil
}

func setFormatLong(o *Options, v string, _ bool) error {
	o.Format, o.FormatLong, o.formatSet = "", v, true
	return nil
}

// setIterate reads the period as Slurm does (C's atoi) and refuses 0.
func setIterate(o *Options, v string, _ bool) error {
	n := cmdutil.Atoi(v)
	if n <= 0 {
		return fmt.Errorf("invalid entry for --iterate=%s: must be a positive number of seconds", v)
	}
	o.Iterate = n
	return nil
}

func noYAML(*Options, string, bool) error {
	return errors.New("--yaml is not supported by Tide: use --json")
}

// parseArgs reads sinfo's command line into o. done says the command
// has nothing more to do (help, usage and version were printed, or a
// syntax error was).
func (o *Options) parseArgs(args []string) (done bool, err error) {
	operands, done, err := cmdutil.ParseOptions(o.IO, &command, o, args, o.Getenv)
	if done || err != nil {
		return done, err
	}
	switch {
	case len(operands) > 0:
		// Slurm's sinfo ignores operands; Tide names the mistake.
		return true, cmdutil.Usagef("Unrecognized option: %s", operands[0])
	case o.Long && o.formatSet:
		return true, errors.New("Options -o(--format) and -l(--long) are mutually exclusive. Please remove one and retry.")
	case o.allSet && o.partitionSet:
		return true, errors.New("Conflicting options, -a and -p, specified. Please choose one or the other.")
	}
	return false, nil
}
