package srun

import (
	"slices"
	"strings"

	"github.com/tide-hpc/tide/cli/getopt"
	"github.com/tide-hpc/tide/cli/manpage"
)

// ManualOptions describes srun's options (salloc's when salloc is true)
// for the manual page and shell completion: every entry of the table
// the command's parser reads (tableOf), hidden spellings included,
// grouped as --help groups them.
func ManualOptions(salloc bool) []manpage.Option {
	c := forSrun
	if salloc {
		c = forSalloc
	}
	es := tableOf(c)
	out := make([]manpage.Option, 0, len(es))
	groups := make([]int, 0, len(es))
	for _, e := range es {
		s := e.spec()
		o := manpage.Option{Long: s.Long, Short: s.Short, Arg: s.Arg, Key: s.Key()}
		var g int
		if sh := e.shared; sh != nil {
			o.ArgName, o.Help, o.Hidden, g = sh.arg0, sh.help, sh.hidden, sh.group
		} else {
			own := e.own
			o.ArgName, o.Help, o.Hidden, g = own.arg0, own.help, own.hidden || own.help == "", own.group
		}
		if o.Arg == getopt.OptionalArg && o.ArgName == "" {
			o.ArgName = "value"
		}
		o.Group = strings.TrimSuffix(groupTitles[g], ":")
		out = append(out, o)
		groups = append(groups, g)
	}
	// --help's order: by group, then by name within it.
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return groups[a] - groups[b] })
	sorted := make([]manpage.Option, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	manpage.LinkAliases(sorted)
	return sorted
}
