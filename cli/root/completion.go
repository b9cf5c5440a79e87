package root

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tide-hpc/tide/cli/cmdutil"
)

// Shell completion. `tide completion bash|zsh|fish|powershell` prints
// cobra's script for tide, and for bash and zsh adds the Slurm-named
// links (sbatch, squeue, ...), which have no completion command of their
// own (Slurm's have none, and "sbatch completion" must submit
// ./completion). What a word may become is decided by tide itself, from
// the command's option table (completion_engine.go) and the controller
// (completion_values.go):
//
//   - bash asks `tide __complete-bash WORDBREAKS LINE` for the links: the
//     script needs neither the bash-completion package nor cobra's
//     functions, and tide reads the line as the command would;
//   - zsh completes "sbatch ..." as "tide sbatch ..." with cobra's
//     function, which asks `tide __complete sbatch ...`; that, and
//     "tide batch --gp<TAB>" in every shell, reach the engine through
//     each subcommand's ValidArgsFunction.

// Subcommand is one of tide's subcommands, as its manual page lists it.
type Subcommand struct {
	// Name is tide's name for it ("batch"), Slurm the link's ("sbatch";
	// "" for tide's own).
	Name, Slurm, Short string
	// New builds it as tide runs it. Tide hands some over to another
	// binary (sim, image): theirs take every word unparsed.
	New func(*cmdutil.Factory) *cobra.Command
}

// Subcommands lists tide's subcommands in `tide --help`'s order.
func Subcommands() []Subcommand {
	out := make([]Subcommand, len(commands))
	for i, c := range commands {
		out[i] = Subcommand{Name: c.tide, Slurm: c.slurm, Short: c.short, New: c.newCmd}
	}
	return out
}

// Command returns the tide command itself as Main runs it.
func Command(f *cmdutil.Factory) *cobra.Command { return newTide(f) }

// addCompletion gives tide's command tree its completion commands and
// its subcommands their completion.
func addCompletion(root *cobra.Command, f *cmdutil.Factory) {
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newCompletionCmd(), newBashCompleteCmd(f))
	for _, sub := range root.Commands() {
		for _, c := range commands {
			if sub.Name() == c.tide {
				sub.ValidArgsFunction = cobraCompletion(c, f)
			}
		}
	}
}

// specOf is what the engine knows of subcommand c, or nil.
func specOf(c command, f *cmdutil.Factory) *compSpec {
	if c.slurm != "" {
		return slurmSpec(c.slurm)
	}
	return tideSpec(c, f)
}

// cobraCompletion answers cobra's __complete for subcommand c, whose
// words cobra hands over unparsed.
func cobraCompletion(c command, f *cmdutil.Factory) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		spec := specOf(c, f)
		if spec == nil {
			return nil, cobra.ShellCompDirectiveDefault
		}
		comp, cancel := newCompleter(f)
		defer cancel()
		return toCobra(spec.complete(comp, args, toComplete), toComplete)
	}
}

// toCobra turns the engine's answer into cobra's. Cobra's scripts
// complete "--opt=val" as "val" (they keep "--opt=" themselves), so the
// candidates lose what precedes the first '=' of such a word.
func toCobra(r compResult, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	strip := 0
	if strings.HasPrefix(toComplete, "-") {
		strip = strings.IndexByte(toComplete, '=') + 1
	}
	var out []cobra.Completion
	for _, c := range r.Cands {
		if len(c.Word) < strip {
			continue
		}
		w := c.Word[strip:]
		if c.Desc != "" {
			out = append(out, cobra.CompletionWithDesc(w, c.Desc))
		} else {
			out = append(out, w)
		}
	}
	var d cobra.ShellCompDirective
	switch r.Kind {
	case compWords:
		d = cobra.ShellCompDirectiveNoFileComp
	case compDirs:
		d = cobra.ShellCompDirectiveFilterDirs
	default:
		d = cobra.ShellCompDirectiveDefault
	}
	if noSpace(r) {
		d |= cobra.ShellCompDirectiveNoSpace
	}
	return out, d
}

// noSpace says whether the shell must leave the cursor on the word: the
// engine said so, or the one candidate ends where more must follow.
func noSpace(r compResult) bool {
	if r.NoSpace {
		return true
	}
	if len(r.Cands) != 1 || r.Cands[0].Word == "" {
		return false
	}
	w := r.Cands[0].Word
	return strings.ContainsAny(w[len(w)-1:], "=:,/")
}

// newBashCompleteCmd is the hidden `tide __complete-bash WORDBREAKS
// LINE` the bash script runs for the links. It always succeeds, and
// prints nothing for a line it cannot complete.
func newBashCompleteCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:                "__complete-bash WORDBREAKS LINE",
		Short:              "Complete a Slurm-named command's line for bash (used by tide completion bash)",
		Hidden:             true,
		DisableFlagParsing: true,
		Args:               cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 2 {
				writeBashCompletion(f.IO.Out, f, args[0], args[1])
			}
			return nil
		},
	}
}

// writeBashCompletion completes line (the command line up to the
// cursor) for bash, whose word breaks are breaks. What it prints:
//
//	KIND NOSPACE STRIP      words, files, dirs or commands; 1 or 0; a count
//	PREPEND                 put before each file, directory or command name
//	PARTIAL                 what those names are completed from (compgen)
//	CANDIDATE...            one a line, ready for COMPREPLY
//
// Bash replaces only the part of the word after its last word-break
// character (the ':' in "gpu:h1", the '=' in "--partition=gp"), so the
// candidates, which are whole words, lose what comes before it; STRIP is
// how much of each compgen name to drop for the same reason.
func writeBashCompletion(w io.Writer, f *cmdutil.Factory, breaks, line string) {
	words, raw := shellWords(line)
	if len(words) < 2 {
		return
	}
	spec := slurmSpec(filepath.Base(words[0]))
	if spec == nil {
		return
	}
	comp, cancel := newCompleter(f)
	defer cancel()
	r := spec.complete(comp, words[1:len(words)-1], words[len(words)-1])

	// The part of the word bash does not replace.
	seps := strings.Map(func(c rune) rune {
		if strings.ContainsRune(" \t\n\"'\\", c) {
			return -1
		}
		return c
	}, breaks)
	pre := raw[:strings.LastIndexAny(raw, seps)+1]
	if strings.ContainsAny(pre, "\"'\\") {
		// A quoted word: its written and its read forms differ, and the
		// candidates cannot be lined up with what bash replaces.
		return
	}
	var b bytes.Buffer
	kind := [...]string{compWords: "words", compFiles: "files", compDirs: "dirs", compCommands: "commands"}[r.Kind]
	prepend, strip := "", 0
	switch {
	case r.Kind == compWords:
	case strings.HasPrefix(r.Prefix, pre):
		prepend = r.Prefix[len(pre):]
	case strings.HasPrefix(pre, r.Prefix):
		strip = len(pre) - len(r.Prefix)
	}
	ns := 0
	if noSpace(r) {
		ns = 1
	}
	fmt.Fprintf(&b, "%s %d %d\n%s\n%s\n", kind, ns, strip, prepend, r.Partial)
	for _, c := range r.Cands {
		if strings.HasPrefix(c.Word, pre) {
			b.WriteString(bashQuote(c.Word[len(pre):]) + "\n")
		}
	}
	w.Write(b.Bytes())
}

// shellWords splits a command line as the shell would (blanks, quotes,
// backslashes), returning the words read and the last word as written.
// A line that ends in a blank ends with an empty word.
func shellWords(line string) (words []string, last string) {
	var cur strings.Builder
	in, start := false, 0
	var quote byte
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case quote == '\'':
			if ch == '\'' {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case quote == '"':
			switch {
			case ch == '"':
				quote = 0
			case ch == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0:
				i++
				cur.WriteByte(line[i])
			default:
				cur.WriteByte(ch)
			}
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			if !in {
				in, start = true, i
			}
			switch ch {
			case '\'', '"':
				quote = ch
			case '\\':
				if i+1 < len(line) {
					i++
					cur.WriteByte(line[i])
				}
			default:
				cur.WriteByte(ch)
			}
		}
	}
	if !in {
		return append(words, ""), ""
	}
	return append(words, cur.String()), line[start:]
}

// bashQuote escapes what bash would otherwise read as syntax when it
// inserts a candidate.
func bashQuote(s string) string {
	var b strings.Builder
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_./:=@%+,-", c)) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// newCompletionCmd is `tide completion SHELL`, in place of cobra's own:
// the same scripts, with the links added for bash and zsh.
func newCompletionCmd() *cobra.Command {
	var noDesc bool
	cmd := &cobra.Command{
		Use:   "completion <bash|zsh|fish|powershell>",
		Short: "Print a shell completion script for tide and the Slurm-named commands",
		Long: "Print a completion script for tide and, in bash and zsh, for the Slurm-named commands\n" +
			"(sbatch, squeue, ...): options from each command's own option table, option values\n" +
			"(partitions, queues, job classes, nodes, GPU types) and the caller's job ids from the\n" +
			"controller. Load it in the current shell with\n\n" +
			"    source <(tide completion bash)\n\n" +
			"or install it: make install puts it where bash-completion and zsh find it.",
		Args: cobra.NoArgs,
	}
	gen := func(name string, write func(root *cobra.Command, w io.Writer, desc bool) error) *cobra.Command {
		c := &cobra.Command{
			Use:   name,
			Short: "Print the completion script for " + name,
			Args:  cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				return write(c.Root(), c.OutOrStdout(), !noDesc)
			},
		}
		if name != "powershell" {
			c.Flags().BoolVar(&noDesc, "no-descriptions", false, "leave the candidates' descriptions out")
		}
		return c
	}
	cmd.AddCommand(
		gen("bash", writeBashScript),
		gen("zsh", writeZshScript),
		gen("fish", func(root *cobra.Command, w io.Writer, desc bool) error { return root.GenFishCompletion(w, desc) }),
		gen("powershell", func(root *cobra.Command, w io.Writer, _ bool) error {
			return root.GenPowerShellCompletionWithDesc(w)
		}),
	)
	return cmd
}

// writeBashScript writes cobra's bash script for tide, then the links'.
func writeBashScript(root *cobra.Command, w io.Writer, desc bool) error {
	if err := root.GenBashCompletionV2(w, desc); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, bashLinks, strings.Join(SlurmNames(), " "))
	return err
}

// bashLinks completes the Slurm-named links (%s: their names). It finds
// tide beside the link it completes (an installed PREFIX/bin, or bin/ of
// a build), else on PATH.
const bashLinks = `
# Completion of the Slurm-named commands, links to tide. Tide reads the
# line up to the cursor with the command's own option table and answers
# (tide __complete-bash); this needs neither bash-completion nor the
# functions above.
_tide_complete_slurm()
{
    local self tide=tide
    self=$(type -P -- "${COMP_WORDS[0]}" 2>/dev/null)
    [[ $self == */* && -x ${self%%/*}/tide ]] && tide=${self%%/*}/tide
    local out
    out=$("$tide" __complete-bash "$COMP_WORDBREAKS" "${COMP_LINE:0:COMP_POINT}" 2>/dev/null) || return 0
    local -a lines names=()
    mapfile -t lines <<<"$out"
    local kind nospace strip name
    read -r kind nospace strip <<<"${lines[0]}"
    local prepend=${lines[1]} partial=${lines[2]}
    COMPREPLY=("${lines[@]:3}")
    case $kind in
    files) mapfile -t names < <(compgen -f -- "$partial") ;;
    dirs) mapfile -t names < <(compgen -d -- "$partial") ;;
    commands) mapfile -t names < <(compgen -c -- "$partial") ;;
    esac
    if ((${#names[@]})); then
        [[ $kind == commands ]] || compopt -o filenames 2>/dev/null
        for name in "${names[@]}"; do
            COMPREPLY+=("$prepend${name:strip}")
        done
    fi
    if [[ $nospace == 1 ]]; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}
complete -F _tide_complete_slurm %s
`

// writeZshScript writes cobra's zsh script for tide with the links
// added: named on its #compdef line (so that compinit binds them when the
// file is in fpath), completed as "tide NAME ..." by cobra's _tide.
func writeZshScript(root *cobra.Command, w io.Writer, desc bool) error {
	var b bytes.Buffer
	var err error
	if desc {
		err = root.GenZshCompletion(&b)
	} else {
		err = root.GenZshCompletionNoDesc(&b)
	}
	if err != nil {
		return err
	}
	names := strings.Join(SlurmNames(), " ")
	s := b.String()
	const head, tail = "#compdef tide\n", "# don't run the completion function when being source-ed or eval-ed"
	i := strings.Index(s, tail)
	if !strings.HasPrefix(s, head) || i < 0 {
		return fmt.Errorf("cobra's zsh script changed: no %q line or no %q", strings.TrimSpace(head), tail)
	}
	s = "#compdef tide " + names + "\n" + s[len(head):i]
	_, err = fmt.Fprintf(w, "%s%s", s, fmt.Sprintf(zshLinks, names, strings.ReplaceAll(names, " ", "|")))
	return err
}

// zshLinks completes the links (%s: their names, then the same joined by
// '|'), and replaces cobra's last lines, which would run _tide for them.
const zshLinks = `# Completion of the Slurm-named commands, links to tide: "sbatch ..." is
# completed as "tide sbatch ..." (tide found beside the link, else on
# PATH), which _tide above asks tide about.
_tide_slurm()
{
    local tide=tide
    local self=${commands[${words[1]}]:-${words[1]}}
    [[ $self == */* && -x ${self:h}/tide ]] && tide=${self:h}/tide
    words=("$tide" "${words[1]:t}" "${(@)words[2,-1]}")
    (( CURRENT++ ))
    _tide
}
compdef _tide_slurm %s

# don't run the completion function when being source-ed or eval-ed
if [ "$funcstack[1]" = "_tide" ]; then
    case ${words[1]:t} in
    (%s) _tide_slurm ;;
    (*) _tide ;;
    esac
fi
`
