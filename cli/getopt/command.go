package getopt

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Action is what an option asks of its command besides a value.
type Action int

// Actions. Help, Usage and Version print their text and end the command
// as soon as they are met, as Slurm's commands exit from inside their
// getopt loop.
const (
	Run Action = iota
	Help
	Usage
	Version
)

// Option is one entry of a command's option table over the command's
// options type T: its getopt spec, its --help line, and what it sets.
// Exactly one of Action, Flag, Count, Str, List and Set is given (an
// alias gives the same one as the option it names).
type Option[T any] struct {
	Spec
	// ArgName names the argument in --help and --usage. It holds no
	// brackets, so that the --usage synopsis stays one bracket deep.
	ArgName string
	// Help is the --help description, in Tide's words.
	Help string
	// Hidden keeps an entry out of --help and --usage: Slurm's hidden
	// aliases ("--users" for "--user").
	Hidden bool
	// Tide marks an option Slurm's command does not have; --help lists
	// it under "Tide options:".
	Tide bool
	// Action is Help, Usage or Version for the options that print.
	Action Action
	// Flag is set to true; Count counts occurrences (-vvv); Str takes
	// the argument (the last one wins); List gets the argument's comma
	// separated items appended; Set does anything else, with has saying
	// whether an optional argument was given.
	Flag  func(o *T) *bool
	Count func(o *T) *int
	Str   func(o *T) *string
	List  func(o *T) *[]string
	Set   func(o *T, v string, has bool) error
}

// apply acts on one occurrence of the option.
func (op *Option[T]) apply(o *T, v string, has bool) error {
	switch {
	case op.Flag != nil:
		*op.Flag(o) = true
	case op.Count != nil:
		*op.Count(o)++
	case op.Str != nil:
		*op.Str(o) = v
	case op.List != nil:
		p := op.List(o)
		*p = append(*p, strings.Split(v, ",")...)
	case op.Set != nil:
		return op.Set(o, v, has)
	}
	return nil
}

// Command is a Slurm-named command's option table and texts.
type Command[T any] struct {
	// Name is the program name texts and messages use ("squeue").
	Name string
	// Options is the table in the order of Slurm's long_options array,
	// which is the order glibc lists an ambiguous prefix's candidates
	// in; Tide's own options follow.
	Options []Option[T]
	// RequireOrder stops parsing at the first operand (sbatch, srun);
	// Slurm's other commands take options after operands too.
	RequireOrder bool
	// TryHelp prints `Try "NAME --help" for more information` after a
	// syntax error, as every Slurm command but sacct does.
	TryHelp bool
	// Operands follow the options in the usage texts
	// ("[job_id[_array_id][.step_id]]").
	Operands string
	// HelpColumn is the column --help descriptions start in (34 if 0).
	HelpColumn int
	// HelpText and UsageText, when set, write --help and --usage in
	// place of the texts generated from the table (sacct's and
	// scontrol's --help have layouts of their own).
	HelpText  func(w io.Writer)
	UsageText func(w io.Writer)
}

// Parser returns the command's getopt parser. posixlyCorrect is whether
// POSIXLY_CORRECT is set in the environment, which makes glibc stop at
// the first operand too.
func (c *Command[T]) Parser(posixlyCorrect bool) *Parser {
	p := NewFunc(len(c.Options), func(i int) *Spec { return &c.Options[i].Spec })
	p.Permute = !c.RequireOrder && !posixlyCorrect
	return p
}

// Parse reads args into o. Options act in order, as in Slurm's getopt
// loops: the first Help, Usage or Version option ends the parse with
// its Action (even before a mistake later on the line); an option whose
// Set fails ends it with that error; a syntax error (*Error) comes back
// after the options written before it have acted. operands are the
// words that are not options (Parser.Parse).
func (c *Command[T]) Parse(o *T, args []string, posixlyCorrect bool) (act Action, operands []string, err error) {
	ms, operands, gerr := c.Parser(posixlyCorrect).Parse(args)
	for _, m := range ms {
		op := &c.Options[m.Index]
		if op.Action != Run {
			return op.Action, nil, nil
		}
		if err := op.apply(o, m.Value, m.HasValue); err != nil {
			return Run, nil, err
		}
	}
	if gerr != nil {
		return Run, nil, gerr
	}
	return Run, operands, nil
}

// Names is the option as --help shows it: "-A, --account" or
// "    --start", with "=ARG" or "[=ARG]" after it.
func (op *Option[T]) Names() string {
	var b strings.Builder
	if op.Short != 0 {
		fmt.Fprintf(&b, "-%c, --%s", op.Short, op.Long)
	} else {
		fmt.Fprintf(&b, "    --%s", op.Long)
	}
	switch op.Arg {
	case RequiredArg:
		b.WriteString("=" + op.ArgName)
	case OptionalArg:
		b.WriteString("[=" + op.ArgName + "]")
	}
	return b.String()
}

// Listed returns the options --help and --usage show, in their order:
// by short letter or else long name, case folded, a lower-case letter
// before its capital; hidden aliases are left out.
func (c *Command[T]) Listed() []*Option[T] {
	var out []*Option[T]
	for i := range c.Options {
		if !c.Options[i].Hidden {
			out = append(out, &c.Options[i])
		}
	}
	key := func(op *Option[T]) string {
		if op.Short != 0 {
			return string(op.Short)
		}
		return op.Long
	}
	slices.SortStableFunc(out, func(a, b *Option[T]) int {
		ka, kb := key(a), key(b)
		if d := strings.Compare(strings.ToLower(ka), strings.ToLower(kb)); d != 0 {
			return d
		}
		return -strings.Compare(ka, kb) // "a" > "A" in ASCII: lower first
	})
	return out
}

const textWidth = 80

// WriteHelp writes --help: HelpText, or the layout of squeue's, sinfo's,
// scancel's and sprio's --help: "Usage: NAME [OPTIONS]", one option a
// line with its description from HelpColumn on, Tide's options under
// their own heading, then "Help options:".
func (c *Command[T]) WriteHelp(w io.Writer) {
	if c.HelpText != nil {
		c.HelpText(w)
		return
	}
	col := c.HelpColumn
	if col == 0 {
		col = 34
	}
	var b strings.Builder
	b.WriteString("Usage: " + c.Name + " [OPTIONS]")
	if c.Operands != "" {
		b.WriteString(" " + c.Operands)
	}
	b.WriteByte('\n')
	var tide, help []*Option[T]
	for _, op := range c.Listed() {
		switch {
		case op.Action == Help || op.Action == Usage:
			help = append(help, op)
		case op.Tide:
			tide = append(tide, op)
		default:
			writeHelpLine(&b, "  "+op.Names(), op.Help, col)
		}
	}
	if len(tide) > 0 {
		b.WriteString("\nTide options:\n")
		for _, op := range tide {
			writeHelpLine(&b, "  "+op.Names(), op.Help, col)
		}
	}
	if len(help) > 0 {
		b.WriteString("\nHelp options:\n")
		for _, op := range help {
			head := "  --" + op.Long
			if op.Short != 0 {
				head = fmt.Sprintf("  -%c, --%s", op.Short, op.Long)
			}
			writeHelpLine(&b, head, op.Help, col)
		}
	}
	io.WriteString(w, b.String())
}

// writeHelpLine writes head and text wrapped from column col on; a head
// that reaches col puts the text on the next line.
func writeHelpLine(b *strings.Builder, head, text string, col int) {
	lines := WrapWords(text, textWidth-col)
	pad := strings.Repeat(" ", col)
	if len(head) < col-1 {
		fmt.Fprintf(b, "%-*s%s\n", col, head, lines[0])
		lines = lines[1:]
	} else {
		b.WriteString(head + "\n")
	}
	for _, l := range lines {
		b.WriteString(pad + l + "\n")
	}
}

// WrapWords breaks text into lines of at most width columns (a longer
// word has a line of its own); an empty text is one empty line.
func WrapWords(text string, width int) []string {
	var lines []string
	cur := ""
	for _, word := range strings.Fields(text) {
		switch {
		case cur == "":
			cur = word
		case len(cur)+1+len(word) <= width:
			cur += " " + word
		default:
			lines = append(lines, cur)
			cur = word
		}
	}
	return append(lines, cur)
}

// WriteUsage writes --usage: UsageText, or the synopsis Slurm's commands
// print: "Usage: NAME" and one bracketed item per option (short options
// without a required argument bundled into one "[-ahv]" item), wrapped
// at 80 columns under the first item, then Operands.
func (c *Command[T]) WriteUsage(w io.Writer) {
	if c.UsageText != nil {
		c.UsageText(w)
		return
	}
	var items []string
	var bundle []byte
	for _, op := range c.Listed() {
		switch {
		case op.Short != 0 && op.Arg != RequiredArg:
			bundle = append(bundle, op.Short)
		case op.Short != 0:
			items = append(items, fmt.Sprintf("[-%c %s]", op.Short, op.ArgName))
		case op.Arg == RequiredArg:
			items = append(items, fmt.Sprintf("[--%s %s]", op.Long, op.ArgName))
		case op.Arg == OptionalArg:
			items = append(items, fmt.Sprintf("[--%s=%s]", op.Long, op.ArgName))
		default:
			items = append(items, fmt.Sprintf("[--%s]", op.Long))
		}
	}
	if len(bundle) > 0 {
		items = append(items, "[-"+string(bundle)+"]")
	}
	if c.Operands != "" {
		items = append(items, c.Operands)
	}
	lead := "Usage: " + c.Name
	pad := strings.Repeat(" ", len(lead))
	var b strings.Builder
	line := lead
	for _, it := range items {
		if len(line)+1+len(it) > textWidth && line != lead && line != pad {
			b.WriteString(line + "\n")
			line = pad
		}
		line += " " + it
	}
	b.WriteString(line + "\n")
	io.WriteString(w, b.String())
}
