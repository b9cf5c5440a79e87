package scontrol

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/internal/termsafe"
)

// Version is the Tide version `scontrol version` reports; the build sets
// it with -ldflags "-X github.com/tide-hpc/tide/cli/scontrol.Version=…".
var Version = "dev"

// slurmCompat is the Slurm release whose scontrol output Tide mimics.
const slurmCompat = "22.05.8"

// Options are scontrol's parsed flags and dependencies.
type Options struct {
	IO     *cmdutil.IOStreams
	API    func() (cmdutil.API, error)
	Getenv func(string) string
	// Loc is the zone times are printed in (time.Local in production).
	Loc *time.Location

	OneLiner bool
	Details  bool
	Quiet    bool
}

// NewCmd returns the `scontrol` command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return newCmd(f, time.Local)
}

func newCmd(f *cmdutil.Factory, loc *time.Location) *cobra.Command {
	opts := &Options{IO: f.IO, API: f.API, Getenv: f.Getenv, Loc: loc}
	var all, version bool
	cmd := &cobra.Command{
		Use:   "scontrol [-o] [-d] COMMAND [ARGS...]",
		Short: "View and modify Tide jobs, nodes and partitions",
		Long: `scontrol shows and changes the state of jobs, nodes and partitions.

Commands (case-insensitive, unambiguous abbreviations accepted):
  show job [ID]                   show node [NAMES]      show partition [NAME]
  show config                     show hostnames [LIST]  show hostlist NAMES
  hold ID...    uhold ID...       release ID...          requeue ID...
  update JobId=ID[,ID] Key=Value...     (TimeLimit=[+|-]TIME Name= Comment=
                                         Partition= Priority= Nice= Account=)
  update NodeName=NODES State=DRAIN|DOWN|RESUME|UNDRAIN [Reason="..."]
  ping    version`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if version {
				return opts.version()
			}
			if len(args) == 0 {
				return cmdutil.Usagef("no command given (try: scontrol show job)")
			}
			return opts.Run(cmd.Context(), args)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return cmdutil.Usagef("%s", err)
	})
	fl := cmd.Flags()
	fl.BoolVarP(&opts.OneLiner, "oneliner", "o", false, "print each record on one line")
	fl.BoolVarP(&opts.Details, "details", "d", false, "show more details (GPU indices per node)")
	fl.BoolVarP(&opts.Quiet, "quiet", "Q", false, "do not print per-job error messages")
	fl.BoolVarP(&all, "all", "a", false, "show all partitions (Tide hides none; accepted for Slurm compatibility)")
	fl.BoolVarP(&version, "version", "V", false, "print the version")
	return cmd
}

// commands are the supported top-level keywords, matched by unambiguous
// prefix.
var commands = []string{"show", "hold", "uhold", "release", "requeue", "update", "ping", "version", "help"}

// slurmOnly are Slurm commands Tide does not implement; naming one gets a
// clearer error than "invalid keyword".
var slurmOnly = []string{"abort", "cancel_reboot", "cluster", "completing", "create", "delete",
	"errnumstr", "fsdampeningfactor", "getaddrs", "listpids", "notify", "pidinfo",
	"power", "reboot", "reboot_nodes", "reconfigure", "requeuehold", "resume", "schedloglevel",
	"setdebug", "setdebugflags", "shutdown", "suspend", "takeover", "token", "top", "wait_job", "write"}

// Run executes one scontrol command line (without the program name).
func (o *Options) Run(ctx context.Context, args []string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	cmd, err := matchKeyword(args[0], commands)
	if err != nil {
		if contains(slurmOnly, strings.ToLower(args[0])) {
			return fmt.Errorf("%s is not supported by Tide", strings.ToLower(args[0]))
		}
		return err
	}
	rest := args[1:]
	switch cmd {
	case "show":
		return o.show(ctx, rest)
	case "hold", "uhold", "release", "requeue":
		return o.jobAction(ctx, cmd, rest)
	case "update":
		return o.update(ctx, rest)
	case "ping":
		return o.ping(ctx)
	case "version":
		return o.version()
	case "help":
		fmt.Fprintln(o.IO.Out, "usage: scontrol [-o] [-d] COMMAND [ARGS...]; run scontrol --help for the command list")
		return nil
	}
	return fmt.Errorf("invalid keyword: %s", args[0])
}

// showEntities are the `show` targets in their long forms, so that
// "job", "jobs", "node", "nodes", "part" and "config" all match.
var showEntities = []string{"jobs", "nodes", "partitions", "configuration", "hostnames", "hostlist", "hostlistsorted"}

var showSlurmOnly = []string{"aliases", "assoc_mgr", "bbstat", "burstbuffer", "daemons", "dwstat",
	"federation", "frontend", "licenses", "reservations", "slurmd", "steps", "topology"}

func (o *Options) show(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("too few arguments for keyword: show")
	}
	ent, err := matchKeyword(args[0], showEntities)
	if err != nil {
		if _, e2 := matchKeyword(args[0], showSlurmOnly); e2 == nil {
			return fmt.Errorf("show %s is not supported by Tide", strings.ToLower(args[0]))
		}
		return fmt.Errorf("invalid entity: %s for keyword: show", args[0])
	}
	rest := args[1:]
	switch ent {
	case "jobs":
		return o.showJob(ctx, rest)
	case "nodes":
		return o.showNode(ctx, rest)
	case "partitions":
		return o.showPartition(ctx, rest)
	case "configuration":
		return o.showConfig(ctx)
	case "hostnames":
		return o.showHostnames(rest)
	case "hostlist", "hostlistsorted":
		return o.showHostlist(rest)
	}
	return fmt.Errorf("invalid entity: %s for keyword: show", args[0])
}

// matchKeyword returns the candidate word equals (case-insensitively) or
// is an unambiguous prefix of.
func matchKeyword(word string, candidates []string) (string, error) {
	w := strings.ToLower(word)
	if w == "" {
		return "", fmt.Errorf("invalid keyword: %q", word)
	}
	var hits []string
	for _, c := range candidates {
		if c == w {
			return c, nil
		}
		if strings.HasPrefix(c, w) {
			hits = append(hits, c)
		}
	}
	switch len(hits) {
	case 0:
		return "", fmt.Errorf("invalid keyword: %s", word)
	case 1:
		return hits[0], nil
	}
	sort.Strings(hits)
	return "", fmt.Errorf("ambiguous keyword: %s (could be %s)", word, strings.Join(hits, ", "))
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (o *Options) version() error {
	fmt.Fprintf(o.IO.Out, "slurm %s (tide %s)\n", slurmCompat, Version)
	return nil
}

func (o *Options) ping(ctx context.Context) error {
	c, err := o.API()
	if err != nil {
		return err
	}
	info, err := c.Cluster(ctx)
	if err != nil {
		fmt.Fprintln(o.IO.Out, "Slurmctld(primary) is DOWN")
		return fmt.Errorf("ping controller: %w", err)
	}
	fmt.Fprintf(o.IO.Out, "Slurmctld(primary) at %s is UP\n", termsafe.Escape(ctldHost(info.Config, info.Name)))
	return nil
}

// ctldHost names the controller host from its config, as Slurm's ping
// line does ("SlurmctldHost = vm(127.0.0.1)" → "vm").
func ctldHost(cfg map[string]string, fallback string) string {
	for _, k := range []string{"SlurmctldHost", "SlurmctldHost[0]"} {
		if h := cfg[k]; h != "" {
			if i := strings.IndexByte(h, '('); i > 0 {
				h = h[:i]
			}
			return h
		}
	}
	if fallback != "" {
		return fallback
	}
	return "localhost"
}
