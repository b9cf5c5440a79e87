package scancel

import (
	"context"
	"errors"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/getopt"
)

// command is scancel's option table: Slurm 22.05 scancel's, in the order
// of its long_options, then Tide's own aliases, read with getopt_long's
// rules (cli/getopt). Options may follow the job ids.
var command = getopt.Command[Options]{
	Name:       "scancel",
	Options:    options[:],
	TryHelp:    true,
	Operands:   "[job_id[_array_id][.step_id]]",
	HelpColumn: 34,
}

type opt = getopt.Option[Options]

var options = [...]opt{
	{Spec: getopt.Spec{Long: "account", Short: 'A', Arg: getopt.RequiredArg}, ArgName: "account",
		Help: "act only on jobs of this account (Tide: queue)", Str: func(o *Options) *string { return &o.Accounts }},
	{Spec: getopt.Spec{Long: "batch", Short: 'b'}, Help: "signal the batch shell alone (default: the job's steps)", Flag: func(o *Options) *bool { return &o.Batch }},
	{Spec: getopt.Spec{Long: "ctld"}, Hidden: true}, // send straight to the controller: Tide always does
	{Spec: getopt.Spec{Long: "full", Short: 'f'}, Help: "signal the batch shell and all its children, srun and its tasks among them",
		Flag: func(o *Options) *bool { return &o.Full }},
	{Spec: getopt.Spec{Long: "help"}, Action: getopt.Help, Help: "show this help message"},
	{Spec: getopt.Spec{Long: "hurry", Short: 'H'}, Help: "skip burst buffer stage out (Tide has no burst buffers)"},
	{Spec: getopt.Spec{Long: "interactive", Short: 'i'}, Help: "ask before cancelling each job", Flag: func(o *Options) *bool { return &o.Interactive }},
	{Spec: getopt.Spec{Long: "cluster", Short: 'M', Arg: getopt.RequiredArg}, Hidden: true, Str: func(o *Options) *string { return &o.Clusters }},
	{Spec: getopt.Spec{Long: "clusters", Short: 'M', Arg: getopt.RequiredArg, ID: "cluster"}, ArgName: "names",
		Help: "cluster to act on: the controller's own cluster, or all", Str: func(o *Options) *string { return &o.Clusters }},
	{Spec: getopt.Spec{Long: "jobname", Short: 'n', Arg: getopt.RequiredArg, ID: "name"}, Hidden: true, Str: func(o *Options) *string { return &o.Names }},
	{Spec: getopt.Spec{Long: "me"}, Help: "act only on the caller's jobs", Flag: func(o *Options) *bool { return &o.Me }},
	{Spec: getopt.Spec{Long: "name", Short: 'n', Arg: getopt.RequiredArg}, ArgName: "job_name",
		Help: "act only on jobs with this name (also --jobname)", Str: func(o *Options) *string { return &o.Names }},
	{Spec: getopt.Spec{Long: "nodelist", Short: 'w', Arg: getopt.RequiredArg}, ArgName: "hosts",
		Help: "act only on jobs running on these nodes", Str: func(o *Options) *string { return &o.NodeList }},
	{Spec: getopt.Spec{Long: "partition", Short: 'p', Arg: getopt.RequiredArg}, ArgName: "partition",
		Help: "act only on jobs in this partition", Str: func(o *Options) *string { return &o.Partitions }},
	{Spec: getopt.Spec{Long: "qos", Short: 'q', Arg: getopt.RequiredArg}, ArgName: "qos",
		Help: "act only on jobs with this quality of service (Tide: job class)", Str: func(o *Options) *string { return &o.QOS }},
	{Spec: getopt.Spec{Long: "quiet", Short: 'Q'}, Help: "do not report errors", Flag: func(o *Options) *bool { return &o.Quiet }},
	{Spec: getopt.Spec{Long: "reservation", Short: 'R', Arg: getopt.RequiredArg}, ArgName: "reservation",
		Help: "act only on jobs of this reservation (Tide has none)", Str: func(o *Options) *string { return &o.Reservation }},
	{Spec: getopt.Spec{Long: "sibling", Arg: getopt.RequiredArg}, ArgName: "cluster_name",
		Help: "remove a federated job's sibling (not supported: Tide runs one cluster)", Set: noSibling},
	{Spec: getopt.Spec{Long: "signal", Short: 's', Arg: getopt.RequiredArg}, ArgName: "name|integer",
		Help: "send this signal (name or number) instead of cancelling", Str: func(o *Options) *string { return &o.Signal }},
	{Spec: getopt.Spec{Long: "state", Short: 't', Arg: getopt.RequiredArg}, ArgName: "states",
		Help: "act only on jobs in these states (PENDING, RUNNING, SUSPENDED)", Str: func(o *Options) *string { return &o.States }},
	{Spec: getopt.Spec{Long: "usage"}, Action: getopt.Usage, Help: "show a brief summary of scancel's options"},
	{Spec: getopt.Spec{Long: "user", Short: 'u', Arg: getopt.RequiredArg}, ArgName: "user_name",
		Help: "act only on jobs of these users (names or ids)", Str: func(o *Options) *string { return &o.Users }},
	{Spec: getopt.Spec{Long: "verbose", Short: 'v'}, Help: "report each job as it is signalled", Count: func(o *Options) *int { return &o.Verbose }},
	{Spec: getopt.Spec{Long: "version", Short: 'V'}, Action: getopt.Version, Help: "print the Slurm release scancel behaves as"},
	{Spec: getopt.Spec{Long: "wckey", Arg: getopt.RequiredArg}, ArgName: "wckey",
		Help: "act only on jobs with this workload characterization key (Tide's jobs have none)", Str: func(o *Options) *string { return &o.WCKey }},

	// Tide's own aliases, kept from before Tide read Slurm's table.
	{Spec: getopt.Spec{Long: "accounts", Arg: getopt.RequiredArg, ID: "account"}, Tide: true, Hidden: true, Str: func(o *Options) *string { return &o.Accounts }},
	{Spec: getopt.Spec{Long: "partitions", Arg: getopt.RequiredArg, ID: "partition"}, Tide: true, Hidden: true, Str: func(o *Options) *string { return &o.Partitions }},
	{Spec: getopt.Spec{Long: "states", Arg: getopt.RequiredArg, ID: "state"}, Tide: true, Hidden: true, Str: func(o *Options) *string { return &o.States }},
	{Spec: getopt.Spec{Long: "users", Arg: getopt.RequiredArg, ID: "user"}, Tide: true, Hidden: true, Str: func(o *Options) *string { return &o.Users }},
	{Spec: getopt.Spec{Long: "nodes", Arg: getopt.RequiredArg, ID: "nodelist"}, Tide: true, Hidden: true, Str: func(o *Options) *string { return &o.NodeList }},
}

func noSibling(*Options, string, bool) error {
	return errors.New("--sibling is not supported: Tide runs one cluster, with no federation")
}

// parseArgs reads scancel's command line into o: the options, wherever
// they are, and the job ids. done says the command has nothing more to
// do (help, usage and version were printed, or a syntax error was).
func (o *Options) parseArgs(args []string) (done bool, err error) {
	operands, done, err := cmdutil.ParseOptions(o.IO, &command, o, args, o.Getenv)
	if done || err != nil {
		return done, err
	}
	o.JobIDs = operands
	return false, nil
}

// checkClusters refuses a -M/--clusters that names another cluster than
// the controller's (Tide runs one).
func (o *Options) checkClusters(ctx context.Context, client cmdutil.API) error {
	if o.Clusters == "" {
		return nil
	}
	info, err := client.Cluster(ctx)
	if err != nil {
		return err
	}
	return cmdutil.CheckClusters(o.Clusters, info.Name, false)
}
