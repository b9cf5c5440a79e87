package opts

import (
	"strings"

	"github.com/tide-hpc/tide/cli/manpage"
)

// ManualOptions describes sbatch's options for its manual page and shell
// completion: every entry of the table the parser reads, in --help
// order, hidden spellings included.
func ManualOptions() []manpage.Option {
	t := table()
	out := make([]manpage.Option, len(t))
	for i := range t {
		o := &t[i]
		out[i] = manpage.Option{
			Long: o.Long, Short: o.Short, Arg: o.Arg, ArgName: o.argName, Help: o.help,
			Group: strings.TrimSuffix(groupTitles[o.group], ":"), Key: o.id(), Hidden: o.hidden,
			NoEffect: o.noEffect(), Env: o.env, Values: o.words,
		}
		if o.Long == "mail-type" {
			out[i].Values = mailTypes
		}
	}
	manpage.LinkAliases(out)
	return out
}

// DependencyTypes are the kinds of --dependency's items ("afterok" in
// afterok:12), as the parser checks them.
func DependencyTypes() []string { return depTypes }
