package mangen

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
	"github.com/tide-hpc/tide/cli/manpage"
	"github.com/tide-hpc/tide/cli/root"
	"github.com/tide-hpc/tide/cli/sim"
	"github.com/tide-hpc/tide/ctld"
	"github.com/tide-hpc/tide/ctld/config"
	"github.com/tide-hpc/tide/noded"
)

// module is the Go module path, to find a package's sources under src.
const module = "github.com/tide-hpc/tide"

// Main is gen-man's: flags -dir (where to write, default build/man)
// and -src (the repository's root, default "."). It returns the exit
// code.
func Main(args []string) int {
	fs := flag.NewFlagSet("gen-man", flag.ContinueOnError)
	dir := fs.String("dir", "build/man", "where to write man1/, man5/ and man8/")
	src := fs.String("src", ".", "the repository's root (docs/configuration.md, the configuration's Go sources)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "gen-man: unexpected argument %q (the flags are -dir and -src)\n", fs.Arg(0))
		return 2
	}
	if err := Generate(*dir, *src); err != nil {
		fmt.Fprintln(os.Stderr, "gen-man:", err)
		return 1
	}
	return 0
}

// Generate writes every page under dir as man(1) finds them
// (dir/man1/sbatch.1, dir/man5/tide.yaml.5, ...). src is the
// repository's root, whose docs/configuration.md and Go sources the
// configuration pages quote.
func Generate(dir, src string) error {
	pages, err := Pages(src)
	if err != nil {
		return err
	}
	for _, p := range pages {
		sub := filepath.Join(dir, fmt.Sprintf("man%d", p.Section))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		var b bytes.Buffer
		if err := manpage.Write(&b, p); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("%s.%d", p.Name, p.Section)), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Pages builds every page: the Slurm-named commands', tide(1),
// tidectld(8), tided(8) and tide.yaml(5).
func Pages(src string) ([]*manpage.Page, error) {
	var pages []*manpage.Page
	for _, c := range slurmCommands() {
		p, err := slurmPage(c)
		if err != nil {
			return nil, err
		}
		pages = append(pages, p)
	}
	pages = append(pages, tidePage(), tidectldPage())
	md, err := os.ReadFile(filepath.Join(src, "docs", "configuration.md"))
	if err != nil {
		return nil, fmt.Errorf("read the configuration reference: %w", err)
	}
	p, err := tidedPage(src, string(md))
	if err != nil {
		return nil, err
	}
	pages = append(pages, p)
	if p, err = tideYAMLPage(src, string(md)); err != nil {
		return nil, err
	}
	return append(pages, p), nil
}

func source() string { return "Tide " + root.Version }

// factory is what the pages' commands are built with: nothing reaches a
// controller, the streams are buffers.
func factory() (*cmdutil.Factory, *bytes.Buffer, *bytes.Buffer) {
	ios, _, out, errb := cmdutil.Test()
	return &cmdutil.Factory{
		IO:       ios,
		API:      func() (cmdutil.API, error) { return nil, errors.New("the manual pages ask no controller") },
		Now:      func() time.Time { return time.Unix(0, 0).UTC() },
		Getenv:   func(string) string { return "" },
		Environ:  func() []string { return nil },
		Getwd:    func() (string, error) { return "/", nil },
		Hostname: func() (string, error) { return "localhost", nil },
		UID:      func() int { return 0 },
	}, out, errb
}

// run runs a command line of the CLI and returns what it printed.
func run(args []string) (string, error) {
	f, out, errb := factory()
	if code := root.Main(args, f); code != 0 {
		return "", fmt.Errorf("%s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.String(), nil
}

// The sections every command's page shares.

func clientEnvironment() manpage.Section {
	return manpage.Section{Title: "ENVIRONMENT", Blocks: []manpage.Block{{Items: []manpage.Item{
		{Tag: "`TIDE_SOCKET`", Text: "the controller's unix socket (default `/run/tide/tidectld.sock`)."},
		{Tag: "`TIDE_CONTROLLER`", Text: "`host:port` of the controller's `api_addr`, to reach it from another host " +
			"over TLS (with standby controllers, every one's, comma-separated: requests fail over); unset: the socket."},
		{Tag: "`TIDE_JWT`", Text: "with `TIDE_CONTROLLER`, a token from `tide token`; the caller is the token's user."},
		{Tag: "`TIDE_MUNGE_SOCKET`", Text: "with `TIDE_CONTROLLER` and without `TIDE_JWT`, the `munged` that signs a " +
			"credential for each request (default `/run/munge/munge.socket.2`)."},
		{Tag: "`TIDE_CA`", Text: "with `TIDE_CONTROLLER`, the cluster CA's certificate the controller is verified " +
			"with (default `/etc/tide/ca.crt`)."},
	}}}}
}

func commandExitStatus(name string) []manpage.Block {
	blocks := []manpage.Block{{Items: []manpage.Item{
		{Tag: "0", Text: "success, also when no job matches."},
		{Tag: "1", Text: "an error: the controller unreachable or refusing, an unknown job, a failed action, " +
			"or a bad option (as Slurm's commands exit)."},
		{Tag: "2", Text: "a usage error of Tide's own checks."},
	}}}
	if name == "sbatch" {
		blocks = append(blocks, manpage.Block{Text: "With `-W`/`--wait`, sbatch exits with the job's exit code."})
	}
	if name == "srun" || name == "salloc" {
		blocks = append(blocks, manpage.Block{Text: "Once the job runs, " + name + " exits with its command's exit code."})
	}
	return blocks
}

func slurmPage(c slurmCommand) (*manpage.Page, error) {
	p := &manpage.Page{
		Name: c.name, Section: 1, Summary: c.summary, Source: source(), Synopsis: c.synopsis,
		Description: append(manpage.Para(c.description...), manpage.Block{Text: "Tide's commands behave as " +
			"Slurm " + cmdutil.SlurmVersion + "'s, with Tide's additions marked; the full reference, with " +
			"what Tide does differently, is docs/cli.md (installed under share/doc/tide)."}),
		Options:    c.options(),
		ExitStatus: commandExitStatus(c.name),
		SeeAlso:    c.seeAlso,
	}
	for _, cp := range c.capture {
		out, err := run(cp.args)
		if err != nil {
			return nil, err
		}
		if cp.from != "" {
			i := strings.Index(out, cp.from)
			if i < 0 {
				return nil, fmt.Errorf("%s printed no %q", strings.Join(cp.args, " "), cp.from)
			}
			out = out[i:]
		}
		p.Sections = append(p.Sections, manpage.Section{Title: cp.title, Blocks: []manpage.Block{{Text: cp.intro}, {Pre: out}}})
	}
	p.Sections = append(p.Sections, clientEnvironment())
	return p, nil
}

// cobraSections documents the subcommands of cmd (not cmd itself), one
// subsection each, depth first: its usage, its description and its own
// flags. Hidden commands are left out: the daemons start them.
func cobraSections(cmd *cobra.Command) []manpage.Section {
	var out []manpage.Section
	for _, sub := range cmd.Commands() {
		if sub.Hidden || sub.Name() == "help" {
			continue
		}
		var blocks []manpage.Block
		if u := sub.UseLine(); u != sub.CommandPath() {
			blocks = append(blocks, manpage.Block{Pre: u})
		}
		text := sub.Long
		if text == "" {
			text = sub.Short
		}
		for _, para := range strings.Split(text, "\n\n") {
			if strings.HasPrefix(para, "    ") || strings.HasPrefix(para, "  ") {
				blocks = append(blocks, manpage.Block{Pre: para})
			} else if t := strings.TrimSpace(para); t != "" {
				blocks = append(blocks, manpage.Block{Text: t})
			}
		}
		if opts := visible(manpage.FromFlags(sub.LocalFlags())); len(opts) > 0 {
			blocks = append(blocks, manpage.Block{Options: opts})
		}
		out = append(out, manpage.Section{Title: sub.CommandPath(), Sub: true, Blocks: blocks})
		out = append(out, cobraSections(sub)...)
	}
	return out
}

// visible leaves out hidden flags.
func visible(opts []manpage.Option) []manpage.Option {
	return slices.DeleteFunc(opts, func(o manpage.Option) bool { return o.Hidden })
}

// rootOptions are a cobra root's flags, help and version included.
func rootOptions(cmd *cobra.Command) []manpage.Option {
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag()
	return visible(manpage.FromFlags(cmd.Flags()))
}

func tidePage() *manpage.Page {
	f, _, _ := factory()
	tide := root.Command(f)
	p := &manpage.Page{
		Name: "tide", Section: 1, Summary: "Tide's command-line tools", Source: source(),
		Synopsis: []string{"tide COMMAND [OPTIONS] [ARGS...]", "sbatch|squeue|scancel|... [OPTIONS] [ARGS...]"},
		Description: manpage.Para(
			"Tide is a batch system for GPU clusters with Slurm's commands. **tide** is one binary: called "+
				"through a link named after a Slurm command (`sbatch`, `squeue`, `scancel`, `sinfo`, `scontrol`, "+
				"`sacct`, `srun`, `salloc`, `sprio`, `sstat`) it behaves as that command, each documented in "+
				"its own page; called as **tide** it takes a subcommand: a Slurm command under a short name "+
				"(`tide batch` is `sbatch`; `tide sbatch` works too), or one of Tide's own.",
			"Every command talks to the controller, tidectld(8), over its unix socket, or over TCP from "+
				"another host (ENVIRONMENT).",
		),
		Options: rootOptions(tide),
		SeeAlso: []string{"sbatch(1)", "squeue(1)", "scancel(1)", "sinfo(1)", "scontrol(1)", "sacct(1)", "srun(1)",
			"salloc(1)", "sprio(1)", "sstat(1)", "tidectld(8)", "tided(8)", "tide.yaml(5)"},
	}
	var items []manpage.Item
	var own []manpage.Section
	for _, s := range root.Subcommands() {
		tag := "`tide " + s.Name + "`"
		text := s.Short + "."
		switch s.Name {
		case "sim":
			text += " See TIDE SIM below."
		case "image":
			text += " Its commands are tided's: see tided(8), `tided image`."
		}
		if s.Slurm != "" {
			tag += ", `" + s.Slurm + "`"
			text += " See " + s.Slurm + "(1)."
		} else if s.Name != "sim" && s.Name != "image" {
			text += " See below."
			cmd := s.New(f)
			holder := &cobra.Command{Use: "tide"}
			holder.AddCommand(cmd)
			own = append(own, cobraSections(holder)...)
		}
		items = append(items, manpage.Item{Tag: tag, Text: text})
	}
	for _, sub := range tide.Commands() {
		if sub.Name() == "version" || sub.Name() == "completion" {
			holder := &cobra.Command{Use: "tide"}
			tide.RemoveCommand(sub)
			holder.AddCommand(sub)
			own = append(own, cobraSections(holder)...)
			items = append(items, manpage.Item{Tag: "`tide " + sub.Name() + "`", Text: sub.Short + ". See below."})
		}
	}
	p.Sections = append(p.Sections, manpage.Section{Title: "COMMANDS", Blocks: []manpage.Block{{Items: items}}})
	p.Sections = append(p.Sections, own...)

	simCmd := sim.NewCmd(f)
	simRoot := &cobra.Command{Use: "tide"}
	simRoot.AddCommand(simCmd)
	simSections := cobraSections(simRoot)
	simSections[0].Title = "TIDE SIM"
	p.Sections = append(p.Sections, simSections...)

	p.Sections = append(p.Sections, manpage.Section{Title: "SHELL COMPLETION", Blocks: manpage.Para(
		"`tide completion bash` (or `zsh`, `fish`, `powershell`) prints a completion script for tide and, in " +
			"bash and zsh, for the Slurm-named links too: options from each command's own option table, " +
			"option values (partitions, queues, job classes, nodes, GPU types) and the caller's job ids from " +
			"the controller, which is given a second to answer. `make install` installs the bash and zsh " +
			"scripts where bash-completion and zsh look for them; to try one, `source <(tide completion bash)`.",
	)}, clientEnvironment())
	p.ExitStatus = commandExitStatus("tide")
	return p
}

func tidectldPage() *manpage.Page {
	cmd := ctld.NewCommand()
	p := &manpage.Page{
		Name: "tidectld", Section: 8, Summary: "Tide's controller", Source: source(),
		Synopsis: []string{"tidectld [-f FILE] [OPTIONS]", "tidectld COMMAND [OPTIONS]"},
		Description: manpage.Para(
			"**tidectld** owns the cluster's state and makes every scheduling decision: it accepts jobs from "+
				"the commands over its unix socket (and, with `api_addr`, over TCP), places them on the nodes "+
				"whose tided(8) daemons report to it, and keeps jobs, accounting and the decision trail in its "+
				"SQLite database under `state_dir`.",
			"Its configuration is read from the file of `-f`/`--config` (else `$TIDE_CONF`) over the built-in "+
				"defaults, then `TIDECTLD_*` environment variables, then the flags below; tide.yaml(5) "+
				"describes every key. `scontrol reconfigure` and SIGHUP re-read it.",
		),
		Options:  rootOptions(cmd),
		Sections: append([]manpage.Section{{Title: "COMMANDS", Blocks: manpage.Para("Besides running the controller:")}}, cobraSections(cmd)...),
		ExitStatus: []manpage.Block{{Items: []manpage.Item{
			{Tag: "0", Text: "the controller stopped on SIGTERM or SIGINT, or a command succeeded."},
			{Tag: "1", Text: "an invalid configuration, or an error (printed as `tidectld: ...`)."},
		}}},
		SeeAlso: []string{"tide.yaml(5)", "tided(8)", "scontrol(1)", "tide(1)"},
	}
	p.Sections = append(p.Sections, manpage.Section{Title: "ENVIRONMENT", Blocks: []manpage.Block{{Items: []manpage.Item{
		{Tag: "`TIDE_CONF`", Text: "the configuration file when `-f` is not given."},
		{Tag: "`TIDECTLD_<KEY>`", Text: "a configuration key, upper-cased with '.' as '_' (`TIDECTLD_LOG_LEVEL=debug`, " +
			"`TIDECTLD_SCHEDULER_POLICY=backfill`); over the file, under the flags."},
	}}}})
	return p
}

func tidedPage(src, md string) (*manpage.Page, error) {
	cmd := noded.NewCommand()
	top, lists, err := configItems(noded.DefaultConfig(), src, md, "## Node: `tided.yaml`")
	if err != nil {
		return nil, err
	}
	p := &manpage.Page{
		Name: "tided", Section: 8, Summary: "Tide's node daemon", Source: source(),
		Synopsis: []string{"tided [--config FILE] [OPTIONS]", "tided COMMAND [OPTIONS]"},
		Description: manpage.Para(
			"**tided** runs on every compute node: it registers the node's CPUs, memory and GPUs with "+
				"tidectld(8), starts the jobs the controller places on the node (each under a supervisor, "+
				"in cgroups, optionally in a container), reports their ends and usage, and signals and kills "+
				"them when asked.",
			"Its configuration is the YAML file of `--config` (else `/etc/tide/tided.yaml` when it exists) "+
				"over the built-in defaults, then `TIDED_*` environment variables, then the flags below; "+
				"CONFIGURATION lists the file's keys.",
		),
		Options: rootOptions(cmd),
		ExitStatus: []manpage.Block{{Items: []manpage.Item{
			{Tag: "0", Text: "the daemon stopped on SIGTERM or SIGINT (its jobs keep running), or a command succeeded."},
			{Tag: "1", Text: "an invalid configuration, or an error."},
		}}},
		SeeAlso: []string{"tidectld(8)", "tide.yaml(5)", "tide(1)"},
	}
	p.Sections = append(p.Sections, manpage.Section{Title: "COMMANDS", Blocks: manpage.Para("Besides running the daemon:")})
	p.Sections = append(p.Sections, cobraSections(cmd)...)
	p.Sections = append(p.Sections, manpage.Section{Title: "CONFIGURATION", Blocks: []manpage.Block{
		{Text: "The keys of `tided.yaml`; a key the daemon does not know is an error. `tided config default` prints the " +
			"defaults, `tided config dump` the effective configuration."},
		{Items: top},
	}})
	p.Sections = append(p.Sections, lists...)
	p.Sections = append(p.Sections, manpage.Section{Title: "ENVIRONMENT", Blocks: []manpage.Block{{Items: []manpage.Item{
		{Tag: "`TIDED_<KEY>`", Text: "a configuration key, upper-cased with '.' as '_' (`TIDED_LOG_LEVEL=debug`); " +
			"over the file, under the flags."},
		{Tag: "`TIDE_CONTAINERD_SOCKET`", Text: "`tided image`'s containerd when `containerd.socket` is empty."},
	}}}})
	return p, nil
}

// configItems describes the keys of the configuration whose defaults
// are def: the items of the top-level keys and a section per list of
// structures, from the docs section under heading and the Go comments.
func configItems(def any, src, md, heading string) ([]manpage.Item, []manpage.Section, error) {
	keys := configKeys(def)
	godoc, err := goDocs(src, module, keyPackages(keys))
	if err != nil {
		return nil, nil, err
	}
	top, lists, _ := keyItems(keys, readDocs(md, heading), godoc)
	return top, lists, nil
}

// keyPackages are the packages that declare the keys' structs.
func keyPackages(keys []configKey) []string {
	var out []string
	for _, k := range keys {
		if p := k.Owner.PkgPath(); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func tideYAMLPage(src, md string) (*manpage.Page, error) {
	top, lists, err := configItems(config.Default(), src, md, "## Controller: `tide.yaml`")
	if err != nil {
		return nil, err
	}
	p := &manpage.Page{
		Name: "tide.yaml", Section: 5, Summary: "configuration of Tide's controller, tidectld", Source: source(),
		Synopsis: []string{"tidectld -f /etc/tide/tide.yaml"},
		Description: manpage.Para(
			"tidectld(8) reads its configuration from a YAML file (`-f`/`--config`, else `$TIDE_CONF`). Every "+
				"key is optional but `partitions` and `nodes`; an unknown key is an error, so that a misspelt "+
				"key is never silently ignored. Values are taken from the built-in defaults, then the file, "+
				"then `TIDECTLD_*` environment variables (the key upper-cased, '.' as '_'), then tidectld's "+
				"flags. Relative paths are relative to the file's folder.",
			"`tidectld config check -f FILE` validates a file and lists every problem; `tidectld config dump` "+
				"prints the effective configuration. A running controller re-reads the file on "+
				"`scontrol reconfigure` and SIGHUP; keys that need a restart are listed in docs/configuration.md.",
			"The installed sample (`etc/tide/tide.yaml` under the prefix) shows every key with a comment.",
		),
		Sections: append([]manpage.Section{{Title: "KEYS", Blocks: []manpage.Block{{Items: top}}}}, lists...),
		SeeAlso:  []string{"tidectld(8)", "tided(8)", "scontrol(1)"},
	}
	return p, nil
}
