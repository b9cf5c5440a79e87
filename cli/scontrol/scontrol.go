package scontrol

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/internal/termsafe"
)

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
	// JSON prints show job|node|partition, ping and show
	// licenses|reservations in Slurm's data_parser layout (json.go).
	JSON bool
	// Argv is the command line as run, for --json's meta.command.
	Argv []string
	// Clusters is -M/--clusters: it must name the controller's cluster.
	Clusters string
}

// NewCmd returns the `scontrol` command.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	return newCmd(f, time.Local)
}

// newCmd builds scontrol. Cobra only dispatches: scontrol reads its
// global options with Slurm's table (options.go).
func newCmd(f *cmdutil.Factory, loc *time.Location) *cobra.Command {
	opts := &Options{IO: f.IO, API: f.API, Getenv: f.Getenv, Loc: loc, Argv: commandLine()}
	return cmdutil.RawCommand("scontrol [OPTIONS] COMMAND [ARGS...]", "View and modify Tide jobs, nodes and partitions",
		func(ctx context.Context, args []string) error {
			words, done, err := opts.parseArgs(args)
			if done || err != nil {
				return err
			}
			if len(words) == 0 {
				return cmdutil.Usagef("no command given (try: scontrol show job)")
			}
			if err := opts.checkClusters(ctx); err != nil {
				return err
			}
			return opts.Run(ctx, words)
		})
}

// commands are the supported top-level keywords, matched by unambiguous
// prefix.
var commands = []string{"show", "hold", "uhold", "release", "requeue", "update", "ping", "version", "help",
	"reconfigure"}

// slurmOnly are Slurm commands Tide does not implement; naming one gets a
// clearer error than "invalid keyword".
var slurmOnly = []string{"abort", "cancel_reboot", "cluster", "completing", "create", "delete",
	"errnumstr", "fsdampeningfactor", "getaddrs", "listpids", "notify", "pidinfo",
	"power", "reboot", "reboot_nodes", "requeuehold", "resume", "schedloglevel",
	"setdebug", "setdebugflags", "shutdown", "suspend", "takeover", "token", "top", "wait_job", "write"}

// commandLine is the command line as run; tests replace it.
var commandLine = func() []string { return os.Args }

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
	case "reconfigure":
		return o.reconfigure(ctx, rest)
	case "ping":
		if o.JSON {
			c, err := o.API()
			if err != nil {
				return err
			}
			return o.pingJSON(ctx, c)
		}
		return o.ping(ctx)
	case "version":
		return o.version()
	case "help":
		fmt.Fprint(o.IO.Out, helpText)
		return nil
	}
	return fmt.Errorf("invalid keyword: %s", args[0])
}

// showEntities are the `show` targets in their long forms, so that
// "job", "jobs", "node", "nodes", "part" and "config" all match.
var showEntities = []string{"jobs", "nodes", "partitions", "configuration", "hostnames", "hostlist", "hostlistsorted",
	"licenses", "reservations", "steps"}

var showSlurmOnly = []string{"aliases", "assoc_mgr", "bbstat", "burstbuffer", "daemons", "dwstat",
	"federation", "frontend", "slurmd", "topology"}

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
	if o.JSON {
		if err := o.showJSON(ctx, ent, rest); err != errNoJSON {
			return err
		}
	}
	switch ent {
	case "licenses":
		// Tide has no licenses or reservations: Slurm's words for none.
		fmt.Fprintln(o.IO.Out, "No licenses configured in Slurm.")
		return nil
	case "reservations":
		fmt.Fprintln(o.IO.Out, "No reservations in the system")
		return nil
	case "steps":
		return o.showSteps(ctx, rest)
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

// errNoJSON says an entity has no JSON form: it is shown as text.
var errNoJSON = errors.New("no JSON form")

// showJSON is show ENTITY with --json.
func (o *Options) showJSON(ctx context.Context, ent string, args []string) error {
	switch ent {
	case "jobs", "nodes", "partitions", "licenses", "reservations", "steps":
	default:
		return errNoJSON
	}
	if len(args) > 1 {
		return fmt.Errorf("too many arguments for keyword: show %s", ent)
	}
	c, err := o.API()
	if err != nil {
		return err
	}
	switch ent {
	case "jobs":
		return o.showJobJSON(ctx, c, args)
	case "nodes":
		return o.showNodeJSON(ctx, c, args)
	case "partitions":
		return o.showPartitionJSON(ctx, c, args)
	case "steps":
		return o.showStepsJSON(ctx, c, args)
	}
	return o.showNoneJSON(ctx, c, ent)
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
	// Exactly Slurm's line: tools parse it (Tide's own version is in
	// `tide version` and show config's TideVersion).
	fmt.Fprintf(o.IO.Out, "slurm %s\n", slurmCompat)
	return nil
}

func (o *Options) ping(ctx context.Context) error {
	c, err := o.API()
	if err != nil {
		return err
	}
	if p, ok := severalControllers(c); ok { // ping.go
		return o.pingAll(ctx, p)
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
