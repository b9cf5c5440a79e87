// Package root builds the multi-call `tide` binary: invoked as sbatch,
// squeue, scancel, sinfo, scontrol or sacct (links to tide) it behaves as
// that Slurm command; invoked as tide it takes a subcommand (batch, queue,
// cancel, info, control, acct, events, audit).
package root

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/checkpoint"
	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/events"
	"github.com/tide-hpc/tide/cli/queues"
	"github.com/tide-hpc/tide/cli/sacct"
	"github.com/tide-hpc/tide/cli/salloc"
	"github.com/tide-hpc/tide/cli/sbatch"
	"github.com/tide-hpc/tide/cli/scancel"
	"github.com/tide-hpc/tide/cli/scontrol"
	"github.com/tide-hpc/tide/cli/sinfo"
	"github.com/tide-hpc/tide/cli/sprio"
	"github.com/tide-hpc/tide/cli/squeue"
	"github.com/tide-hpc/tide/cli/srun"
	"github.com/tide-hpc/tide/cli/sstat"
	"github.com/tide-hpc/tide/cli/token"
	"github.com/tide-hpc/tide/cli/ui"
)

// Version is Tide's own version, which `tide version` and `tide
// --version` print. The Slurm-named commands' -V/--version print the
// Slurm release they behave as instead (cmdutil.SlurmVersion), alone on
// its line, because tools parse it.
var Version = "0.1.0"

type command struct {
	slurm, tide string
	build       func(*cmdutil.Factory) *cobra.Command
	short       string
}

// commands maps program names to constructors. Slurm names dispatch
// when the binary is called through a link; the short tide names are
// subcommands. Every entry is constant (constructors are named
// functions), so the table is laid out by the compiler and costs the
// commands nothing at initialisation.
var commands = []command{
	{"sbatch", "batch", sbatch.NewCmd, "Submit a batch script"},
	{"squeue", "queue", squeue.NewCmd, "Show pending and running jobs"},
	{"scancel", "cancel", scancel.NewCmd, "Cancel or signal jobs"},
	{"sinfo", "info", sinfo.NewCmd, "Show partitions and nodes"},
	{"scontrol", "control", scontrol.NewCmd, "Show and change jobs, nodes and partitions"},
	{"sacct", "acct", sacct.NewCmd, "Show accounting of finished and running jobs"},
	{"srun", "run", srun.NewCmd, "Run a parallel job step (in an allocation, or in a new one)"},
	{"salloc", "alloc", salloc.NewCmd, "Obtain an allocation and run a command (default: a shell) in it"},
	{"", "events", events.NewCmd, "Show a job's trail of state changes and decisions"},
	{"", "audit", events.NewAuditCmd, "Show who did what (operators)"},
	{"sprio", "prio", sprio.NewCmd, "Show the factors of pending jobs' priority (level, aging, queue share)"},
	{"sstat", "stat", sstat.NewCmd, "Show what the running steps of running jobs use so far (CPU, memory, I/O)"},
	{"", "queues", queues.NewCmd, "Show the queues' guaranteed shares and use, and the job classes"},
	{"", "checkpoint-done", checkpoint.NewCmd, "Acknowledge that a job finished writing a checkpoint"},
	{"", "token", token.NewCmd, "Get a token (JWT) for the controller's TCP API (TIDE_CONTROLLER, TIDE_JWT)"},
	{"", "ui", ui.NewCmd, "Print a sign-in link to the web dashboard (or the ssh -L way to it)"},
	{"", "sim", newSimHandoff, "Replay a job trace through the scheduler and compare policies"},
	{"", "image", newImageHandoff, "Manage container images in this node's containerd (node-side, root)"},
}

// SlurmNames lists the names `make build` links to tide.
func SlurmNames() []string {
	var out []string
	for _, c := range commands {
		if c.slurm != "" {
			out = append(out, c.slurm)
		}
	}
	sort.Strings(out)
	return out
}

// newCmd builds c's command to run on its own, as its link or as a tide
// subcommand. The Slurm commands have no "completion" subcommand:
// Slurm's have none, cobra's would shadow an operand of that name
// ("sbatch completion" submits ./completion), and setting it up costs
// every run a command, a Sprintf and a search of the arguments. (`tide
// completion` stays.)
func (c command) newCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := c.build(f)
	if c.slurm != "" {
		cmd.CompletionOptions.DisableDefaultCmd = true
	}
	return cmd
}

// Main runs the CLI with os.Args-style args and returns the exit code.
func Main(args []string, f *cmdutil.Factory) int {
	prog := filepath.Base(args[0])
	for _, c := range commands {
		if c.slurm != "" && prog == c.slurm {
			return Run(c.newCmd(f), args[1:], prog, f)
		}
	}
	if len(args) > 1 {
		sub := args[1]
		for _, c := range commands {
			if sub == c.tide || (c.slurm != "" && sub == c.slurm) {
				name := c.slurm
				if name == "" {
					name = "tide " + c.tide
				}
				return Run(c.newCmd(f), args[2:], name, f)
			}
		}
	}
	return Run(newTide(f), args[1:], "tide", f)
}

// Run executes cmd as program prog with Slurm-style error reporting and
// returns the exit code (tide-sim, which tide hands over to, uses it too).
func Run(cmd *cobra.Command, args []string, prog string, f *cmdutil.Factory) int {
	cmd.SetIn(f.IO.In)
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	err := cmdutil.Execute(cmd, args)
	if err != nil && isFlagError(err) {
		err = &cmdutil.UsageError{Msg: err.Error(), Hint: fmt.Sprintf("Try \"%s --help\" for more information", prog)}
	}
	cmdutil.PrintError(f.IO.ErrOut, strings.TrimPrefix(prog, "tide "), err)
	return cmdutil.ExitCode(err)
}

// isFlagError tells cobra's flag-parsing errors (usage errors, exit 2)
// from errors of the command itself.
func isFlagError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument", "unknown command", "bad flag syntax"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// newTide is the `tide` command itself, listing subcommands.
func newTide(f *cmdutil.Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "tide <command> [options]",
		Short: "Tide: a GPU batch system with Slurm's commands",
		Long: "Tide's command-line tools. Called through the links sbatch, squeue, scancel, sinfo,\n" +
			"scontrol and sacct it behaves as those Slurm commands; as `tide` it takes a subcommand.",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		Version: Version,
	}
	root.SetVersionTemplate("tide {{.Version}}\n")
	for _, c := range commands {
		c := c
		sub := &cobra.Command{
			Use:                c.tide,
			Short:              c.short,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				name := c.slurm
				if name == "" {
					name = "tide " + c.tide
				}
				if code := Run(c.newCmd(f), args, name, f); code != 0 {
					return &cmdutil.SilentError{Code: code}
				}
				return nil
			},
		}
		if c.slurm != "" {
			sub.Aliases = []string{c.slurm}
		}
		root.AddCommand(sub)
	}
	root.AddCommand(&cobra.Command{
		Use: "version", Short: "Print Tide's version (the Slurm commands' -V prints the Slurm release they follow)", Args: cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "tide", Version) },
	})
	addCompletion(root, f)
	return root
}
