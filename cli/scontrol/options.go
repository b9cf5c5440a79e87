package scontrol

import (
	"context"
	"errors"
	"io"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/getopt"
)

// command is scontrol's table of global options: Slurm 22.05
// scontrol's, in the order of its long_options, then Tide's --json, read
// with getopt_long's rules (cli/getopt). Options may come anywhere on
// the line ("scontrol show job 5 --json"). --help, -h and --usage all
// print helpText.
var command = getopt.Command[Options]{
	Name:      "scontrol",
	Options:   options[:],
	TryHelp:   true,
	HelpText:  func(w io.Writer) { io.WriteString(w, helpText) },
	UsageText: func(w io.Writer) { io.WriteString(w, helpText) },
}

type opt = getopt.Option[Options]

var options = [...]opt{
	{Spec: getopt.Spec{Long: "all", Short: 'a'}, Help: "show all partitions (Tide hides none)"},
	{Spec: getopt.Spec{Long: "cluster", Short: 'M', Arg: getopt.RequiredArg}, ArgName: "name",
		Help: "cluster to act on: the controller's own cluster", Str: func(o *Options) *string { return &o.Clusters }},
	{Spec: getopt.Spec{Long: "clusters", Short: 'M', Arg: getopt.RequiredArg, ID: "cluster"}, Hidden: true,
		Str: func(o *Options) *string { return &o.Clusters }},
	{Spec: getopt.Spec{Long: "details", Short: 'd'}, Help: "show more details", Flag: func(o *Options) *bool { return &o.Details }},
	{Spec: getopt.Spec{Long: "federation"}, Help: "show a federation's records (Tide runs one cluster)"},
	{Spec: getopt.Spec{Long: "future", Short: 'F'}, Help: "show nodes in the FUTURE state too (Tide has none)"},
	{Spec: getopt.Spec{Long: "help", Short: 'h'}, Action: getopt.Help, Help: "print the description of use"},
	{Spec: getopt.Spec{Long: "hide"}, Help: "show neither hidden partitions nor details", Set: hide},
	{Spec: getopt.Spec{Long: "local"}, Help: "show only the local cluster's records (Tide runs one)"},
	{Spec: getopt.Spec{Long: "oneliner", Short: 'o'}, Help: "print each record on one line", Flag: func(o *Options) *bool { return &o.OneLiner }},
	{Spec: getopt.Spec{Long: "quiet", Short: 'Q'}, Help: "print no messages other than errors", Flag: func(o *Options) *bool { return &o.Quiet }},
	{Spec: getopt.Spec{Long: "sibling"}, Help: "show a federated job's siblings (Tide runs one cluster)"},
	{Spec: getopt.Spec{Long: "uid", Short: 'u', Arg: getopt.RequiredArg}, ArgName: "uid",
		Help: "act as this user (not supported by Tide: the controller knows the caller)", Set: noUID},
	{Spec: getopt.Spec{Long: "usage", ID: "help"}, Action: getopt.Help, Help: "print the description of use"},
	{Spec: getopt.Spec{Long: "verbose", Short: 'v'}, Help: "report more (Tide's scontrol has nothing more to say)", Set: verbose},
	{Spec: getopt.Spec{Long: "version", Short: 'V'}, Action: getopt.Version, Help: "print the Slurm release scontrol behaves as"},

	// Tide's own (Slurm's from 23.02 on).
	{Spec: getopt.Spec{Long: "json"}, Tide: true, Help: "print show and ping as JSON, in Slurm's data_parser layout",
		Flag: func(o *Options) *bool { return &o.JSON }},
}

// hide is --hide, which undoes -a and -d.
func hide(o *Options, _ string, _ bool) error {
	o.Details = false
	return nil
}

// verbose is -v, which also undoes -Q.
func verbose(o *Options, _ string, _ bool) error {
	o.Quiet = false
	return nil
}

func noUID(*Options, string, bool) error {
	return errors.New("--uid is not supported by Tide: the controller acts as the user who runs scontrol")
}

// parseArgs reads scontrol's global options into o, wherever they are on
// the line, and returns the rest: the command and its words. done says
// scontrol has nothing more to do (help or version were printed, or a
// syntax error was).
func (o *Options) parseArgs(args []string) (words []string, done bool, err error) {
	return cmdutil.ParseOptions(o.IO, &command, o, args, o.Getenv)
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
