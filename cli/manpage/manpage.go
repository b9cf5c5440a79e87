package manpage

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/tide-hpc/tide/cli/getopt"
)

// Option is one entry of a command's option table as its manual page and
// its shell completion see it.
type Option struct {
	// Long is the long name without dashes; "" for an option that has
	// only a short letter.
	Long string
	// Short is the short letter, 0 for none.
	Short byte
	// Arg says whether the option takes an argument (getopt's kinds:
	// an optional one only after '=' or inside a short-option cluster).
	Arg getopt.ArgKind
	// ArgName names the argument ("partition", "model|data").
	ArgName string
	// Help is the description, the one --help prints.
	Help string
	// Group is the heading the option is listed under ("GPU scheduling
	// options"); "" lists it under OPTIONS itself.
	Group string
	// Key is the option's identity: entries with one Key are one option
	// under several names (getopt.Spec.Key).
	Key string
	// Hidden options are left out of --help: Slurm's aliases and old
	// spellings. The page names them in the entry of the option they
	// stand for (AliasOf), or on their own when they stand for none.
	Hidden bool
	// AliasOf is, for a hidden option, the long name (or "-x") of the
	// listed option with the same Key.
	AliasOf string
	// Tide marks an option Slurm's command does not have.
	Tide bool
	// NoEffect marks an option accepted for compatibility and ignored
	// (with a warning).
	NoEffect bool
	// Env lists the environment variables that set the option.
	Env []string
	// Values are the words the option accepts, when they are a fixed
	// set.
	Values []string
}

// Name is the option as a shell user writes it: "--long", or "-x" for
// a short-only option.
func (o *Option) Name() string {
	if o.Long != "" {
		return "--" + o.Long
	}
	return "-" + string(o.Short)
}

// Words returns the fixed words the option's argument is one of:
// Values, or the words of an ArgName written as alternatives
// ("model|data", "yes|no", "0|1"); nil when the argument is free.
func (o *Option) Words() []string {
	if len(o.Values) > 0 {
		return o.Values
	}
	if !strings.Contains(o.ArgName, "|") {
		return nil
	}
	words := strings.Split(o.ArgName, "|")
	for _, w := range words {
		if w == "" || strings.IndexFunc(w, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
		}) >= 0 {
			return nil
		}
	}
	return words
}

// FromGetopt describes a cli/getopt option table, every entry in table
// order (hidden aliases too, with AliasOf set).
func FromGetopt[T any](table []getopt.Option[T]) []Option {
	out := make([]Option, len(table))
	for i := range table {
		op := &table[i]
		out[i] = Option{
			Long: op.Long, Short: op.Short, Arg: op.Arg, ArgName: op.ArgName, Help: op.Help,
			Key: op.Spec.Key(), Hidden: op.Hidden, Tide: op.Tide,
		}
	}
	LinkAliases(out)
	return out
}

// LinkAliases sets AliasOf of every hidden option to the first listed
// option with its Key.
func LinkAliases(opts []Option) {
	for i := range opts {
		if !opts[i].Hidden {
			continue
		}
		for j := range opts {
			if !opts[j].Hidden && opts[j].Key == opts[i].Key {
				opts[i].AliasOf = opts[j].Name()
				break
			}
		}
	}
}

// FromFlags describes a cobra command's flag set, every flag in the set's
// order (deprecated and hidden flags marked Hidden).
func FromFlags(fs *pflag.FlagSet) []Option {
	var out []Option
	fs.VisitAll(func(f *pflag.Flag) {
		o := Option{Long: f.Name, Key: f.Name, Hidden: f.Hidden || f.Deprecated != ""}
		if f.Shorthand != "" {
			o.Short = f.Shorthand[0]
		}
		name, usage := pflag.UnquoteUsage(f)
		o.Help = usage
		// pflag names an argument by its Go type unless the usage
		// quotes a name (`FILE`); a reader wants what it means.
		switch name {
		case "string":
			name = "value"
		case "int", "uint", "int64", "uint64", "float", "float64":
			name = "n"
		case "strings", "stringSlice", "stringArray":
			name = "list"
		}
		switch {
		case f.Value.Type() == "bool" || f.NoOptDefVal != "" && name == "":
			o.Arg = getopt.NoArg
		case f.NoOptDefVal != "":
			o.Arg, o.ArgName = getopt.OptionalArg, name
		default:
			o.Arg, o.ArgName = getopt.RequiredArg, name
		}
		if d := f.DefValue; o.Arg != getopt.NoArg && d != "" && d != "0" && d != "0s" && d != "[]" && !strings.Contains(usage, "default") {
			o.Help += " (default " + d + ")"
		}
		out = append(out, o)
	})
	return out
}

// Page is one manual page.
type Page struct {
	// Name is the page's name ("sbatch", "tide.yaml") and Section its
	// section (1 commands, 5 files, 8 daemons).
	Name    string
	Section int
	// Summary is the NAME line's text after the dash.
	Summary string
	// Source is the footer's left part ("Tide 0.1.0").
	Source string
	// Synopsis holds the usage forms, one a line, the command first.
	Synopsis []string
	// Description is the DESCRIPTION section.
	Description []Block
	// Options are listed under OPTIONS, grouped by Group in the order
	// the groups first appear; OptionsTitle renames the section and
	// OptionsIntro comes before the list.
	Options      []Option
	OptionsTitle string
	OptionsIntro []Block
	// Sections follow OPTIONS (COMMANDS, ENVIRONMENT, FILES, ...).
	Sections []Section
	// ExitStatus is the EXIT STATUS section.
	ExitStatus []Block
	// SeeAlso names other pages: "squeue(1)".
	SeeAlso []string
}

// Section is a titled part of a page.
type Section struct {
	Title  string
	Blocks []Block
	// Sub marks a subsection (.SS) rather than a section (.SH).
	Sub bool
}

// Block is one paragraph of a section: text, a list of tagged
// paragraphs, preformatted lines, or options (listed as under OPTIONS).
// Text and tags use a little of Markdown: `code` and **bold** are set
// bold, [text](link) is its text.
type Block struct {
	Text    string
	Items   []Item
	Pre     string
	Options []Option
}

// Item is a tagged paragraph: a term and its text.
type Item struct {
	Tag, Text string
}

// Para returns text blocks, one per paragraph.
func Para(paras ...string) []Block {
	out := make([]Block, len(paras))
	for i, p := range paras {
		out[i] = Block{Text: p}
	}
	return out
}
